"""Convert captured text into typed facts (``int``, ``float``, ``bytes``) and back for display.

Sizes: ``"2.00 GiB"``, ``"380 MiB"``, ``"1000MB"``, ``"4770354232 bytes"`` and a
bare ``"106496"`` all become a byte count.  ``KB``/``MB``/``GB`` are read as
1024-based like ``KiB``/``MiB``/``GiB``: PyTorch, sglang and vLLM divide by
``1 << 30`` and still print "GB", so a 1000-based reading would disagree with
the very numbers those tools print beside it.
"""

from __future__ import annotations

import re

from diagnose.lazyre import lazy
from diagnose.model import FactValue
from diagnose.rules.schema import Unit

_SIZE = lazy(
    r"^\s*(?P<num>\d+(?:[.,]\d+)?)\s*(?P<unit>[kmgtp]?i?b|bytes?|[kmgtp])?\s*$", re.IGNORECASE
)
_SCALE = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str) -> int | None:
    """Return the byte count ``text`` names, or ``None`` when it is not a size."""
    m = _SIZE.match(text)
    if m is None:
        return None
    number = float(m.group("num").replace(",", "."))
    unit = (m.group("unit") or "").lower()
    prefix = "" if unit.startswith("byte") or unit == "b" else unit[:1]
    return round(number * (1 << (10 * _SCALE[prefix])))


def convert(text: str, unit: Unit) -> FactValue | None:
    """Convert captured ``text`` to ``unit``; ``None`` when it does not fit the unit."""
    if unit == "str":
        return text
    if unit == "bytes":
        return parse_size(text)
    cleaned = text.strip().replace("_", "")
    try:
        if unit == "int":
            # Base 0 also reads 0x4020: ptxas prints shared sizes in hex. Leading zeros
            # ("0128") are invalid in base 0, so plain decimal stays the first try.
            return int(cleaned) if cleaned.isdigit() else int(cleaned, 0)
        return float(cleaned)
    except ValueError:
        return None


def format_size(value: float) -> str:
    """Render a byte count the way PyTorch does (``2.00 GiB``; plain bytes below 1 KiB)."""
    if value < 1024:
        return f"{int(value)} bytes"
    for exponent, name in ((4, "TiB"), (3, "GiB"), (2, "MiB")):
        if value >= 1024**exponent:
            return f"{value / 1024**exponent:.2f} {name}"
    return f"{value / 1024:.2f} KiB"
