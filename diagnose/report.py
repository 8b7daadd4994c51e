"""The whole-log result: crash regions, ranked findings and the verdict that explains itself.

:class:`Diagnosis` is what :func:`diagnose.diagnose_text` and
:func:`diagnose.diagnose_file` return and what every renderer reads.  Its
``to_dict`` is the public JSON contract (``schema_version`` in
:mod:`diagnose.model`): fields may be added, never renamed or dropped without a
version bump.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from diagnose.model import SCHEMA_VERSION, Finding, Region
from diagnose.records import record

if TYPE_CHECKING:
    from diagnose.nearest import Likely
    from diagnose.verify.result import Verification


@record
class FixAdvice:
    """One concrete change to make, in the order the knowledge base ranks them."""

    title: str
    detail: str = ""
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    config: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "title": self.title,
            "detail": self.detail,
            "flags": list(self.flags),
            "env": list(self.env),
            "config": list(self.config),
        }


@record
class SimilarCase:
    """A known upstream case whose signature resembles this crash (rapidfuzz score 0..1)."""

    reference: str
    url: str
    title: str
    cause: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "reference": self.reference,
            "url": self.url,
            "title": self.title,
            "cause": self.cause,
            "score": round(self.score, 3),
        }


@record
class Diagnosis:
    """Everything crashkb concluded about one log.

    ``cause`` is a taxonomy id or ``"unknown"``; ``fatal`` is ``None`` when no
    crash was found at all.  ``findings`` are ranked best first; ``cascade``
    lists the rule ids judged to be consequences of the primary finding
    (an NCCL watchdog timeout after an illegal memory access).
    """

    source: str
    total_lines: int
    crashes: tuple[Region, ...]
    cause: str
    fatal: bool | None
    confidence: float
    tier: str | None
    title: str
    summary: str
    findings: tuple[Finding, ...]
    primary: Finding | None
    cascade: tuple[str, ...]
    fixes: tuple[FixAdvice, ...]
    similar: tuple[SimilarCase, ...]
    version_notes: tuple[str, ...]
    next_steps: tuple[str, ...]
    server_ready: bool
    context: dict[str, Any]
    notes: tuple[str, ...]
    kb_version: str
    streamed: bool = False
    #: Set by ``verify=True`` / ``--verify``: the verifier's check of the primary finding.
    verification: Verification | None = None
    #: When no rule matched a fatal error: the nearest known case (``diagnose.nearest``),
    #: whose cause this verdict then names at tier ``likely``.
    likely: Likely | None = None
    #: What each step of the verdict did and why (``diagnose.verdict.decide`` and the
    #: engine's unknown / likely steps), in order.
    verdict_steps: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """True when a known root cause was named."""
        return self.cause != "unknown"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object printed by ``--format json`` (the public contract)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "total_lines": self.total_lines,
            "streamed": self.streamed,
            "cause": self.cause,
            "fatal": self.fatal,
            "confidence": round(self.confidence, 4),
            "tier": self.tier,
            "title": self.title,
            "summary": self.summary,
            "primary": self.primary.to_dict() if self.primary else None,
            "cascade": list(self.cascade),
            "server_ready": self.server_ready,
            "crashes": [r.to_dict() for r in self.crashes],
            "findings": [f.to_dict() for f in self.findings],
            "fixes": [f.to_dict() for f in self.fixes],
            "similar": [s.to_dict() for s in self.similar],
            "version_notes": list(self.version_notes),
            "next_steps": list(self.next_steps),
            "context": self.context,
            "notes": list(self.notes),
            "kb_version": self.kb_version,
            "verification": self.verification.to_dict() if self.verification else None,
            "likely": self.likely.to_dict() if self.likely else None,
            "verdict_steps": list(self.verdict_steps),
        }
