"""``oom-wizard completion bash|zsh|fish``: print the shell's completion script.

The script is written from the parser itself (:func:`outline` reads argparse's structure:
the commands, their options, the choices and the options that take a file), so that it names
what this version accepts. It is static: a Tab runs the shell's own code, never
``oom-wizard``. How to install it is in wizard/commands/README.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias

from oom_wizard.errors import PROGRAM

Shell: TypeAlias = Literal["bash", "zsh", "fish"]
SHELLS: Final[tuple[Shell, ...]] = ("bash", "zsh", "fish")

Takes: TypeAlias = Literal["nothing", "file", "choice", "text"]


@dataclass(frozen=True)
class Option:
    """One option of a command: its spellings, what its value is, its help."""

    flags: tuple[str, ...]
    takes: Takes
    choices: tuple[str, ...]
    help: str


@dataclass(frozen=True)
class Command:
    """One subcommand: its options, and the choices of its first argument (none: files)."""

    name: str
    help: str
    options: tuple[Option, ...]
    arguments: tuple[str, ...]


@dataclass(frozen=True)
class Outline:
    """The command line as completion sees it: the options before a command, the commands,
    and the one a bare ``oom-wizard ARG`` runs."""

    options: tuple[Option, ...]
    commands: tuple[Command, ...]
    default: str


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``completion``."""
    parser = subparsers.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description=(
            "Print the completion script of SHELL, for the shell to source (see "
            'wizard/commands/README.md): bash: eval "$(oom-wizard completion bash)" in '
            "~/.bashrc; zsh: the same in ~/.zshrc; fish: oom-wizard completion fish > "
            "~/.config/fish/completions/oom-wizard.fish"
        ),
    )
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the script (``args.parser``: the whole command line, set by ``cli``)."""
    sys.stdout.write(script(outline(args.parser, default="open"), args.shell))
    return 0


def script(line: Outline, shell: Shell) -> str:
    """The completion script of ``shell`` for ``line``."""
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](line)


# --- argparse's structure -----------------------------------------------------------------------


def outline(parser: argparse.ArgumentParser, *, default: str) -> Outline:
    """What completion needs of ``parser``: argparse keeps it in its actions."""
    commands: list[Command] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                commands.append(
                    Command(name, _plain(helps.get(name, "")), _options(sub), _arguments(sub))
                )
    return Outline(_options(parser), tuple(commands), default)


def _options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    found = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        choices = tuple(str(c) for c in action.choices) if action.choices else ()
        takes: Takes
        if action.nargs == 0:
            takes = "nothing"
        elif choices:
            takes = "choice"
        elif action.type is Path:
            takes = "file"
        else:
            takes = "text"
        found.append(Option(tuple(action.option_strings), takes, choices, _plain(action.help)))
    return tuple(found)


def _arguments(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    for action in parser._actions:
        if not action.option_strings and action.choices:
            return tuple(str(c) for c in action.choices)
    return ()


def _plain(text: str | None) -> str:
    """Help text for a shell's menu: one line, no argparse ``%`` escapes, at most 60 chars."""
    words = " ".join((text or "").replace("%%", "%").split())
    return words if len(words) <= 60 else words[:59] + "…"


# --- bash ---------------------------------------------------------------------------------------


def bash(line: Outline) -> str:
    """A bash function: the command is the first word that names one (else the default);
    an option's value is a choice or a file; a word starting with ``-`` is an option."""
    fn = "_" + PROGRAM.replace("-", "_")
    names = " ".join(c.name for c in line.commands)
    values: list[str] = []
    options: list[str] = []
    arguments: list[str] = []
    for command in line.commands:
        for option in command.options:
            pattern = "|".join(f"{command.name}:{flag}" for flag in option.flags)
            if option.takes == "choice":
                values.append(f'        {pattern}) words="{" ".join(option.choices)}" ;;')
            elif option.takes == "file":
                values.append(f"        {pattern}) files=1 ;;")
            elif option.takes == "text":
                values.append(f"        {pattern}) return ;;")
        flags = " ".join(flag for option in command.options for flag in option.flags)
        options.append(f'        {command.name}) words="{flags}" ;;')
        if command.arguments:
            arguments.append(f'        {command.name}) words="{" ".join(command.arguments)}" ;;')
    top = " ".join(flag for option in line.options for flag in option.flags)
    body = "\n".join(
        [
            f'# bash completion for {PROGRAM}: eval "$({PROGRAM} completion bash)"',
            f"{fn}() {{",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
            f"    local command={line.default} named=0 words='' files=0 i",
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        case "${COMP_WORDS[i]}" in',
            f"            {'|'.join(c.name for c in line.commands)})",
            '                command="${COMP_WORDS[i]}"; named=1; break ;;',
            "        esac",
            "    done",
            '    case "$command:$prev" in',
            *values,
            "    esac",
            '    if [[ -z "$words" && $files == 0 ]]; then',
            '        if [[ "$cur" == -* ]]; then',
            '            case "$command" in',
            *options,
            "            esac",
            f'            [[ $named == 0 ]] && words="$words {top}"',
            "        else",
            '            case "$command" in',
            *arguments,
            "            esac",
            f'            [[ -z "$words" && $named == 0 ]] && words="{names}" && files=1',
            '            [[ -z "$words" ]] && files=1',
            "        fi",
            "    fi",
            '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            '    [[ $files == 1 ]] && COMPREPLY+=($(compgen -f -- "$cur"))',
            "    return 0",
            "}",
            f"complete -o filenames -o bashdefault -F {fn} {PROGRAM}",
            "",
        ]
    )
    return body


