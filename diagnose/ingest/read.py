"""Turn a path, ``-`` (stdin) or a binary file object into text that never fails to decode.

Crash logs arrive in every state: gzip'd by a log rotator (often without a ``.gz``
name), UTF-16 from a Windows ``>`` redirect, padded with NUL bytes where a crashed
node's filesystem zero-filled the tail, or with one line of hundreds of megabytes
(a tensor dumped without newlines).  Everything here tolerates that; only an input
that cannot be opened at all raises :class:`~diagnose.errors.InputError`, with a
one-line message.

* :func:`open_source` opens the source and transparently decompresses it.
* :func:`read_text` returns the whole (optionally size-limited) text.
* :func:`iter_lines` streams lines in bounded memory, capping each line at
  :data:`MAX_LINE_CHARS` characters.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import IO, BinaryIO, cast

from diagnose.errors import InputError
from diagnose.records import record

__all__ = [
    "CHUNK_BYTES",
    "CUT_NOTE",
    "LIMIT_NOTE",
    "MAX_INPUT_BYTES",
    "MAX_LINE_CHARS",
    "NOTE_PREFIX",
    "STREAM_HEAD_BYTES",
    "WHOLE_INPUT_LIMIT",
    "Bounded",
    "dropped_marker",
    "input_note",
    "iter_lines",
    "open_bounded",
    "open_source",
    "read_text",
    "whole_text",
]

#: Inputs that hold at most this many (decompressed) bytes go through ``normalize`` +
#: ``find_regions`` whole; larger ones, from a file, a pipe or an archive alike, through
#: :func:`diagnose.ingest.scan.scan` first.  1 MiB holds every paste from a chat or an
#: issue; past it a full parse costs ~0.5 s a MiB, where the scan reads hundreds of MiB a
#: second and counts a flooding warning instead of parsing each copy (at 8 MiB, a 7 MB
#: server log took 4.0 s whole and takes 0.95 s scanned, with the same verdict).
#: Kept here, not in ``scan``, so a small input never imports the scanner (~1.5 ms).
WHOLE_INPUT_LIMIT = 1024 * 1024
#: A log read as a stream prints its settings (server args, GPU, versions) at start-up; this
#: much of its head is read whole for them.  Past the head only readiness lines are
#: collected: the full context vocabulary ("CUDA", "--", GPU model numbers) matches a
#: large share of healthy serving lines and made big-file scans several times slower.
#: The big-file scan and the stream's whole-log summary both keep this much.
STREAM_HEAD_BYTES = 1 << 20

#: Longest line kept, in characters.  The longest real frame we know of (a demangled
#: CUTLASS grouped-GEMM kernel with every template argument spelled out) is about 60 KB,
#: so 1 MiB keeps every frame whole while a 100 MB tensor dump stays harmless.
MAX_LINE_CHARS = 1 << 20

#: Bytes read per call when streaming (must stay below MAX_LINE_CHARS: _LineSplitter relies
#: on a line that starts and ends inside one chunk being shorter than the cap).
CHUNK_BYTES = 1 << 16
#: Said when a compressed input ends without its end-of-stream marker.
CUT_NOTE = (
    "the compressed input ends early (no end-of-stream marker): it was cut, "
    "and everything before the cut was read"
)
#: No input is read past this many (decompressed) bytes: a decompression bomb or an
#: endless pipe (``< /dev/zero``) ends here, in bounded memory all the way (README "Usage").
MAX_INPUT_BYTES = 32 << 30
LIMIT_NOTE = (
    f"only its first {MAX_INPUT_BYTES >> 30} GiB (decompressed) were read; "
    "to diagnose its end, pass the end (tail -c 1G) instead"
)

# How many bytes we look at to recognise compression and text encodings.
_SNIFF_BYTES = 4096

_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_BZ2_MAGIC = b"BZh"
_BZ2_BLOCK = b"1AY&SY"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: Binary formats a log is sometimes confused with, by magic bytes: what to call each.
_BINARY_MAGIC = (
    (b"\x7fELF", "an ELF executable or shared library"),
    (b"PK\x03\x04", "a zip archive (not read: unzip it first)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive (not read: extract it first)"),
    (b"Rar!", "a RAR archive (not read: extract it first)"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
    (b"\x04\x22\x4d\x18", "an LZ4 frame (not read: decompress it first)"),
)
#: Marks a note the reader adds to the text it returns (the API turns it into a note).
NOTE_PREFIX = "[crashkb: "


def input_note(what: str) -> str:
    """A line the reader appends to say something about the input itself."""
    return f"{NOTE_PREFIX}{what}]"


def dropped_marker(count: int) -> str:
    """Return the text appended to a line cut at :data:`MAX_LINE_CHARS` (``count`` dropped)."""
    return f" [crashkb: {count} more characters of this line dropped]"


class _Prepended(io.RawIOBase):
    """A raw stream that first replays ``head`` and then reads on from ``rest``.

    Lets us sniff the magic bytes of a pipe or socket without needing ``seek``.
    """

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._rest = rest
        # A binary stream's own readinto (files, pipes, sockets, BytesIO); anything else, such as
        # a text stream that slipped past _binary(), is read() and encoded.
        direct = getattr(rest, "readinto", None)
        self._direct = direct if isinstance(rest, (io.BufferedIOBase, io.RawIOBase)) else None

    def readable(self) -> bool:
        """Always readable."""
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Fill ``buffer`` from the replayed head first, then from the underlying stream."""
        out = memoryview(buffer).cast("B")
        if not self._head.nbytes and self._direct is not None:
            # Straight into the caller's buffer. read() here allocated a 16 MiB bytes object a
            # chunk and copied it on: reading 1 GB through this took 1.26 s against 0.11 s
            # for the file itself, most of the CLI's gap to grep on a clean log
            # (bench/results/flood.md).
            return int(self._direct(out) or 0)
        if not self._head.nbytes:
            data: bytes | str = self._rest.read(len(out))
            if isinstance(data, str):  # a text stream that slipped past _binary()
                data = data.encode("utf-8", "surrogatepass")
            self._head = memoryview(data or b"")
        n = min(len(out), self._head.nbytes)
        out[:n] = self._head[:n]
        self._head = self._head[n:]
        return n


