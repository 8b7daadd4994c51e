"""The ``diagnose`` command: a thin typer shell over the library.

This is the only module that prints, exits or configures logging.  Everything it
shows comes from :func:`diagnose.diagnose_file` and the renderers; errors from the
library arrive as :class:`~diagnose.errors.DiagnoseError` through one funnel and
become exit code 2 with a one-line message.
"""

# No `from __future__ import annotations`: typer reads the command's annotations at every
# start, and string annotations cost it one eval() each (~40 of them).

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from diagnose.cli_plain import FORMAT_OPTIONS, NO_COLOR_OPTION, diagnose_logs
from diagnose.exitcodes import ExitCode
from diagnose.render import OutputFormat

app = typer.Typer(
    add_completion=False,
    # Locals in a pretty traceback could dump a whole pasted (possibly private) log.
    pretty_exceptions_show_locals=False,
    help="Name the root cause of a GPU / LLM-serving crash log.",
)


class Until(StrEnum):
    """The ``--until`` choices."""

    ready = "ready"


@app.command()
def run(
    ctx: typer.Context,
    logs: Annotated[
        Optional[list[str]],  # noqa: UP045 - typer reads Optional, not "| None"
        typer.Argument(
            metavar="[LOG]...",
            help="crash log files (plain or compressed; one result each), or - for stdin",
        ),
    ] = None,
    fmt: Annotated[
        OutputFormat, typer.Option(*FORMAT_OPTIONS, help="output format")
    ] = OutputFormat.text,
    rules: Annotated[
        Optional[list[Path]],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option("--rules", help="extra rule directory (repeatable)"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="show every region and finding")
    ] = False,
    no_color: Annotated[
        bool, typer.Option(NO_COLOR_OPTION, help="plain text even on a terminal")
    ] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="rebuild and measure what the crash implicates")
    ] = False,
    verify_level: Annotated[
        str, typer.Option("--verify-level", help="model | compile | run (implies --verify)")
    ] = "",
    follow: Annotated[
        bool, typer.Option("--follow", "-F", help="follow a growing log like tail -F")
    ] = False,
    until: Annotated[
        Optional[Until],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option("--until", help="ready: exit 0 once the server is ready, 1 on a fatal crash"),
    ] = None,
    timeout: Annotated[
        Optional[float],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option("--timeout", help="with --follow/--until: give up after this many seconds"),
    ] = None,
    binaries: Annotated[
        Optional[Path],  # noqa: UP045 - typer reads Optional, not "| None"
        typer.Option(
            "--binaries",
            help="with --verify: where the CUDA .so/cubin files the frames name are, when the "
            "log came from another machine",
        ),
    ] = None,
    arch: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--arch", help="with --verify: the GPU's arch (sm_120) if the log lacks it"),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", help="print the version and the rule base's, then exit")
    ] = False,
) -> None:
    """Diagnose LOG and print the verdict.

    Exit 0: nothing ended the process; 1: a fatal failure of a named cause; 3: a fatal
    failure of unknown cause; 2: a usage or input error.  Also: diagnose serve, diagnose mcp.
    """
    if version:
        _print_version()
    if not logs:
        if sys.stdin.isatty():  # nothing piped in: waiting silently would look like a hang
            sys.stdout.write(ctx.get_help() + "\n")
            raise typer.Exit(ExitCode.NO_FATAL_FAILURE)
        logs = ["-"]
    if verbose:
        # Without a config, logging's last-resort handler already prints WARNING and up as
        # "%(message)s": configuring it on every run only cost the ~6 ms `import logging`.
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(message)s")
    if follow or until is not None:
        if len(logs) > 1:
            _fail("--follow and --until watch one log at a time")
        _watch(logs[0], fmt, tuple(rules or ()), follow, until is Until.ready, timeout, verbose)
    if verify_level and verify_level not in ("model", "compile", "run"):
        _fail(f"--verify-level must be model, compile or run, not {verify_level!r}")
    code = diagnose_logs(
        tuple(logs), fmt, rules=tuple(rules or ()), verify=verify or binaries is not None,
        verify_level=verify_level, verbose=verbose, no_color=no_color, binaries=binaries,
        arch=arch,
    )  # fmt: skip
    raise typer.Exit(code)


def _print_version() -> NoReturn:
    """``diagnose --version``: the package's one version, and the rule base's."""
    from diagnose.kb import version_line

    sys.stdout.write(version_line("diagnose") + "\n")
    raise typer.Exit(ExitCode.NO_FATAL_FAILURE)


def _watch(
    log: str,
    fmt: OutputFormat,
    rules: tuple[Path, ...],
    follow: bool,
    until_ready: bool,
    timeout: float | None,
    verbose: bool,
) -> NoReturn:
    """``--follow`` / ``--until ready``: print each report as it happens (see diagnose.follow)."""
    from diagnose.errors import DiagnoseError
    from diagnose.follow import watch
    from diagnose.render import render
    from diagnose.stream import Ready

    def show(event: object) -> None:
        if isinstance(event, Ready):
            sys.stderr.write(f"diagnose: line {event.line}: {event.phrase}\n")
        elif not getattr(event, "known", True) and not getattr(event, "fatal", True):
            return  # an unknown error that ended nothing (a benign warning): no alert
        else:
            sys.stdout.write(render(event, fmt, verbose=verbose) + "\n")  # type: ignore[arg-type]
            sys.stdout.flush()  # a pipeline reads each report as it happens

    try:
        result = watch(log, follow=follow, until_ready=until_ready, timeout=timeout,
                       rule_dirs=rules, on_event=show)  # fmt: skip
    except DiagnoseError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.NO_FATAL_FAILURE) from None
    except Exception as exc:  # a bug must still end in one line, not a traceback
        _fail(f"internal error ({type(exc).__name__}: {exc}); please report it with the log")
    sys.stderr.write(f"diagnose: {result.message}\n")
    raise typer.Exit(result.exit_code)


def _fail(message: str) -> NoReturn:
    """The one error funnel: a one-line message on stderr and exit code 2."""
    sys.stderr.write(f"diagnose: {message}\n")
    raise typer.Exit(ExitCode.USAGE_OR_INPUT_ERROR)


def main() -> None:
    """Console-script entry point."""
    # Chat-bot surfaces are their own commands so `diagnose FILE` stays a one-command app.
    if sys.argv[1:2] == ["serve"]:
        from diagnose.serve import main as serve_main

        return serve_main(sys.argv[2:])
    if sys.argv[1:2] == ["mcp"]:
        from diagnose.mcp_server import main as mcp_main

        return mcp_main(sys.argv[2:])
    app(prog_name="diagnose")


if __name__ == "__main__":  # pragma: no cover
    main()
