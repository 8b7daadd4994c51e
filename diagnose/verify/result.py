"""The verifier's frozen result: :class:`Verification` and its public JSON form.

A verification names the level it reached (``model`` < ``compile`` < ``run``),
the status it could justify there (``confirmed``, ``refuted`` or
``inconclusive``) and every number it used, so a reader can redo the check.
"""

from __future__ import annotations

from typing import Any

from diagnose.records import record

#: Levels in the order they are attempted; a verification never skips one.
LEVELS = ("model", "compile", "run")
STATUSES = ("confirmed", "refuted", "inconclusive")

#: A measured or computed value: bytes and counts are ints, ratios and times floats.
Measure = int | float | str


@record
class TileFit:
    """One tile the framework can pick for the crash's arch, and whether it fits there."""

    name: str
    tile: tuple[int, int, int]
    smem: int
    stages: int
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name", "tile", "smem", "stages", "fits"}``."""
        return {
            "name": self.name,
            "tile": list(self.tile),
            "smem": self.smem,
            "stages": self.stages,
            "fits": self.fits,
        }


@record
class Verification:
    """What the verifier rebuilt, measured and concluded about the primary finding.

    ``level`` is the highest level reached; ``requested`` the one asked for.
    ``measurements`` and ``toolchain`` are ``(name, value)`` pairs in the order
    they were taken.  ``better_cause`` names another cause when the check
    refuted the diagnosis and pointed elsewhere (an arch-image mismatch behind
    "Error Internal").  ``tiles`` lists the candidate tiles for the crash's arch and
    ``tile_source`` where they came from (the installed FlashInfer's sources, or
    ``kb table``).  ``source_lines`` are ``(line, text)`` pairs of the installed
    source around the log's throw site (``source_file:source_line``).
    """

    status: str
    level: str
    requested: str
    cause: str
    method: str = ""
    arch: str | None = None
    tile: tuple[int, int, int] | None = None
    dtypes: tuple[str, ...] = ()
    smem_required: int | None = None
    smem_limit: int | None = None
    stages: int | None = None
    toolchain: tuple[tuple[str, str], ...] = ()
    device: str | None = None
    measurements: tuple[tuple[str, Measure], ...] = ()
    notes: tuple[str, ...] = ()
    tiles: tuple[TileFit, ...] = ()
    recommendation: str = ""
    better_cause: str | None = None
    tile_source: str = ""
    source_file: str = ""
    source_line: int | None = None
    source_lines: tuple[tuple[int, str], ...] = ()
    #: The CUDA binaries the crash's frames name, as read (``diagnose.verify.binaries``).
    binaries: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object stored under the diagnosis' ``verification`` key."""
        return {
            "status": self.status,
            "level": self.level,
            "requested": self.requested,
            "cause": self.cause,
            "method": self.method,
            "arch": self.arch,
            "tile": list(self.tile) if self.tile else None,
            "dtypes": list(self.dtypes),
            "smem_required": self.smem_required,
            "smem_limit": self.smem_limit,
            "stages": self.stages,
            "toolchain": dict(self.toolchain),
            "device": self.device,
            "measurements": dict(self.measurements),
            "notes": list(self.notes),
            "tiles": [t.to_dict() for t in self.tiles],
            "recommendation": self.recommendation,
            "better_cause": self.better_cause,
            "tile_source": self.tile_source,
            "source_context": {
                "file": self.source_file,
                "line": self.source_line,
                "lines": [[n, text] for n, text in self.source_lines],
            }
            if self.source_lines
            else None,
            "binaries": [b.to_dict() for b in self.binaries],
        }
