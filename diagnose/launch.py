"""Console-script entry points: set up the interpreter for a short-lived process, then run a CLI.

``diagnose FILE`` is a process that imports ~90 modules, builds a few thousand
objects and exits within a few hundred milliseconds.  Two interpreter defaults
cost it a measurable share of that, and only a process's owner may change them,
which is why this lives here and not in the library:

- The cyclic GC's generation-0 threshold (700 allocations) makes imports collect
  hundreds of times; every collection walks the young objects, and the older
  generations are walked over and over as they fill.  Our objects are frozen
  dataclasses and tuples (no cycles), so a threshold of 200,000, the value
  mypy's build uses for the same reason (``mypy/build.py``), is set for a
  one-shot run.  Commands that run until stopped (``serve``, ``mcp``,
  ``--follow``) keep CPython's own thresholds: a server's connections do leave
  cycles, and with the raised threshold they piled up.
- Interpreter teardown (module dicts cleared, every object freed one by one, a
  last full collection) does nothing a finished CLI needs.  After flushing the
  standard streams and running ``atexit`` handlers (the demangling worker's
  cleanup is one), the process ends with ``os._exit``, as mypy's ``hard_exit``
  does (``mypy/util.py``).

Exit codes are unchanged: ``SystemExit``'s code is honoured exactly as the
interpreter would honour it (``None`` is 0, a string is printed and gives 1).
Any other exception propagates and the interpreter reports it normally.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
from collections.abc import Callable

#: Generation-0 threshold while a CLI runs (CPython's default is 700); see the docstring.
GC_THRESHOLD0 = 200_000


def diagnose() -> None:
    """``diagnose``: see :mod:`diagnose.cli`; its plain form runs without typer
    (:mod:`diagnose.cli_plain`)."""
    _run(_diagnose_main)


def _diagnose_main() -> None:
    from diagnose.cli_plain import diagnose_logs, plain_args

    plain = plain_args(sys.argv[1:])
    if plain is None:
        __import__("diagnose.cli", fromlist=["main"]).main()
        return
    raise SystemExit(diagnose_logs(plain.logs, plain.fmt, no_color=plain.no_color))


def diagnose_kb() -> None:
    """``diagnose-kb``: see :mod:`diagnose.kbcli`."""
    _run(lambda: __import__("diagnose.kbcli", fromlist=["main"]).main())


def _run(cli_main: Callable[[], object]) -> None:
    """Run ``cli_main`` with the tuned GC, then end the process without teardown."""
    if not _runs_for_long(sys.argv[1:]):
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD0, gen1, gen2)
    try:
        cli_main()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    _hard_exit(status)


def _runs_for_long(args: list[str]) -> bool:
    """Whether the command serves or follows until stopped: it keeps CPython's thresholds.

    Each HTTP connection leaves reference cycles (a transport, its protocol, a refused
    request's exception); with generation 0 at 200,000, ``diagnose serve`` under a flood of
    idle sockets grew by ~1.7 MB/s until a collection came (bench/serve_load.py).
    """
    return args[:1] in (["serve"], ["mcp"]) or any(
        a in ("--follow", "-F") or a.startswith("--follow=") for a in args
    )


def _exit_status(code: object) -> int:
    """The process status ``SystemExit(code)`` gives (printing a message as Python would)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _hard_exit(status: int) -> None:
    """Flush, run ``atexit`` handlers, and leave without tearing the interpreter down.

    A normal exit waits for non-daemon threads; where any is still alive, exit normally.
    """
    threading = sys.modules.get("threading")
    if threading is not None and any(
        t is not threading.main_thread() and not t.daemon and t.is_alive()
        for t in threading.enumerate()
    ):
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (``diagnose … | head``): nothing more can be written anyway.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(status)
