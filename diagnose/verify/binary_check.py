"""Decide an arch verdict from the user's own CUDA binaries (the frames' modules).

For every frame whose module is a CUDA binary found on this machine (at the path the log
names, or by its file name under ``binaries`` when the log came from elsewhere), read what
it carries (:mod:`diagnose.verify.binaries`) and, with the GPU's arch from the log (or the
caller), decide:

* ``arch-unsupported`` is **confirmed** when a binary has neither SASS nor JIT-able PTX for
  the arch, and **refuted** when every binary has code for it;
* a ``smem-overflow`` verdict resting on CUTLASS's "Error Internal" is **refuted**, with
  ``arch-unsupported`` as the better cause, when a binary lacks the arch: the kernel was not
  built for this GPU, so its shared memory was never the question.

The arch is never assumed: without one in the log or from the caller, the binaries are
listed and the verdict is left as it was, with a note.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.verify.binaries import BinaryReport, cross_check, read_binary, runs_on

if TYPE_CHECKING:
    from diagnose.report import Diagnosis
    from diagnose.verify.result import Verification

__all__ = ["check_binaries", "gpu_arch"]

#: At most this many distinct binaries are read for one diagnosis.
MAX_BINARIES = 16
#: At most this many directory entries are looked at under ``binaries`` for one name.
MAX_WALK = 20_000
_SUFFIXES = (".so", ".cubin", ".fatbin", ".o")


def check_binaries(
    result: Verification,
    diagnosis: Diagnosis,
    kb: Any,
    *,
    binaries: Path | None = None,
    arch: str | None = None,
) -> Verification:
    """``result`` with the frames' binaries read and, where they decide it, a new status."""
    reports = [cross_check(read_binary(p)) for p in _binary_paths(diagnosis, binaries)]
    if not reports:
        return result
    gpu = arch or gpu_arch(diagnosis, kb)
    # The binaries are this cause's verifier: "no verifier for cause" no longer holds.
    notes = [n for n in result.notes if not n.startswith("No verifier for cause")]
    if gpu is None:
        notes.append(
            "The log does not name the GPU's arch: the binaries are listed but not judged "
            "(pass --arch sm_XY)."
        )
        return replace(result, binaries=tuple(reports), notes=tuple(notes))
    lacking = [r for r in reports if (r.sass or r.ptx) and runs_on(r, gpu) is None]
    having = [r for r in reports if runs_on(r, gpu) is not None]
    status, better = result.status, result.better_cause
    for r in lacking:
        have = ", ".join((*r.sass, *r.ptx)) or "no device code"
        notes.append(f"{Path(r.path).name} carries {have}: nothing that runs on {gpu}.")
    cause = diagnosis.primary.cause if diagnosis.primary else diagnosis.cause
    if cause == "arch-unsupported" and lacking:
        status = "confirmed"
    elif cause == "arch-unsupported" and having and not lacking:
        status = "refuted"
        notes.append(
            f"Every binary the frames name has code for {gpu}: look for a kernel lookup by "
            "shape or dtype, or another library that was not read."
        )
    elif cause == "smem-overflow" and lacking and _error_internal(diagnosis):
        status, better = "refuted", "arch-unsupported"
        notes.append(
            f"'Error Internal' here is a kernel with no code for {gpu}, not its shared memory."
        )
    return replace(
        result,
        status=status,
        better_cause=better,
        method=f"{result.method}+binaries" if result.method not in ("", "none") else "binaries",
        arch=result.arch or gpu,
        binaries=tuple(reports),
        notes=tuple(dict.fromkeys(notes)),
    )


def gpu_arch(diagnosis: Diagnosis, kb: Any) -> str | None:
    """The one GPU arch the log shows (``sm_120``), from its archs or GPU names, else None."""
    found: set[str] = set()
    for fact in diagnosis.context.get("archs", ()):
        value = str(fact.get("value", "")).lower()
        if value.startswith("sm_"):
            found.add(value.rstrip("af"))
    if not found:
        for fact in diagnosis.context.get("gpus", ()):
            facts = kb.arch_for_gpu(str(fact.get("value", "")))
            if facts is not None:
                found.add(facts.arch)
    return found.pop() if len(found) == 1 else None


def _error_internal(diagnosis: Diagnosis) -> bool:
    primary = diagnosis.primary
    texts = [e.text for e in primary.evidence] if primary else []
    return any("Error Internal" in t or "kErrorInternal" in t for t in texts)


def _binary_paths(diagnosis: Diagnosis, binaries: Path | None) -> list[Path]:
    """The frames' modules that are CUDA binaries on this machine (or under ``binaries``)."""
    modules: dict[str, None] = {}
    for region in diagnosis.crashes:
        for frame in region.frames:
            module = frame.module or ""
            if module and Path(module).name.split("(")[0].endswith(_SUFFIXES):
                modules[module] = None
    out: list[Path] = []
    for module in modules:
        here = Path(module)
        if here.is_file():
            out.append(here)
        elif binaries is not None:
            found = _find(binaries, here.name)
            if found is not None:
                out.append(found)
        if len(out) >= MAX_BINARIES:
            break
    return list(dict.fromkeys(out))


def _find(root: Path, name: str) -> Path | None:
    """The first file called ``name`` under ``root`` (a bounded walk)."""
    import os

    seen = 0
    for folder, _dirs, files in os.walk(root):
        seen += len(files) + len(_dirs)
        if name in files:
            return Path(folder) / name
        if seen > MAX_WALK:
            return None
    return None


def as_dicts(reports: tuple[BinaryReport, ...]) -> list[dict[str, Any]]:
    """The JSON form of ``reports``."""
    return [r.to_dict() for r in reports]
