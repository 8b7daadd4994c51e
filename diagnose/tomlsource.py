"""Load TOML data files so that every later complaint can name file, line and field.

``tomllib`` reports syntax errors with a line and column but forgets where each
key was once parsing succeeds.  :class:`TomlSource` keeps the raw text and
finds the line of a dotted field path on demand, so validators in ``kb.py``
and ``rules/`` raise :class:`~diagnose.errors.RuleFileError` pointing at the
exact line (1-based).  Array-of-tables entries are addressed as ``fixes[2].title``.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
from pathlib import Path
from typing import Any

from diagnose.errors import RuleFileError
from diagnose.lazyre import lazy
from diagnose.records import record

#: Why a pattern read from a data file cannot be the regex its author wrote: in a TOML basic
#: string ("...") the escapes \b and \f are a backspace and a form feed, so "\bword" becomes a
#: pattern that silently never matches (three rule entries of round 357 did, caught only
#: because their log stayed unknown). Rules, concepts and vocabularies all check it.
CONTROL_ESCAPE = (
    "holds a backspace or form-feed character: in a TOML basic string \\b and \\f are "
    "control characters; write the pattern in a literal string (single quotes)"
)


def has_control_escape(pattern: str) -> bool:
    """True when ``pattern`` holds a character a basic string's \\b or \\f escape made."""
    return "\b" in pattern or "\f" in pattern


# Only needed to report an error or locate an example: compiled on first use.
_TOML_ERR_POS = lazy(r"\(at line (\d+), column (\d+)\)")
_HEADER = lazy(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = lazy(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.\-]+)\s*=""")
_INDEX = lazy(r"^(.*)\[(\d+)\]$")


@record
class TomlSource:
    """A parsed TOML file with its path and raw text kept for error locations."""

    path: str
    text: str
    data: dict[str, Any]

    def line_of(self, field: str) -> int | None:
        """Return the 1-based line where ``field`` (dotted, with ``[i]`` indexes) is set.

        Falls back to the line of the enclosing table when the key itself is not
        written out (a missing field is reported where its table starts).
        """
        parts = [p for p in field.split(".") if p]
        table: list[str] = []
        counts: dict[str, int] = {}
        target_table: list[str] = []
        for part in parts[:-1]:
            m = _INDEX.match(part)
            target_table.append(f"{m.group(1)}[{m.group(2)}]" if m else part)
        last = parts[-1] if parts else ""
        last_m = _INDEX.match(last)
        last_key = last_m.group(1) if last_m else last
        table_line: int | None = 1 if not target_table else None
        for number, raw in enumerate(self.text.splitlines(), start=1):
            header = _HEADER.match(raw)
            if header and not raw.lstrip().startswith("#"):
                name = header.group(2).strip()
                if header.group(1) == "[[":
                    counts[name] = counts.get(name, -1) + 1
                    table = _split_header(f"{name}[{counts[name]}]")
                else:
                    table = _split_header(name)
                if table == target_table and table_line is None:
                    table_line = number
                if last_m is None and table == [*target_table, last_key] and last_key:
                    return number
                if last_m is not None and table == [*target_table, last]:
                    return number
                continue
            key = _KEY.match(raw)
            if key and table == target_table:
                name = key.group(1).strip("\"'")
                if name == last_key or name.split(".")[-1] == last_key:
                    return number
        return table_line

    def array_table_lines(self, name: str) -> list[int]:
        """Return the lines of every top-level ``[[name]]`` header, in order, in one pass.

        Entry ``i`` is what :meth:`line_of` answers for ``name[i]``; locating every
        ``[[examples]]`` entry this way reads the file once instead of once per entry.
        """
        lines: list[int] = []
        for number, raw in enumerate(self.text.splitlines(), start=1):
            if "[[" not in raw:
                continue
            header = _HEADER.match(raw)
            # The same test line_of makes for entry 0, so both always agree.
            if (
                header
                and header.group(1) == "[["
                and not raw.lstrip().startswith("#")
                and _split_header(f"{header.group(2).strip()}[0]") == [f"{name}[0]"]
            ):
                lines.append(number)
        return lines

    def error(self, field: str | None, message: str) -> RuleFileError:
        """Build a :class:`RuleFileError` located at ``field``'s line."""
        line = self.line_of(field) if field else None
        return RuleFileError(self.path, line, field, message)


def _split_header(name: str) -> list[str]:
    """Split a table header such as ``a.b[0]`` into path parts, keeping indexes."""
    return [p.strip().strip("\"'") for p in name.split(".")]