def _describe(path: str, exc: OSError) -> str:
    """One-line reason an input path cannot be opened (no traceback text)."""
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a log file"
    if isinstance(exc, PermissionError):
        return f"{path}: permission denied"
    reason = exc.strerror or exc.__class__.__name__
    return f"{path}: cannot read ({reason})"


def _open_path(path: str) -> IO[bytes]:
    """Open ``path`` for binary reading or raise :class:`InputError`."""
    if os.path.isdir(path):
        # open() on a directory succeeds on some platforms and fails on read; say it plainly.
        raise InputError(f"{path}: is a directory, not a log file")
    try:
        return open(path, "rb")
    except OSError as exc:
        raise InputError(_describe(path, exc)) from None


def _binary(stream: object) -> IO[bytes]:
    """Return a byte stream for ``stream``, unwrapping text streams such as ``sys.stdin``."""
    if isinstance(stream, io.TextIOBase):
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            # A StringIO has no bytes underneath; re-encode what it holds.
            return io.BytesIO(stream.read().encode("utf-8", "surrogatepass"))
        return cast("IO[bytes]", buffer)
    return cast("IO[bytes]", stream)


def _decompressing(raw: IO[bytes], name: str) -> IO[bytes]:
    """Wrap ``raw`` in a decompressor when its first bytes are a gzip/xz/bz2 magic number.

    The magic is checked rather than the file name: log rotators and ``kubectl cp`` keep
    names like ``server.log.1`` for compressed files, and a ``.gz`` name may hold text.
    """
    head = _read_some(raw, _SNIFF_BYTES, name)
    stream: IO[bytes] = io.BufferedReader(_Prepended(head, raw), buffer_size=CHUNK_BYTES)
    if head.startswith(_GZIP_MAGIC):
        return io.BufferedReader(_Gunzip(stream), buffer_size=CHUNK_BYTES)
    if head.startswith(_XZ_MAGIC):
        import lzma

        return cast("IO[bytes]", lzma.LZMAFile(stream, mode="rb"))
    if head.startswith(_BZ2_MAGIC) and head[4:10] == _BZ2_BLOCK:
        import bz2

        return cast("IO[bytes]", bz2.BZ2File(stream, mode="rb"))
    if head.startswith(_ZSTD_MAGIC):
        import zstandard  # a dependency; imported only for a zstd input

        reader = zstandard.ZstdDecompressor().stream_reader(
            stream, read_across_frames=True, closefd=False
        )
        return io.BufferedReader(cast("io.RawIOBase", reader), buffer_size=CHUNK_BYTES)
    return stream