# --- zsh ----------------------------------------------------------------------------------------


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_spec(option: Option) -> list[str]:
    """``_arguments`` specs of one option (each spelling, exclusive of the others)."""
    help = option.help.replace("\\", "").replace("[", "(").replace("]", ")").replace(":", ";")
    value = {
        "nothing": "",
        "file": ":file:_files",
        "choice": f":value:({' '.join(option.choices)})",
        "text": ":value: ",
    }[option.takes]
    if len(option.flags) == 1:
        return [_zsh_quote(f"{option.flags[0]}[{help}]{value}")]
    group = " ".join(option.flags)
    return [_zsh_quote(f"({group}){flag}[{help}]{value}") for flag in option.flags]


def zsh(line: Outline) -> str:
    """A zsh function for ``compdef``: the commands with their help, then per command its
    options (``_arguments``) and files."""
    fn = "_" + PROGRAM.replace("-", "_")
    described = [
        "        " + _zsh_quote(f"{c.name}:{c.help.replace(':', ';')}") for c in line.commands
    ]
    cases: list[str] = []
    for command in line.commands:
        specs = [spec for option in command.options for spec in _zsh_spec(option)]
        rest = (
            _zsh_quote(f"*:argument:({' '.join(command.arguments)})")
            if command.arguments
            else _zsh_quote("*:file:_files")
        )
        cases.append(f"        {command.name})")
        cases.append(f"            _arguments -s {' '.join([*specs, rest])} ;;")
    return "\n".join(
        [
            f"#compdef {PROGRAM}",
            f'# zsh completion for {PROGRAM}: eval "$({PROGRAM} completion zsh)" in ~/.zshrc,',
            "# after compinit",
            f"{fn}() {{",
            "    local -a commands",
            "    commands=(",
            *described,
            "    )",
            f"    local command={line.default} named=0 i",
            "    for ((i = 2; i < CURRENT; i++)); do",
            f"        case $words[i] in ({'|'.join(c.name for c in line.commands)})",
            "            command=$words[i]; named=1; break ;;",
            "        esac",
            "    done",
            "    if (( named )); then",
            "        words=(${words[1]} ${words[i+1,-1]}); (( CURRENT -= i - 1 ))",
            "    elif [[ $words[CURRENT] != -* ]]; then",
            "        _describe -t commands command commands",
            "    fi",
            "    case $command in",
            *cases,
            "    esac",
            "}",
            f"compdef {fn} {PROGRAM}",
            "",
        ]
    )


# --- fish ---------------------------------------------------------------------------------------


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(line: Outline) -> str:
    """``complete`` lines: the commands before one is named, then each command's options
    (a choice's values, a file) once it is."""
    names = " ".join(c.name for c in line.commands)
    lines = [
        f"# fish completion for {PROGRAM}: {PROGRAM} completion fish > "
        f"~/.config/fish/completions/{PROGRAM}.fish",
        f"complete -c {PROGRAM} -f",
    ]
    for command in line.commands:
        lines.append(
            f"complete -c {PROGRAM} -n '__fish_use_subcommand' -a {command.name} "
            f"-d {_fish_quote(command.help)}"
        )
    for command in line.commands:
        seen = (
            f"__fish_seen_subcommand_from {command.name}"
            if command.name != line.default
            else f"not __fish_seen_subcommand_from {names}"
        )
        if command.arguments:
            lines.append(
                f"complete -c {PROGRAM} -n '{seen}' -a {_fish_quote(' '.join(command.arguments))}"
            )
        else:
            lines.append(f"complete -c {PROGRAM} -n '{seen}' -F")
        for option in command.options:
            spelled = " ".join(
                f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
                for flag in option.flags
            )
            value = {
                "nothing": "",
                "file": " -r -F",
                "choice": f" -x -a {_fish_quote(' '.join(option.choices))}",
                "text": " -x",
            }[option.takes]
            lines.append(
                f"complete -c {PROGRAM} -n '{seen}' {spelled}{value} -d {_fish_quote(option.help)}"
            )
    for option in line.options:
        spelled = " ".join(
            f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}" for flag in option.flags
        )
        lines.append(f"complete -c {PROGRAM} {spelled} -d {_fish_quote(option.help)}")
    return "\n".join([*lines, ""])