#: Parsed files by ``(path, size, mtime_ns)``.  ``tomllib`` is pure Python and parsing the
#: shipped kb and rule base is most of a CLI run, so results are kept on disk between runs
#: (``marshal``: plain data only, it cannot carry code to execute).
_cache: dict[tuple[str, int, int], tuple[str, dict[str, Any]]] | None = None
_cache_dirty = False
_used: set[tuple[str, int, int]] = set()
_CACHE_VERSION = 1


def caching() -> bool:
    """False when ``CRASHKB_NO_CACHE`` is set (to anything but empty or ``0``): nothing is
    read from or written to the cache directory, and every run validates from source."""
    return os.environ.get("CRASHKB_NO_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    """Where crashkb keeps caches: ``$CRASHKB_CACHE_DIR`` or the user's XDG cache dir."""
    base = os.environ.get("CRASHKB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "crashkb"
    )
    return Path(base)


def _cache_file() -> Path:
    """Where parsed TOML is kept (see :func:`cache_dir`)."""
    return (
        cache_dir() / f"toml-v{_CACHE_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}.marshal"
    )


def _load_cache() -> dict[tuple[str, int, int], tuple[str, dict[str, Any]]]:
    """Read the on-disk parse cache once per process; any problem means an empty cache."""
    global _cache
    if _cache is None and not caching():
        _cache = {}
    if _cache is None:
        from diagnose.sealed import unseal

        try:
            payload = unseal(_cache_file().read_bytes())
            loaded = marshal.loads(payload) if payload is not None else {}
            _cache = loaded if isinstance(loaded, dict) else {}
        except (OSError, EOFError, ValueError, TypeError):
            _cache = {}
    return _cache


def save_parse_cache() -> None:
    """Write newly parsed files to the on-disk cache (best effort, atomic rename)."""
    global _cache_dirty
    if not _cache_dirty or _cache is None or not caching():
        return
    target = _cache_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        # Keep only files read by this process, so edited or deleted files never pile up.
        from diagnose.sealed import seal

        kept = {k: v for k, v in _cache.items() if k in _used}
        tmp.write_bytes(seal(marshal.dumps(kept)))
        os.replace(tmp, target)
        _cache_dirty = False
    except (OSError, ValueError):
        pass  # a read-only home or an unmarshallable value only costs speed


#: The largest rule or kb file read (a rule file is a few KiB; kb/gpus.toml ~60 KiB).
MAX_FILE_BYTES = 4 << 20


def load_toml(path: Path) -> TomlSource:
    """Read and parse ``path``; syntax errors become :class:`RuleFileError` with line and column."""
    global _cache_dirty
    try:
        st = path.stat()
    except OSError as exc:
        raise RuleFileError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from exc
    # A FIFO would block the read forever, /dev/zero would never end: only a regular file of
    # a sane size is data (the largest shipped file is ~60 KiB).
    if not stat.S_ISREG(st.st_mode):
        raise RuleFileError(str(path), None, None, "not a regular file (a pipe, device or socket)")
    if st.st_size > MAX_FILE_BYTES:
        raise RuleFileError(
            str(path),
            None,
            None,
            f"{st.st_size} bytes: larger than {MAX_FILE_BYTES}, not a kb file",
        )
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    cache = _load_cache()
    hit = cache.get(key)
    _used.add(key)
    # A cached entry of another shape (an older layout) is a miss, never trusted.
    valid = isinstance(hit, tuple) and len(hit) == 2 and isinstance(hit[0], str)
    if valid and isinstance(hit[1], dict):  # type: ignore[index]
        return TomlSource(str(path), hit[0], hit[1])  # type: ignore[index]
    try:
        with path.open("rb") as fh:  # bounded even if the file grew since stat()
            raw = fh.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise RuleFileError(str(path), None, None, f"larger than {MAX_FILE_BYTES} bytes")
    except OSError as exc:
        raise RuleFileError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from exc
    text = raw.decode("utf-8", errors="replace")
    # tomllib is imported only on a cache miss: a warm run never parses TOML.
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        pos = _TOML_ERR_POS.search(msg)
        line = int(pos.group(1)) if pos else getattr(exc, "lineno", None)
        clean = _TOML_ERR_POS.sub("", msg).strip()
        raise RuleFileError(str(path), line, None, f"invalid TOML: {clean}") from exc
    cache[key] = (text, data)
    _cache_dirty = True
    return TomlSource(str(path), text, data)
