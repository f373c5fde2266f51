"""The README's test command is exactly the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALL = re.compile(r"^(?:python -m )?pip install\b")


def commands_of(line: str) -> list[str]:
    """The ``&&``-separated commands of a shell line, without the install steps."""
    return [part.strip() for part in line.split("&&") if not INSTALL.match(part.strip())]


def readme_test_line() -> str:
    blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    lines = [line for block in blocks for line in block.splitlines() if "pytest" in line]
    assert len(lines) == 1, lines
    line: str = lines[0]
    return line


def ci_test_line() -> str:
    script = (REPO / ".ci" / "run").read_text().splitlines()
    lines = [line for line in script if "pytest" in line and not line.lstrip().startswith("#")]
    assert len(lines) == 1, lines
    return lines[0]


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = commands_of(readme_test_line())

    assert readme == commands_of(ci_test_line())
    assert readme[-1].startswith("pytest") and "mypy" in readme


#: The editable install of the test extra. ``strict`` mode links the three folders into one
#: ``oom_wizard`` tree under ``build/``, which mypy can read (the default mode maps the package
#: with an import hook, which mypy cannot follow).
INSTALL_TEST_EXTRA = "pip install -e '.[test]' --config-settings editable_mode=strict"


def test_readme_installs_the_test_extra_before_testing() -> None:
    assert readme_test_line().startswith(f"{INSTALL_TEST_EXTRA} && ")


def test_ci_installs_the_test_extra_as_the_readme_does() -> None:
    script = (REPO / ".ci" / "run").read_text()
    assert INSTALL_TEST_EXTRA.replace("pip install", "pip install --quiet") in script


#: The README is for users: what it is, how to start, where to read more. The specification lives
#: beside what it specifies (screens/README.md, wizard/commands/README.md,
#: wizard/rules/memory/MEMORY.md, wizard/ARCHITECTURE.md, bench/README.md).
README_MOST_LINES = 250

DOCS = (
    "README.md",
    "screens/README.md",
    "wizard/commands/README.md",
    "wizard/rules/memory/MEMORY.md",
    "wizard/ARCHITECTURE.md",
    "bench/README.md",
)


def test_the_readme_is_short_enough_to_read() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= README_MOST_LINES


def test_every_relative_link_of_the_docs_names_a_file_of_the_checkout() -> None:
    broken = [
        f"{doc}: {target}"
        for doc in DOCS
        for target in re.findall(r"\]\(([^)#\s]+)\)", (REPO / doc).read_text())
        if "://" not in target and not (REPO / doc).parent.joinpath(target).exists()
    ]
    assert broken == []