class _Gunzip(io.RawIOBase):
    """A gzip stream read with zlib directly, so that a cut file keeps what it holds.

    ``gzip.GzipFile`` raises ``EOFError`` on a stream that ends without its 8-byte trailer
    and loses the data it had decompressed in that call: the last chunk, where a dying
    process's crash is.  Here every byte decompressed is returned, ``truncated`` says the
    stream was cut (or corrupt from some point), and concatenated members are read on.
    """

    _CHUNK = 1 << 16

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._z = zlib.decompressobj(wbits=31)
        self._pending = b""
        self._done = False
        self.truncated = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        want = len(buffer)
        while not self._pending and not self._done:
            self._pending = self._step(want)
        out, self._pending = self._pending[:want], self._pending[want:]
        buffer[: len(out)] = out
        return len(out)

    def _step(self, want: int) -> bytes:
        """Decompress some more; ``b""`` only when nothing is left (``_done`` set)."""
        z = self._z
        data = z.unconsumed_tail or self._raw.read(self._CHUNK)
        if not data:
            self._done = True
            self.truncated = not z.eof
            return z.flush() if not z.eof else b""
        try:
            out = z.decompress(data, max(want, self._CHUNK))
        except zlib.error:
            self._done = self.truncated = True
            return b""
        if z.eof:
            rest = z.unused_data
            if rest.startswith(_GZIP_MAGIC):  # another member follows (cat a.gz b.gz)
                self._z = zlib.decompressobj(wbits=31)
                out += self._restart(rest)
            else:
                self._done = True
        return out

    def _restart(self, rest: bytes) -> bytes:
        try:
            return self._z.decompress(rest, self._CHUNK)
        except zlib.error:
            self._done = self.truncated = True
            return b""


def _read_some(stream: IO[bytes], size: int, name: str) -> bytes:
    """Read up to ``size`` bytes, mapping OS errors to :class:`InputError`."""
    try:
        data: object = stream.read(size)
    except OSError as exc:
        raise InputError(_describe(name, exc)) from None
    except ValueError:  # "I/O operation on closed file"
        raise InputError(f"{name}: the stream is closed") from None
    if isinstance(data, str):  # a text-mode file object passed in despite the annotation
        return data.encode("utf-8", "surrogatepass")
    return bytes(cast("bytes", data or b""))


@contextlib.contextmanager
def open_source(source: str | os.PathLike[str] | BinaryIO) -> Iterator[BinaryIO]:
    """Open a log source as a binary stream, decompressing gzip/xz/bz2 by magic bytes.

    ``source`` is a path, ``"-"`` for standard input, or an open file object (binary
    preferred; a text stream's underlying buffer is used).  File objects passed in are
    not closed.  Raises :class:`InputError` when the path is missing, is a directory or
    cannot be read.
    """
    owned: IO[bytes] | None = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path == "-":
            raw, name = _binary(sys.stdin), "<stdin>"
        else:
            owned = _open_path(path)
            raw, name = owned, path
    else:
        raw, name = _binary(source), getattr(source, "name", "<stream>")
        if not isinstance(name, str):
            name = "<stream>"
    try:
        yield cast("BinaryIO", _decompressing(raw, name))
    finally:
        if owned is not None:
            owned.close()


