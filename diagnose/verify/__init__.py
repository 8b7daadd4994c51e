"""Verify a diagnosis by rebuilding and measuring the operation the crash implicates.

``verify(diagnosis, level="compile")`` returns a :class:`Verification`:
``model`` evaluates the arch's formula against the kb (instant, no GPU);
``compile`` builds the real CUTLASS kernel for the crash's arch and reads its
shared-memory size; ``run`` repeats the GEMM or the allocations on the local
GPU.  Each level builds on the one below and the result says how far it got
and why not further; it never raises for a missing GPU, compiler or header.
Where FlashInfer's sources are installed (or named by ``$CRASHKB_FLASHINFER_SRC``)
the candidate tiles are read from them and :func:`source_context` shows the
lines around a throw site the log names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.verify.result import LEVELS, TileFit, Verification
from diagnose.verify.source_reader import SourceContext, framework_tiles, source_context

if TYPE_CHECKING:
    from diagnose.kb import KnowledgeBase
    from diagnose.report import Diagnosis

__all__ = [
    "LEVELS",
    "SourceContext",
    "TileFit",
    "Verification",
    "framework_tiles",
    "source_context",
    "verify",
]


def verify(
    diagnosis: Diagnosis,
    level: str = "model",
    *,
    kb: KnowledgeBase | None = None,
    cache: Path | None = None,
    binaries: Path | None = None,
    arch: str | None = None,
) -> Verification:
    """Verify ``diagnosis``'s primary finding up to ``level`` (``model``/``compile``/``run``).

    At every level the CUDA binaries the frames name are read when they are on this machine
    (or under ``binaries``) and can confirm or refute an arch verdict (see
    :mod:`diagnose.verify.binary_check`); ``arch`` is the GPU's when the log does not say it.
    """
    result = _verify(diagnosis, level, kb=kb, cache=cache)
    from diagnose.verify.binary_check import check_binaries

    if kb is None:
        from diagnose.kb import load_kb

        kb = load_kb()
    return check_binaries(result, diagnosis, kb, binaries=binaries, arch=arch)


def _verify(
    diagnosis: Diagnosis,
    level: str,
    *,
    kb: KnowledgeBase | None,
    cache: Path | None,
) -> Verification:
    """The GEMM and memory levels (see :func:`verify`)."""
    from diagnose.verify.spec import GemmSpec, build_spec

    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    if kb is None:
        from diagnose.kb import load_kb

        kb = load_kb()
    cause = diagnosis.primary.cause if diagnosis.primary else diagnosis.cause
    spec = build_spec(diagnosis, kb)
    if spec is None:
        return Verification(
            "inconclusive",
            "model",
            level,
            cause,
            method="none",
            notes=(f"No verifier for cause '{cause}'.",),
        )
    if isinstance(spec, GemmSpec):
        from diagnose.verify.model import verify_model

        result = verify_model(spec, kb, level)
        if level in ("compile", "run"):
            from diagnose.verify.compile import verify_compile

            result = verify_compile(spec, result, cache=cache)
        if level == "run":
            from diagnose.verify.run import verify_run_gemm

            result = verify_run_gemm(spec, result, problem=spec.problem)
    else:
        from diagnose.verify.memory import verify_memory_model

        result = verify_memory_model(spec, level)
        if level == "run":
            from diagnose.verify.run import verify_run_memory

            result = verify_run_memory(spec, result)
    from dataclasses import replace

    return replace(result, notes=tuple(dict.fromkeys(result.notes)))
