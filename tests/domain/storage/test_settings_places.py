"""Where the settings file is on each platform: XDG on Linux and the other Unixes, the roaming
AppData on Windows, Application Support on macOS. The Windows folder comes from platformdirs'
Windows rules with the one call that needs Windows (the known-folder lookup) answered here."""

from __future__ import annotations

from pathlib import Path, PureWindowsPath

import platformdirs.windows
import pytest

from oom_wizard.storage.settings import settings_path, settings_place


@pytest.mark.parametrize("platform", ["linux", "freebsd14", "cygwin"])
def test_linux_and_the_other_unixes_keep_xdg(platform: str, own_config_home: Path) -> None:
    assert settings_path(platform) == own_config_home / "oom-wizard" / "settings.json"
    assert settings_place(platform).startswith("`$XDG_CONFIG_HOME/oom-wizard/settings.json`")


def test_windows_keeps_them_in_the_roaming_appdata(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def known_folder(name: str) -> str:
        asked.append(name)
        return r"C:\Users\me\AppData\Roaming"

    monkeypatch.setattr(platformdirs.windows, "get_win_folder", known_folder)
    found = settings_path("win32")  # XDG_CONFIG_HOME is set (conftest): Windows ignores it
    assert asked == ["CSIDL_APPDATA"]
    assert PureWindowsPath(str(found)) == PureWindowsPath(
        r"C:\Users\me\AppData\Roaming\oom-wizard\settings.json"
    )
    assert settings_place("win32") == r"`%APPDATA%\oom-wizard\settings.json`"


def test_macos_keeps_them_in_application_support(
    monkeypatch: pytest.MonkeyPatch, own_config_home: Path
) -> None:
    # platformdirs honours XDG_CONFIG_HOME on macOS when it is set, as the XDG tools there do.
    assert settings_path("darwin") == own_config_home / "oom-wizard" / "settings.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    expected = Path.home() / "Library" / "Application Support" / "oom-wizard" / "settings.json"
    assert settings_path("darwin") == expected
    assert "Application Support" in settings_place("darwin")