def _chunks(
    stream: IO[bytes], limit: int | None, name: str, cut: list[bool] | None = None
) -> Iterator[bytes]:
    """Yield raw chunks until EOF or ``limit`` bytes; a truncated archive ends the stream.

    A crash often kills the process writing ``log.gz``, leaving no end-of-stream marker;
    what was decompressed up to the cut is still the most valuable part of the log.
    ``cut`` (when given) gets ``True`` appended when the archive ended early.
    """
    left = limit
    while left is None or left > 0:
        want = CHUNK_BYTES if left is None else min(CHUNK_BYTES, left)
        data = _read_guarded(stream, want, name, cut)
        if not data:
            return
        if left is not None:
            left -= len(data)
        yield data


def _read_guarded(stream: IO[bytes], want: int, name: str, cut: list[bool] | None) -> bytes:
    """Up to ``want`` bytes of ``stream``; ``b""`` at its end or where its archive breaks off."""
    if cut:
        return b""  # a decompressor that failed is never asked again
    try:
        return stream.read(want) or b""
    except _corrupt_archive_errors():
        _broke_off(cut)
    except (OSError, ValueError) as exc:
        _read_error(stream, exc, name, cut)
    return b""


def _broke_off(cut: list[bool] | None) -> None:
    """Note that a compressed stream broke off (``cut`` collects it)."""
    if cut is not None:
        cut.append(True)


def _read_error(
    stream: IO[bytes], exc: OSError | ValueError, name: str, cut: list[bool] | None
) -> None:
    """A read error: the archive broke off when a decompressor raised it, else InputError.

    bz2 reports a corrupt stream as a bare OSError("Invalid data stream"); Python 3.12.3's
    raises ValueError("Decompressor is unusable after a previous error") instead (a fuzz
    campaign found it)."""
    if type(stream).__module__ not in {"gzip", "lzma", "bz2"}:
        why = _describe(name, exc) if isinstance(exc, OSError) else f"{name}: {exc}"
        raise InputError(why) from None
    _broke_off(cut)


class _Guarded(io.RawIOBase):
    """A decompressed stream read to its end: where the archive breaks off, it just ends.

    It first replays the bytes :func:`open_bounded` read to decide (:meth:`replay`), reads
    at most :data:`MAX_INPUT_BYTES` in all, and :meth:`notes` says how it ended.
    """

    def __init__(self, stream: IO[bytes], name: str) -> None:
        super().__init__()
        self._stream, self._name = stream, name
        self._cut: list[bool] = []
        self._left = MAX_INPUT_BYTES
        self._replay = memoryview(b"")

    def replay(self, head: bytearray) -> None:
        """Give ``head`` (already read through this stream) again before reading on."""
        self._replay = memoryview(head)

    def readable(self) -> bool:
        """Always readable."""
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Fill ``buffer``; 0 at the end, where the archive breaks off, or at the limit."""
        out = memoryview(buffer).cast("B")
        if self._replay.nbytes:
            n = min(len(out), self._replay.nbytes)
            out[:n], self._replay = self._replay[:n], self._replay[n:]
            return n
        want = min(len(out), self._left)
        if want <= 0 or self._cut:  # the end, or an archive that already broke off
            return 0
        got = 0
        try:
            got = self._stream.readinto(out[:want]) or 0  # type: ignore[attr-defined]
        except _corrupt_archive_errors():
            _broke_off(self._cut)
        except (OSError, ValueError) as exc:
            _read_error(self._stream, exc, self._name, self._cut)
        self._left -= got
        return int(got)

    def notes(self) -> tuple[str, ...]:
        """What to say about how the input ended: cut archive, or read up to the limit."""
        cut = (CUT_NOTE,) if _was_cut(self._stream, self._cut) else ()
        return (*cut, LIMIT_NOTE) if self._left <= 0 else cut


def _corrupt_archive_errors() -> tuple[type[BaseException], ...]:
    """The errors a decompressor raises on a cut or corrupt archive (only those imported)."""
    errors: list[type[BaseException]] = [EOFError, zlib.error]
    gzip = sys.modules.get("gzip")
    if gzip is not None:
        errors.append(gzip.BadGzipFile)
    lzma = sys.modules.get("lzma")
    if lzma is not None:
        errors.append(lzma.LZMAError)
    zstandard = sys.modules.get("zstandard")
    if zstandard is not None:
        errors.append(zstandard.ZstdError)
    return tuple(errors)


def _was_cut(stream: IO[bytes], cut: list[bool]) -> bool:
    """Whether the (decompressed) stream ended before its archive's end marker."""
    raw = getattr(stream, "raw", None)
    return bool(cut) or bool(getattr(raw, "truncated", False))


