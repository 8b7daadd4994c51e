"""The ``diagnose-kb`` command: list, show, lint and test rules; render the catalogue.

A thin typer shell over :mod:`diagnose.rules`; like ``cli.py`` it is the only
place (for rule maintenance) that prints or exits.  Exit codes: ``0`` fine,
``1`` a rule example failed (``test``), ``2`` an invalid rule or kb file
(``file:line: field 'x': message``) or bad usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer

from diagnose.errors import DiagnoseError

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals could dump whole example logs
    help="Maintain the crashkb rule base: list, show, lint, test, docs.",
    no_args_is_help=True,
)

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2

Dirs = Annotated[
    Optional[list[Path]],  # noqa: UP045 - typer needs Optional on 3.10
    typer.Argument(help="extra rule directories (the shipped rules are always loaded)"),
]
OnlyDirs = Annotated[
    bool, typer.Option("--only", help="load only the given directories, not the shipped rules")
]


def _version(value: bool) -> None:
    """``diagnose-kb --version``: the same line as ``diagnose --version``, then exit."""
    if value:
        from diagnose.kb import version_line

        typer.echo(version_line("diagnose-kb"))
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="print the version and the rule base's, then exit",
        ),
    ] = False,
) -> None:
    """Maintain the crashkb rule base: list, show, lint, test, docs."""


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one line to stderr and exit with ``code``."""
    typer.echo(f"diagnose-kb: {message}", err=True)
    raise typer.Exit(code)


def _load(dirs: list[Path] | None, only: bool) -> tuple[Any, Any]:
    """Load the kb and the rules, funnelling every library error into exit code 2."""
    from diagnose.kb import load_kb
    from diagnose.rules import load_rules

    if only and not dirs:
        _fail("--only needs at least one directory")
    try:
        kb = load_kb()
        return kb, load_rules(dirs, kb=kb, include_default=not only)
    except DiagnoseError as exc:
        _fail(str(exc))


@app.command("list")
def list_rules(dirs: Dirs = None, only: OnlyDirs = False) -> None:
    """List every rule: id, severity, base confidence, title."""
    _, rules = _load(dirs, only)
    for rule in rules:
        typer.echo(f"{rule.id:<50} {rule.severity:<8} {rule.confidence:<5g} {rule.title}")


@app.command()
def show(
    rule_id: Annotated[str, typer.Argument(help="rule id or old alias")],
    dirs: Dirs = None,
    only: OnlyDirs = False,
) -> None:
    """Describe one rule: metadata, signals and examples."""
    from diagnose.rules.catalogue import show_rule

    _, rules = _load(dirs, only)
    rule = rules.get(rule_id)
    if rule is None:
        import difflib

        ids = [r.id for r in rules] + [a for r in rules for a in r.aliases]
        near = difflib.get_close_matches(rule_id, ids, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(near)}?" if near else "try `diagnose-kb list`"
        _fail(f"no rule '{rule_id}' ({hint})")
    typer.echo(show_rule(rule))


@app.command()
def lint(dirs: Dirs = None, only: OnlyDirs = False) -> None:
    """Load and validate every rule file; report each broken file as file:line: field."""
    from diagnose.kb import load_kb
    from diagnose.rules import check_rules

    if only and not dirs:
        _fail("--only needs at least one directory")
    try:
        kb = load_kb()
    except DiagnoseError as exc:
        _fail(str(exc))
    rules, errors, roots = check_rules(dirs, kb=kb, include_default=not only)
    for error in errors:
        typer.echo(str(error), err=True)
    if errors:
        _fail(f"{len(errors)} invalid rule file(s)")
    typer.echo(f"{len(rules)} rules OK ({', '.join(roots)})")


@app.command()
def test(
    dirs: Dirs = None,
    only: OnlyDirs = False,
    rule: Annotated[
        Optional[list[str]],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option("--rule", "-r", help="test only this rule id (repeatable)"),
    ] = None,
) -> None:
    """Run every rule's examples through the full pipeline (semgrep-style report)."""
    from diagnose.rules.examples import run_examples

    kb, rules = _load(dirs, only)
    results = run_examples(rules, kb, only=rule)
    failed = [r for r in results if r.verdict != "ok"]
    for result in failed:
        typer.echo(result.explain())
    counts = {v: sum(r.verdict == v for r in results) for v in ("missed", "incorrect", "fixed")}
    todo = sum(r.example.expect.startswith("todo-") and r.verdict == "ok" for r in results)
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    typer.echo(
        f"{len(results)} examples: {len(results) - len(failed)} ok ({todo} known gaps), {summary}"
    )
    if failed:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def docs(dirs: Dirs = None, only: OnlyDirs = False) -> None:
    """Print the Markdown catalogue of kb causes and the rules that detect them."""
    from diagnose.rules.catalogue import render_catalogue

    kb, rules = _load(dirs, only)
    typer.echo(render_catalogue(rules, kb), nl=False)


def main() -> None:
    """Console-script entry point (``diagnose-kb``)."""
    app()


@app.command()
def replay(
    folder: Annotated[Path, typer.Argument(help="folder of <id>.log files (labels: <id>.toml)")],
    save: Annotated[
        Optional[Path],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option("--save", help="write this run's verdicts to a JSON file"),
    ] = None,
    against: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--against", help="diff this run against a saved JSON run"),
    ] = None,
    rules: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Option("--rules", help="extra rule directory (repeatable)"),
    ] = None,
) -> None:
    """Replay a corpus folder; with --against, show what a rule change FIXED and BROKE.

    Exit 1 when the diff shows a BROKE case, so CI can gate rule changes on it.
    """
    from diagnose.replay import accuracy, diff, load_run, save_run
    from diagnose.replay import replay as run_replay

    if not folder.is_dir():
        _fail(f"not a folder: {folder}")
    try:
        run = dict(run_replay(folder, tuple(rules or ())))
    except DiagnoseError as exc:
        _fail(str(exc))
    correct, labelled = accuracy(run)
    if labelled:
        typer.echo(f"{correct}/{labelled} labelled cases right ({correct / labelled:.1%})")
    if save:
        save_run(save, run)
    if against:
        try:
            before = load_run(against)
        except (OSError, ValueError) as exc:
            _fail(f"cannot read {against}: {exc}")
        changes = diff(before, run)
        for c in changes:
            typer.echo(f"{c.kind:7} {c.case}: {c.before} -> {c.after} (label {c.label})")
        if not changes:
            typer.echo("no verdict changed")
        if any(c.kind == "BROKE" for c in changes):
            raise typer.Exit(EXIT_FAILED)
