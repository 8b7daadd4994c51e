"""The normalised signature of a crash: what stays the same across copies of one failure.

The one definition of a crash's identity.  :func:`mask` removes what differs between
nodes, ranks and retries (numbers, addresses, hashes, the directory part of paths);
:func:`signature` applies it to the crash message and its top frame functions.
:mod:`diagnose.regions` merges copies printed by several ranks with :func:`mask` (over
deeper frames); :mod:`diagnose.fleet` groups results by :func:`signature`;
:mod:`diagnose.stream` uses it to report a repeating failure once.  Similarity to known
cases is another question with its own normalisation (``diagnose.kb.mask_signature``
keeps arch numbers such as ``sm_120``, which tell cases apart).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagnose.report import Diagnosis

__all__ = ["as_dict", "mask", "primary_region", "signature"]

_MAX_SIGNATURE = 400
_SIGNATURE_FRAMES = 4

# Masked before comparison: hex addresses, long hashes, numbers (ranks, pids, sizes, line
# numbers), directory parts of paths (each node installs into its own venv), quoted ids.
_HEX = re.compile(r"0[xX][0-9a-fA-F]+|\b[0-9a-fA-F]{8,}\b")
# Linear on any text: a match starts only where a run of path characters starts (the
# lookbehind), and a run is taken whole (possessive), so a long run with no "/" in it (a
# mangled name) costs its length once, not its length squared.
_PATH_DIRS = re.compile(r"(?<![\w.+-])(?:[\w.+-]*+/)+(?=[\w.+-])")
_NUMBER = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def mask(text: str) -> str:
    """``text`` (its first 4,096 characters) with addresses, hashes and numbers as ``#``, paths
    without their directories, and runs of white space as one space."""
    text = _HEX.sub("#", text[:4096])
    text = _PATH_DIRS.sub("", text)
    text = _NUMBER.sub("#", text)
    return _SPACE.sub(" ", text).strip()


def as_dict(item: Diagnosis | Mapping[str, Any]) -> Mapping[str, Any]:
    return item if isinstance(item, Mapping) else item.to_dict()


def primary_region(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
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
    record = as_dict(item)
    if "signature" in record and "crashes" not in record and "crash" not in record:
        return str(record["signature"])
    region = primary_region(record)
    if region is None:
        return ""
    functions = [
        str(f.get("function"))
        for f in region.get("frames", [])[: _SIGNATURE_FRAMES * 4]
        if isinstance(f, Mapping) and f.get("function")
    ][:_SIGNATURE_FRAMES]
    text = mask(str(region.get("message", "")))
    if functions:
        text += " | " + " < ".join(mask(f) for f in functions)
    return text[:_MAX_SIGNATURE]