def _binary_kind(head: bytes) -> str | None:
    """What a non-text input is, by magic bytes or by its share of control bytes."""
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            return what
    sample = head[:_SNIFF_BYTES]
    if len(sample) < 64:
        return None
    if sample.count(0) > len(sample) // 2:
        return None  # zero-fill after a crash: read around it, as the reader always did
    # A log is UTF-8 text (any language): count what does not decode, and control bytes.
    decoded = sample.decode("utf-8", "replace")
    bad = sum(1 for ch in decoded if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b\x00"))
    if bad > 0.1 * len(decoded):
        return "binary data (or an encoding or compression not read), not a text log"
    return None


def _sniff_encoding(head: bytes) -> str:
    """Pick the codec from a BOM, or UTF-16 by its NUL pattern; default UTF-8.

    PowerShell's ``>`` writes UTF-16LE with a BOM; a BOM-less UTF-16 file shows up as
    ASCII interleaved with NULs, which we recognise rather than turn into junk.
    """
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    sample = head[:_SNIFF_BYTES]
    if len(sample) >= 8:
        even, odd = sample[0::2], sample[1::2]
        n = len(odd)
        if odd.count(0) > 0.8 * n and even.count(0) < 0.1 * n:
            return "utf-16-le"
        if even.count(0) > 0.8 * n and odd.count(0) < 0.1 * n:
            return "utf-16-be"
    return "utf-8"


def _decoder(encoding: str) -> codecs.IncrementalDecoder:
    """An incremental decoder that replaces undecodable bytes instead of failing."""
    return codecs.getincrementaldecoder(encoding)(errors="replace")


def read_text(source: str | os.PathLike[str] | BinaryIO, limit: int | None = None) -> str:
    """Read a whole log as text: decompressed, decoded, NULs removed, lines capped.

    ``limit`` caps the number of (decompressed) bytes read; the rest is ignored, and a
    multi-byte character cut by the limit is dropped rather than shown as junk.  Lines
    longer than :data:`MAX_LINE_CHARS` are cut the same way :func:`iter_lines` cuts them,
    so both readers give downstream code the same text.  Raises :class:`InputError`
    only when the source cannot be opened.
    """
    with open_source(source) as stream:
        # Unpacked straight into the call: _text_of then holds the only reference to the
        # bytes and frees them before the text is post-processed.
        return _text_of(*_collect(stream, limit), whole=limit is None)


@record
class Bounded:
    """An input read up to a limit: ``text`` when it all fit, else a ``stream`` to scan.

    ``stream`` replays the bytes already read and reads on; ``head`` is the text of its
    first bytes (where a scan reads the settings from), decoded as ``text`` would be;
    ``notes()`` says how a streamed input ended (a cut archive, the input limit), known
    once the stream was read.
    """

    text: str | None
    stream: BinaryIO | None
    head: str
    notes: Callable[[], tuple[str, ...]]


@contextlib.contextmanager
def open_bounded(
    source: str | os.PathLike[str] | BinaryIO, limit: int = WHOLE_INPUT_LIMIT, head: int = 0
) -> Iterator[Bounded]:
    """Read at most ``limit`` (decompressed) bytes of ``source``, then decide by what came.

    ``head``: how many bytes of a streamed input to decode as :attr:`Bounded.head`.
    The decision depends on the bytes the input holds, never on its size on disk:
    standard input, a pipe and a compressed file (however far it expands) are read as a
    stream like any big file, so memory stays bounded for every kind of input.
    """
    with open_source(source) as opened:
        guarded = _Guarded(opened, str(getattr(opened, "name", "<stream>")))
        buf, longest, _ = _collect(cast("IO[bytes]", guarded), limit + 1)
        if len(buf) <= limit:
            text = _text_of(buf, longest, CUT_NOTE in guarded.notes(), whole=True)
            yield Bounded(text, None, "", guarded.notes)
            return
        # Decoded from the bytes in hand (``longest`` of the whole probe bounds the head's).
        first = _text_of(buf[:head], longest, False, whole=False)
        guarded.replay(buf)  # the scan reads from line 1, without a copy of what was read
        stream = cast("BinaryIO", io.BufferedReader(guarded, buffer_size=CHUNK_BYTES))
        yield Bounded(None, stream, first, guarded.notes)


def _collect(stream: IO[bytes], limit: int | None) -> tuple[bytearray, int, bool]:
    """Up to ``limit`` bytes of ``stream``, its longest newline-free run, and whether the
    archive it came from was cut."""
    name = str(getattr(stream, "name", "<stream>"))
    buf = bytearray()
    longest = run = 0  # longest run of bytes without a newline, seen at chunk edges
    cut: list[bool] = []
    for chunk in _chunks(stream, limit, name, cut):
        buf += chunk
        first = chunk.find(b"\n")
        if first < 0:
            run += len(chunk)
        else:
            longest = max(longest, run + first)
            run = len(chunk) - chunk.rfind(b"\n") - 1
    return buf, max(longest, run), _was_cut(stream, cut)


def whole_text(buf: bytes | bytearray) -> str:
    """Decode an input of at most :data:`WHOLE_INPUT_LIMIT` bytes held whole, exactly as
    :func:`open_bounded` decodes one it read: the stream's summary of a small input must read
    the same text a file of those bytes gives (one window, whatever the way in).

    No newline-free run is longer than the input itself, and that bound is all
    :func:`_text_of` needs: it caps lines only in a text longer than ``MAX_LINE_CHARS``
    (= ``WHOLE_INPUT_LIMIT``), so the buffer is neither copied nor split to measure them."""
    return _text_of(buf, len(buf), False, whole=True)


def _text_of(buf: bytes | bytearray, longest: int, cut: bool, *, whole: bool) -> str:
    """Decode what :func:`_collect` read (``whole``: nothing past it was left unread)."""
    notes: list[str] = []
    if cut:
        notes.append(CUT_NOTE)
    encoding = _sniff_encoding(bytes(buf[:_SNIFF_BYTES]))
    if encoding == "utf-8" and (kind := _binary_kind(bytes(buf[:_SNIFF_BYTES]))) is not None:
        notes.append(f"this input looks like {kind}")
    # Whole: decode in one go (an incremental decoder would first copy the whole buffer).
    # Cut by a limit: final=False drops a partial character instead of showing junk.
    text = buf.decode(encoding, "replace") if whole else _decoder(encoding).decode(buf, final=False)
    del buf
    if "\x00" in text:
        # NUL runs are filesystem zero-fill after a crash or binary junk; they carry nothing.
        text = text.replace("\x00", "")
    # Every decoded character takes at least one byte, so a line can only be too long if
    # some newline-free run of bytes was; runs inside one chunk are shorter than the cap.
    # (UTF-16 has 0x0A bytes inside other characters, so there only the length tells.)
    if len(text) > MAX_LINE_CHARS and (longest > MAX_LINE_CHARS or "16" in encoding):
        sep = "\r" if "\n" not in text and "\r" in text else "\n"  # as iter_lines decides
        text = _cap_long_lines(text, sep)
    if notes:
        end = "" if not text or text.endswith(("\n", "\r")) else "\n"
        text += end + "\n".join(input_note(n) for n in notes) + "\n"
    return text


def _cap_long_lines(text: str, sep: str) -> str:
    """Cut every ``sep``-terminated line longer than :data:`MAX_LINE_CHARS`."""
    parts: list[str] = []
    start = 0
    changed = False
    while start < len(text):
        end = text.find(sep, start)
        stop = len(text) if end < 0 else end
        if stop - start > MAX_LINE_CHARS:
            parts.append(text[start : start + MAX_LINE_CHARS])
            parts.append(dropped_marker(stop - start - MAX_LINE_CHARS))
            changed = True
        else:
            parts.append(text[start:stop])
        if end < 0:
            break
        parts.append(sep)
        start = end + 1
    return "".join(parts) if changed else text


def iter_lines(source: str | os.PathLike[str] | BinaryIO) -> Iterator[str]:
    """Stream the lines of a log (without their terminators) in bounded memory.

    Decoding and NUL removal are as in :func:`read_text`.  Lines end at ``\\n`` (a
    trailing ``\\r`` of CRLF is removed); when the first chunk holds ``\\r`` but no
    ``\\n`` at all, the file uses old Mac CR-only endings and ``\\r`` ends lines
    instead.  A line longer than :data:`MAX_LINE_CHARS` keeps its first
    ``MAX_LINE_CHARS`` characters followed by :func:`dropped_marker`; memory stays
    around ``MAX_LINE_CHARS + CHUNK_BYTES`` whatever the line length.
    """
    with open_source(source) as stream:
        name = str(getattr(stream, "name", "<stream>"))
        chunks = _chunks(stream, None, name)
        first = next(chunks, b"")
        if not first:
            return
        decoder = _decoder(_sniff_encoding(first))
        text = decoder.decode(first)
        sep = "\r" if "\n" not in text and "\r" in text else "\n"
        splitter = _LineSplitter(sep)
        yield from splitter.feed(text)
        for chunk in chunks:
            yield from splitter.feed(decoder.decode(chunk))
        yield from splitter.feed(decoder.decode(b"", final=True))
        yield from splitter.finish()


class _LineSplitter:
    """Cuts decoded text into lines, keeping at most :data:`MAX_LINE_CHARS` of each."""

    def __init__(self, sep: str) -> None:
        self._sep = sep
        self._parts: list[str] = []
        self._kept = 0
        self._dropped = 0

    def feed(self, text: str) -> Iterator[str]:
        """Add decoded text; yield every line it completes."""
        if "\x00" in text:
            text = text.replace("\x00", "")
        parts = text.split(self._sep)
        self._add(parts[0])
        if len(parts) == 1:
            return
        yield self._take()
        # Inner parts are whole lines shorter than one chunk, hence than the cap.
        crlf = self._sep == "\n"
        for line in parts[1:-1]:
            yield line[:-1] if crlf and line.endswith("\r") else line
        self._add(parts[-1])

    def finish(self) -> Iterator[str]:
        """Yield the last line when the input did not end with a terminator."""
        if self._parts or self._dropped:
            yield self._take()

    def _add(self, piece: str) -> None:
        room = MAX_LINE_CHARS - self._kept
        if len(piece) > room:
            self._dropped += len(piece) - room
            piece = piece[:room]
        if piece:
            self._parts.append(piece)
            self._kept += len(piece)

    def _take(self) -> str:
        line = "".join(self._parts)
        if self._sep == "\n" and line.endswith("\r"):
            line = line[:-1]
        if self._dropped:
            line += dropped_marker(self._dropped)
        self._parts, self._kept, self._dropped = [], 0, 0
        return line
