"""The ``diagnose`` command's common case, run without importing typer.

Most runs are ``diagnose LOG [LOG ...]``, perhaps with ``--format``/``-f`` or
``--no-color``.  typer and click cost ~60-70 ms to import and build the command, about
half of a warm run on a small log (bench/results/cli_startup.md), for an argument list
that needs no parser.  :func:`plain_args` recognises exactly those forms and nothing
else; any other argument list (help, ``--version``, ``--verify``, ``--follow``, an
unknown or repeated option, no log at all) returns ``None`` and goes to the typer
command in :mod:`diagnose.cli`, which stays the one definition of the interface.
Both run :func:`diagnose_logs`, so a plain command prints the same bytes and exits
with the same code whichever way it came (tests/test_cli.py checks both ways).

Like :mod:`diagnose.cli`, this is a shell: it prints, and its callers exit.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from diagnose.exitcodes import ExitCode, for_verdict, worst
from diagnose.render import OutputFormat

#: The options a plain command may carry, the ones that only pick how a report looks; the
#: typer command declares them with these same names (diagnose.cli).
FORMAT_OPTIONS = ("--format", "-f")
NO_COLOR_OPTION = "--no-color"
_COMMANDS = ("serve", "mcp")  # subcommands: never a plain log argument
_FORMATS = frozenset(f.value for f in OutputFormat)  # what --format accepts (click: by value)


@dataclass(frozen=True, slots=True)
class PlainArgs:
    """A plain command: the logs and how to show their reports."""

    logs: tuple[str, ...]
    fmt: OutputFormat = OutputFormat.text
    no_color: bool = False


def plain_args(argv: list[str]) -> PlainArgs | None:
    """``argv`` (without the program name) as a plain command, or ``None`` for typer.

    Plain: one or more log arguments (``-`` is stdin; no other word may start with
    ``-``), at most one ``--format X`` / ``-f X`` / ``--format=X`` naming a format, and
    at most one ``--no-color``.  Anything else is the typer command's to parse, report
    and explain.  On Windows click expands wildcards in arguments, so every command goes
    through it there.
    """
    if os.name == "nt" or not argv or argv[0] in _COMMANDS:
        return None
    logs: list[str] = []
    fmt: OutputFormat | None = None
    no_color = False
    i = 0
    while i < len(argv):
        word = argv[i]
        value: str | None = None
        if word in FORMAT_OPTIONS:
            if i + 1 >= len(argv):
                return None
            value, i = argv[i + 1], i + 1
        elif word.startswith(f"{FORMAT_OPTIONS[0]}="):
            value = word.partition("=")[2]
        elif word == NO_COLOR_OPTION and not no_color:
            no_color = True
        elif word == "-" or not word.startswith("-"):
            logs.append(word)
        else:
            return None
        if value is not None:
            if fmt is not None or value not in _FORMATS:
                return None
            fmt = OutputFormat(value)
        i += 1
    if not logs:
        return None
    return PlainArgs(tuple(logs), fmt or OutputFormat.text, no_color)


def diagnose_logs(
    logs: tuple[str, ...],
    fmt: OutputFormat,
    *,
    rules: tuple[Path, ...] = (),
    verify: bool = False,
    verify_level: str = "",
    verbose: bool = False,
    no_color: bool = False,
    binaries: Path | None = None,
    arch: str | None = None,
) -> ExitCode:
    """Diagnose each log, print its report, and return the exit code for them all."""
    several = len(logs) > 1
    color = fmt is OutputFormat.text and use_color(no_color)
    codes: list[ExitCode] = []
    documents: list[str] = []  # --format json with several logs: one array at the end
    for log in logs:
        code, text = _one(log, fmt, rules, verify, verify_level, verbose, color, binaries, arch)
        codes.append(code)
        if text is None:
            continue
        if fmt is OutputFormat.json and several:
            documents.append(text)
            continue
        if several and fmt in (OutputFormat.text, OutputFormat.markdown):
            sys.stdout.write(f"==> {log} <==\n")
        if color:
            from rich.console import Console

            Console(highlight=False, soft_wrap=True).print(text)
        else:
            sys.stdout.write(text + "\n")
    if documents:
        sys.stdout.write("[\n" + ",\n".join(documents) + "\n]\n")
    return worst(codes)


def _one(
    log: str,
    fmt: OutputFormat,
    rules: tuple[Path, ...],
    verify: bool,
    verify_level: str,
    verbose: bool,
    color: bool,
    binaries: Path | None = None,
    arch: str | None = None,
) -> tuple[ExitCode, str | None]:
    """Diagnose one log: its exit code and rendered report (``None`` after an input error,
    whose one line went to stderr)."""
    from diagnose.api import diagnose_file
    from diagnose.errors import DiagnoseError

    try:
        result = diagnose_file(
            log,
            rule_dirs=rules,
            verify=verify or bool(verify_level),
            verify_level=verify_level or "compile",
            binaries=binaries,
            arch=arch,
        )
    except DiagnoseError as exc:
        sys.stderr.write(f"diagnose: {exc}\n")
        return ExitCode.USAGE_OR_INPUT_ERROR, None
    except Exception as exc:  # a bug must still end in one line, not a traceback
        bug = f"internal error ({type(exc).__name__}: {exc}); please report it with the log"
        sys.stderr.write(f"diagnose: {bug}\n")
        return ExitCode.USAGE_OR_INPUT_ERROR, None
    from diagnose.render import render

    return for_verdict(result.fatal, result.known), render(
        result, fmt, color=color, verbose=verbose
    )


def use_color(no_color: bool) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if no_color or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
