"""Fleet view: many nodes' results grouped by root cause and normalised crash signature.

When 312 nodes hit the same shared-memory overflow, the useful line is
``312 nodes: smem-overflow on sm_120, tile 128x256x128``, not 312 reports.

* :func:`signature` masks what differs between copies of one failure (numbers, addresses,
  hashes, ranks, paths' directories) in the crash message and its top frame functions.
* :func:`summarize` turns a :class:`~diagnose.report.Diagnosis` into a small JSON-ready
  record (what a worker sends back), :func:`group` folds records into :class:`FleetGroup`
  objects, largest first.  Both accept a ``Diagnosis``, its ``to_dict()`` form, a
  ``--format jsonl`` record or a :func:`summarize` record, so a log shipper's output can be
  grouped as well as in-process results.
* :func:`diagnose_paths` maps :func:`summarize_path` over log files with any
  ``concurrent.futures``-style executor: a ``ProcessPoolExecutor`` on one machine, or a
  cluster engine's executor (Dask's ``Client.get_executor()``; README "Pipelines").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from diagnose.records import record
from diagnose.signature import as_dict as _as_dict
from diagnose.signature import primary_region as _primary_region
from diagnose.signature import signature

if TYPE_CHECKING:
    from diagnose.report import Diagnosis

__all__ = ["FleetGroup", "diagnose_paths", "group", "signature", "summarize", "summarize_path"]

_MAX_SOURCES = 20


@record
class FleetGroup:
    """Results sharing a cause, a label (arch, tile) and a normalised signature.

    ``count`` counts records; ``sources`` keeps the first few node/log names (at most
    ``_MAX_SOURCES``); ``title`` is the verdict title of the first record.
    """

    cause: str
    label: str
    signature: str
    count: int
    sources: tuple[str, ...]
    title: str

    def describe(self, noun: str = "nodes") -> str:
        """One line for a fleet view: ``312 nodes: smem-overflow on sm_120, tile 128x256x128``."""
        what = f"{noun[:-1] if self.count == 1 and noun.endswith('s') else noun}"
        return f"{self.count} {what}: {self.label}"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "cause": self.cause,
            "label": self.label,
            "signature": self.signature,
            "count": self.count,
            "sources": list(self.sources),
            "title": self.title,
        }


def _label_facts(record: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(arch, tile) for the label: rule facts, else the crash's kernel frames, else context."""
    arch = tile = None
    primary = record.get("primary")
    if primary is None and record.get("findings"):
        primary = record["findings"][0]
    facts = primary.get("facts", {}) if isinstance(primary, Mapping) else {}
    if isinstance(facts, Mapping):
        arch = facts.get("arch") or facts.get("sm")
        tile = facts.get("tile")
    region = _primary_region(record) or {}
    for frame in region.get("frames", []):
        kernel = frame.get("kernel") if isinstance(frame, Mapping) else None
        if isinstance(kernel, Mapping):
            arch = arch or kernel.get("arch")
            tile = tile or kernel.get("tile")
        if arch and tile:
            break
    context = record.get("context")
    if not arch and isinstance(context, Mapping) and context.get("archs"):
        arch = context["archs"][0].get("value")
    if isinstance(tile, (list, tuple)):
        tile = "x".join(str(t) for t in tile)
    return (str(arch) if arch else None, str(tile) if tile else None)


def _label(cause: str, arch: str | None, tile: str | None) -> str:
    parts = [cause + (f" on {arch}" if arch else "")]
    if tile:
        parts.append(f"tile {tile}")
    return ", ".join(parts)


def summarize(item: Diagnosis | Mapping[str, Any]) -> dict[str, Any]:
    """A small JSON-ready record of one result: what a worker returns to the fleet view."""
    record = _as_dict(item)
    if "label" in record and "signature" in record:
        return dict(record)
    cause = str(record.get("cause", "unknown"))
    arch, tile = _label_facts(record)
    primary = record.get("primary") or {}
    return {
        "source": str(record.get("source", "")),
        "cause": cause,
        "fatal": record.get("fatal"),
        "title": str(record.get("title", "")),
        "confidence": record.get("confidence", 0.0),
        "rule_id": primary.get("rule_id") if isinstance(primary, Mapping) else None,
        "arch": arch,
        "tile": tile,
        "label": _label(cause, arch, tile),
        "signature": signature(record),
    }


def group(
    items: Iterable[Diagnosis | Mapping[str, Any]], *, include_clean: bool = False
) -> list[FleetGroup]:
    """Fold results into groups by (cause, label, signature), largest first.

    Results with no crash at all (``cause`` unknown and an empty signature) are left out
    unless ``include_clean``: a healthy node is not a failure mode.
    """
    counts: dict[tuple[str, str, str], list[Any]] = {}
    for item in items:
        s = summarize(item)
        if not include_clean and s["cause"] == "unknown" and not s["signature"]:
            continue
        key = (s["cause"], s["label"], s["signature"])
        entry = counts.get(key)
        if entry is None:
            counts[key] = [1, [s["source"]], s["title"]]
        else:
            entry[0] += 1
            if len(entry[1]) < _MAX_SOURCES:
                entry[1].append(s["source"])
    groups = [
        FleetGroup(cause, label, sig, n, tuple(sources), title)
        for (cause, label, sig), (n, sources, title) in counts.items()
    ]
    groups.sort(key=lambda g: (-g.count, g.cause, g.signature))
    return groups


def summarize_path(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Diagnose one log file and return its :func:`summarize` record (picklable, top level).

    An unreadable file gives a record with cause ``"unreadable"`` instead of raising, so
    one bad node does not fail a cluster job.
    """
    from diagnose.api import diagnose_file
    from diagnose.errors import InputError

    try:
        return summarize(diagnose_file(path))
    except InputError as exc:
        name = os.fspath(path)
        return {"source": name, "cause": "unreadable", "fatal": None, "title": str(exc),
                "confidence": 0.0, "rule_id": None, "arch": None, "tile": None,
                "label": "unreadable", "signature": ""}  # fmt: skip


def diagnose_paths(
    paths: Iterable[str | os.PathLike[str]], *, executor: Any = None
) -> list[dict[str, Any]]:
    """Run :func:`summarize_path` over ``paths``, on ``executor`` when given.

    ``executor`` is anything with ``concurrent.futures.Executor.map`` semantics: a
    ``ProcessPoolExecutor``, or ``distributed.Client(...).get_executor()`` to spread the
    logs over a Dask cluster.  Results come back in the order of ``paths``.
    """
    names = [os.fspath(p) for p in paths]
    mapper = map if executor is None else executor.map
    return list(mapper(summarize_path, names))
