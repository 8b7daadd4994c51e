"""Parse and compare the version strings that crash logs print.

Fixes are stated as "fixed in FlashInfer 0.6.4"; the log says what the user runs
(``0.6.3``, ``0.4.6.post1``, ``2.8.0+cu128``, ``1.2.0rc1``, ``v0.10.1``, ``12.8``).
:func:`is_before` answers "does this user predate the fix?".

Why not ``packaging.version``: it orders these strings the same way (both follow
PEP 440, and the tests cross-check the two), but it is not a declared dependency
of crashkb (it arrives with pip or pytest, not with a plain install), and it
raises on input it dislikes where a diagnoser needs "unknown".  The PEP 440
grammar is small, so it is implemented here once; strings outside it give
``None`` rather than a guess.
"""

from __future__ import annotations

import re
from dataclasses import field

from diagnose.records import record

__all__ = ["Version", "compare", "is_before", "parse_version"]

# PEP 440 public version plus local label, as in packaging's VERSION_PATTERN, written
# without nested quantifiers so a hostile string cannot make it backtrack.
# A leading "v"/"V" is allowed because tags (v0.10.1) and nvcc (V12.4.131) print one.
_VERSION_RE = re.compile(
    r"""
    v?
    (?:(?P<epoch>[0-9]{1,6})!)?
    (?P<release>[0-9]{1,12}(?:\.[0-9]{1,12}){0,15})
    (?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<pre_n>[0-9]{0,24}))?
    (?:-(?P<post_n1>[0-9]{1,24})|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]{0,24}))?
    (?:[-_.]?dev[-_.]?(?P<dev_n>[0-9]{0,24}))?
    (?:\+(?P<local>[a-z0-9]{1,64}(?:[-_.][a-z0-9]{1,64}){0,15}))?
    """,
    re.VERBOSE | re.IGNORECASE,
)

_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}

# Sort-key sentinels: PEP 440 places a missing pre-release after every pre-release,
# a missing dev segment after every dev release, a missing post segment before any.
_INF = (9, 0)  # above every (rank, n) pair: ranks are 0..2
_NEG = (-1, 0)

_LocalPart = tuple[int, int, str]
_SortKey = tuple[
    int,
    tuple[int, ...],
    tuple[int, int],
    tuple[int, int],
    tuple[int, int],
    tuple[_LocalPart, ...],
]


@record(order=True)
class Version:
    """A parsed version; ordering and equality follow PEP 440 (``1.0 == 1.0.0``).

    ``text`` is the string as given; ``release`` the numeric components;
    ``pre`` is ``("rc", 1)`` style; ``local`` the part after ``+`` (``cu128``).
    """

    key: _SortKey = field(repr=False)
    text: str = field(compare=False)
    release: tuple[int, ...] = field(compare=False)
    pre: tuple[str, int] | None = field(default=None, compare=False)
    post: int | None = field(default=None, compare=False)
    dev: int | None = field(default=None, compare=False)
    local: str = field(default="", compare=False)

    @property
    def base(self) -> str:
        """The release part only, ``"2.8.0"`` for ``2.8.0+cu128``."""
        return ".".join(str(n) for n in self.release)


def _local_key(local: str) -> tuple[_LocalPart, ...]:
    # PEP 440: local segments compare numerically when numeric, and a numeric
    # segment sorts after an alphanumeric one.
    parts: list[_LocalPart] = []
    for seg in re.split(r"[-_.]", local.lower()):
        parts.append((1, int(seg), "") if seg.isdigit() else (0, 0, seg))
    return tuple(parts)


def parse_version(text: str) -> Version | None:
    """Parse ``text`` as a PEP 440 version (leading ``v`` allowed); ``None`` if it is not one.

    Never raises.  Surrounding whitespace is ignored; anything else around the
    version (``"3.10.12 (main, ...)"``) makes it unparsable on purpose: callers
    extract the version token first (see :mod:`diagnose.context`).
    """
    stripped = text.strip()
    if len(stripped) > 256:
        return None
    m = _VERSION_RE.fullmatch(stripped)
    if m is None:
        return None
    release = tuple(int(p) for p in m.group("release").split("."))
    trimmed = release
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed = trimmed[:-1]

    pre: tuple[str, int] | None = None
    if m.group("pre_l"):
        label = m.group("pre_l").lower()
        canon = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}.get(
            label, label
        )
        pre = (canon, int(m.group("pre_n") or 0))
    post: int | None = None
    if m.group("post_n1"):
        post = int(m.group("post_n1"))
    elif m.group("post_l"):
        post = int(m.group("post_n2") or 0)
    dev_n = m.group("dev_n")
    dev = int(dev_n or 0) if dev_n is not None else None
    local = (m.group("local") or "").lower()

    if pre is None and post is None and dev is not None:
        pre_key = _NEG  # 1.0.dev1 sorts before 1.0a1
    elif pre is None:
        pre_key = _INF
    else:
        pre_key = (_PRE_RANK[pre[0]], pre[1])
    post_key = (0, post) if post is not None else _NEG
    dev_key = (0, dev) if dev is not None else _INF
    key: _SortKey = (
        int(m.group("epoch") or 0),
        trimmed,
        pre_key,
        post_key,
        dev_key,
        _local_key(local) if local else (),
    )
    return Version(
        key=key, text=stripped, release=release, pre=pre, post=post, dev=dev, local=local
    )


def _coerce(v: str | Version) -> Version | None:
    return v if isinstance(v, Version) else parse_version(v)


def compare(a: str | Version, b: str | Version) -> int | None:
    """Return -1, 0 or 1 as ``a`` is older, equal or newer than ``b``; ``None`` if unparsable."""
    va, vb = _coerce(a), _coerce(b)
    if va is None or vb is None:
        return None
    return (va > vb) - (va < vb)


def is_before(version: str | Version, fixed: str | Version) -> bool | None:
    """True when ``version`` is older than ``fixed`` (the user predates the fix).

    Returns ``None`` when either side cannot be parsed: "unknown" must never be
    read as "already fixed".  Local labels count as PEP 440 says, so
    ``2.8.0+cu128`` is not before ``2.8.0``; pre-releases of the fixed version
    (``0.6.4rc1`` against ``0.6.4``) are before it.
    """
    c = compare(version, fixed)
    return None if c is None else c < 0
