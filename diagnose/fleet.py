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
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from diagnose.records import record

if TYPE_CHECKING:
    from diagnose.report import Diagnosis

__all__ = ["FleetGroup", "diagnose_paths", "group", "signature", "summarize", "summarize_path"]

_MAX_SIGNATURE = 400
_SIGNATURE_FRAMES = 4
_MAX_SOURCES = 20

# Masked before comparison: hex addresses, long hashes, numbers (ranks, pids, sizes, line
# numbers), directory parts of paths (each node installs into its own venv), quoted ids.
_HEX = re.compile(r"0[xX][0-9a-fA-F]+|\b[0-9a-fA-F]{8,}\b")
_PATH_DIRS = re.compile(r"(?:[\w.+-]*/)+(?=[\w.+-]+)")
_NUMBER = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def _mask(text: str) -> str:
    text = _HEX.sub("#", text[:4096])
    text = _PATH_DIRS.sub("", text)
    text = _NUMBER.sub("#", text)
    return _SPACE.sub(" ", text).strip()


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


def _as_dict(item: Diagnosis | Mapping[str, Any]) -> Mapping[str, Any]:
    return item if isinstance(item, Mapping) else item.to_dict()


def _primary_region(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The crash region the verdict rests on, in any of the accepted record shapes."""
    crash = record.get("crash")
    if isinstance(crash, Mapping):
        return crash
    crashes = record.get("crashes") or []
    primary = record.get("primary") or {}
    index = primary.get("region_index") if isinstance(primary, Mapping) else None
    if isinstance(index, int) and 0 <= index < len(crashes):
        return crashes[index]  # type: ignore[no-any-return]
    return crashes[0] if crashes else None


def signature(item: Diagnosis | Mapping[str, Any]) -> str:
    """The normalised signature of a result's main crash: masked message + top frames.

    Accepts every record shape :func:`group` accepts; a summary record's own
    ``signature`` is returned as is.  Empty when the result holds no crash.
    """
    record = _as_dict(item)
    if "signature" in record and "crashes" not in record and "crash" not in record:
        return str(record["signature"])
    region = _primary_region(record)
    if region is None:
        return ""
    functions = [
        str(f.get("function"))
        for f in region.get("frames", [])[: _SIGNATURE_FRAMES * 4]
        if isinstance(f, Mapping) and f.get("function")
    ][:_SIGNATURE_FRAMES]
    text = _mask(str(region.get("message", "")))
    if functions:
        text += " | " + " < ".join(_mask(f) for f in functions)
    return text[:_MAX_SIGNATURE]


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
