"""A digest in front of every cache file, so a damaged or hand-edited cache is rebuilt.

The caches (the rule/kb snapshot, the TOML parse cache, the compiled dataclass methods) are
``marshal`` data read back on every run.  A cache that decodes but was changed on disk (a
bit flip, a truncated write another tool finished, someone editing it) must never be
trusted: it would put text into verdicts that no rule file holds, or break every later run
until deleted.  ``seal`` prefixes the payload with its BLAKE2b digest; ``unseal`` returns the
payload only when the digest still matches.
"""

from __future__ import annotations

try:
    # The C BLAKE2 module alone: `import hashlib` also loads OpenSSL's _hashlib, ~2.2 ms of a
    # ~90 ms warm CLI run that reads sealed caches and hashes nothing else.
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

__all__ = ["seal", "unseal"]

_MAGIC = b"crashkb-sealed-1\n"
_DIGEST = 16


def seal(payload: bytes) -> bytes:
    """``payload`` with a header and its digest in front."""
    return _MAGIC + blake2b(payload, digest_size=_DIGEST).digest() + payload


def unseal(blob: bytes) -> bytes | None:
    """The payload of a :func:`seal` ed blob, or ``None`` when it was changed or is not one."""
    if not blob.startswith(_MAGIC):
        return None
    start = len(_MAGIC) + _DIGEST
    digest, payload = blob[len(_MAGIC) : start], blob[start:]
    if blake2b(payload, digest_size=_DIGEST).digest() != digest:
        return None
    return payload
