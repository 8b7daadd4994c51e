"""Read the failure report torch elastic prints under ``ChildFailedError``.

torchrun (and the launchers built on it: accelerate, DeepSpeed, Lightning) ends a job whose
worker died with ``torch.distributed.elastic.multiprocessing.errors.ChildFailedError:`` and
nothing after the colon: the message is a table on the lines below it, framed by rules of
``=`` (``ChildFailedError.format_msg``)::

    ============================================================
    train.py FAILED
    ------------------------------------------------------------
    Failures:
      <NO_OTHER_FAILURES>
    ------------------------------------------------------------
    Root Cause (first observed failure):
    [0]:
      time      : 2025-05-21_15:43:03
      host      : worker-3
      rank      : 0 (local_rank: 0)
      exitcode  : -9 (pid: 14750)
      error_file: <N/A>
      traceback : Signal 9 (SIGKILL) received by PID 14750
    ============================================================

The failure is in the root-cause entry: which rank died, its exit code, and the signal or
the child's exception text.  Read line by line, the table was three unrelated "error" lines
(the ``====`` rule even looks like compute-sanitizer's prefix) and the exception had an
empty message.  :func:`read_report` reads it as one message instead.  When a worker recorded
its error (``@record``), the ``traceback`` field holds the child's whole Python traceback;
the report stops before it, so that traceback stays a region of its own, with its frames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MAX_REPORT_LINES", "opens_report", "read_report"]

# A report with every rank of a large job listed under "Failures:" runs to ~8 lines a rank.
MAX_REPORT_LINES = 2_000
# torch pads its rules to the widest line of the table, 60 characters at least.
_MIN_RULE = 20
_FIELDS = ("time", "host", "rank", "exitcode", "error_file", "traceback")


def _is_rule(text: str, char: str) -> bool:
    s = text.strip()
    return len(s) >= _MIN_RULE and s.count(char) == len(s)


def opens_report(exception_line: str, next_line: str, title_line: str) -> bool:
    """Do these three lines start a report: an exception with nothing after its colon,
    a rule of ``=``, then ``<name> FAILED``?"""
    return (
        exception_line.rstrip().endswith(":")
        and _is_rule(next_line, "=")
        and title_line.rstrip().endswith(" FAILED")
    )


def read_report(lines: Sequence[str]) -> tuple[int, str]:
    """How many of ``lines`` the report takes, and its one-line summary.

    ``lines[0]`` is the opening rule (:func:`opens_report` said yes).  The report ends
    after its closing rule, before a ``traceback`` field that holds a whole Python
    traceback, or after ``MAX_REPORT_LINES``.  The summary is the title, then the
    root-cause entry's rank, exit code and traceback field (else the first entry's):
    ``train.py FAILED: rank 0 (local_rank: 0), exitcode -9 (pid: 14750): Signal 9
    (SIGKILL) received by PID 14750``.
    """
    title = lines[1].strip() if len(lines) > 1 else ""
    entries: list[dict[str, str]] = []
    root = -1  # index into entries of the root-cause entry
    field = ""  # the field the last line belonged to (a message may run on)
    end = min(len(lines), MAX_REPORT_LINES)
    k = 2
    while k < end:
        text = lines[k]
        s = text.strip()
        if _is_rule(s, "="):
            k += 1
            break
        if s.startswith("Root Cause"):
            root = len(entries)
        elif s.startswith("[") and s.endswith("]:"):
            entries.append({})
            field = ""
        elif entries and ":" in s and s.split(":", 1)[0].strip() in _FIELDS:
            key, value = (part.strip() for part in s.split(":", 1))
            if key == "traceback" and value.startswith("Traceback (most recent call last)"):
                break  # the child's own traceback: a region of its own
            entries[-1][key] = value
            field = key
        elif entries and field == "traceback" and s and text[:1].isspace():
            entries[-1][field] += " " + s  # a message that runs over several lines
        k += 1
    chosen = entries[root] if 0 <= root < len(entries) else (entries[0] if entries else {})
    parts = [title]
    facts = [
        f"rank {chosen[key]}" if key == "rank" else f"exitcode {chosen[key]}"
        for key in ("rank", "exitcode")
        if chosen.get(key)
    ]
    if facts:
        parts.append(", ".join(facts))
    cause = chosen.get("traceback", "")
    if cause and cause != "<N/A>":
        parts.append(cause)
    return k, ": ".join(parts)
