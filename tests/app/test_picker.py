"""The load screen's picker and path completion offer folders, job configs and (for the log
field) training logs only."""

from __future__ import annotations

from pathlib import Path

from oom_wizard.screens.load import ConfigTree, PathSuggester, offered


def _folder(tmp_path: Path) -> Path:
    for name in (
        "job.yaml",
        "job.oomfix.yaml",
        "job.oomfix.changelog.json",
        "ui.json",
        ".job_config.json",
        ".hidden.yaml",
        "log.txt",
        "notes.md",
    ):
        (tmp_path / name).write_text("{}\n", encoding="utf-8")
    (tmp_path / "output").mkdir()
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_the_tree_lists_configs_and_folders_but_no_change_log(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    shown = ConfigTree.filter_paths(None, folder.iterdir())  # type: ignore[arg-type]
    assert sorted(path.name for path in shown) == [
        ".job_config.json",
        "job.oomfix.yaml",
        "job.yaml",
        "log.txt",
        "output",
        "ui.json",
    ]
    assert not offered(folder / "log.txt")  # a log is never read as the config


async def test_completion_never_offers_a_change_log(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    suggester = PathSuggester()
    assert await suggester.get_suggestion(f"{folder}/job.oomfix.") == f"{folder}/job.oomfix.yaml"
    assert await suggester.get_suggestion(f"{folder}/lo") is None
    logs = PathSuggester(logs=True)
    assert await logs.get_suggestion(f"{folder}/lo") == f"{folder}/log.txt"
    assert await logs.get_suggestion(f"{folder}/job") is None
