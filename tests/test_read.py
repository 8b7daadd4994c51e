"""Tests for diagnose.ingest.read: sources, compression by magic, encodings, bad paths, memory."""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from diagnose.errors import InputError
from diagnose.ingest.read import (
    MAX_LINE_CHARS,
    dropped_marker,
    iter_lines,
    open_source,
    read_text,
)

LOG = "[2031-04-05 06:07:08 TP1] Scheduler hit an exception\nRuntimeError: synthetic boom\n"


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- sources ------------------------------------------------------------------------------


def test_path_str_and_pathlike(tmp_path: Path) -> None:
    path = write(tmp_path, "a.log", LOG.encode())
    assert read_text(str(path)) == LOG
    assert read_text(path) == LOG


def test_binary_file_object_is_not_closed() -> None:
    stream = io.BytesIO(LOG.encode())
    assert read_text(stream) == LOG
    assert not stream.closed


def test_text_file_object_is_accepted() -> None:
    assert read_text(io.StringIO(LOG)) == LOG  # type: ignore[arg-type]


def test_stdin_dash_reads_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO(b"caf\xc3\xa9 \xff line\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw, encoding="ascii"))
    # Read through .buffer: the text wrapper's strict ascii codec must not be used.
    assert read_text("-") == "café \ufffd line\n"


def test_open_source_yields_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, "a.log", gzip.compress(LOG.encode()))
    with open_source(path) as stream:
        assert stream.read() == LOG.encode()


# --- compression --------------------------------------------------------------------------


def test_gzip_detected_by_magic_not_name(tmp_path: Path) -> None:
    path = write(tmp_path, "server.log.1", gzip.compress(LOG.encode()))
    assert read_text(path) == LOG


def test_gz_name_holding_plain_text(tmp_path: Path) -> None:
    path = write(tmp_path, "server.log.gz", LOG.encode())
    assert read_text(path) == LOG


def test_gzip_file_object_and_stream_without_seek() -> None:
    class Pipe(io.RawIOBase):
        """A non-seekable stream that hands out a few bytes per read, like a pipe."""

        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
            n = min(len(b), 7, len(self.data))
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n

    assert read_text(Pipe(gzip.compress(LOG.encode()))) == LOG  # type: ignore[arg-type]


def test_truncated_gzip_keeps_what_was_decompressed(tmp_path: Path) -> None:
    body = "".join(f"line {i} of a log cut by a crash\n" for i in range(5000)).encode()
    data = gzip.compress(body)
    path = write(tmp_path, "cut.log", data[: len(data) // 2])
    text = read_text(path)
    *kept, note = text.rstrip("\n").split("\n")
    assert kept and body.decode().startswith("\n".join(kept))
    assert note.startswith("[crashkb: the compressed input ends early")
    lines = list(iter_lines(path))
    assert lines and lines[0] == "line 0 of a log cut by a crash"


@pytest.mark.parametrize("compress", [lzma.compress, bz2.compress])
def test_xz_and_bz2_by_magic(tmp_path: Path, compress: object) -> None:
    path = write(tmp_path, "x.log", compress(LOG.encode()))  # type: ignore[operator]
    assert read_text(path) == LOG


def test_text_starting_like_bz2_magic_is_text() -> None:
    text = "BZh9 is not a bz2 header here\n"
    assert read_text(io.BytesIO(text.encode())) == text


# --- encodings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        codecs.BOM_UTF8 + LOG.encode(),
        LOG.encode("utf-16"),
        codecs.BOM_UTF16_BE + LOG.encode("utf-16-be"),
        LOG.encode("utf-16-le"),  # no BOM: recognised by its NUL pattern
        LOG.encode("utf-16-be"),
    ],
    ids=["utf8-bom", "utf16-bom", "utf16be-bom", "utf16le-nobom", "utf16be-nobom"],
)
def test_encodings(data: bytes) -> None:
    assert read_text(io.BytesIO(data)) == LOG


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert read_text(io.BytesIO(b"ok \xc3\x28 \xff\xfe end\n")) == "ok \ufffd( \ufffd\ufffd end\n"


def test_nuls_and_binary_junk() -> None:
    data = b"before crash\n" + b"\x00" * 4096 + b"after \x00restart\x01\x7f\n"
    assert read_text(io.BytesIO(data)) == "before crash\nafter restart\x01\x7f\n"
    assert list(iter_lines(io.BytesIO(data))) == ["before crash", "after restart\x01\x7f"]


def test_only_nuls_and_empty() -> None:
    assert read_text(io.BytesIO(b"\x00" * 1000)) == ""
    assert read_text(io.BytesIO(b"")) == ""
    assert list(iter_lines(io.BytesIO(b""))) == []


def test_limit_drops_a_cut_multibyte_character() -> None:
    data = "ab€".encode()  # € is 3 bytes
    assert read_text(io.BytesIO(data), limit=4) == "ab"
    assert read_text(io.BytesIO(data), limit=3) == "ab"
    assert read_text(io.BytesIO(data), limit=2) == "ab"
    assert read_text(io.BytesIO(data), limit=5) == "ab€"
    assert read_text(io.BytesIO(data), limit=100) == "ab€"


# --- unusable inputs ------------------------------------------------------------------------


def assert_one_line(exc: pytest.ExceptionInfo[InputError], *words: str) -> None:
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message
    for word in words:
        assert word in message


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    with pytest.raises(InputError) as exc:
        read_text(missing)
    assert_one_line(exc, str(missing), "no such file")
    with pytest.raises(InputError):
        list(iter_lines(missing))


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        read_text(tmp_path)
    assert_one_line(exc, "directory")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read anything")
def test_permission_denied(tmp_path: Path) -> None:
    path = write(tmp_path, "secret.log", b"x")
    path.chmod(0)
    with pytest.raises(InputError) as exc:
        read_text(path)
    assert_one_line(exc, "permission denied")


def test_permission_denied_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs as root too: simulate the EACCES that open() raises for an unreadable file.
    import diagnose.ingest.read as read_module

    def deny(path: str, mode: str = "r") -> object:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(read_module, "open", deny, raising=False)
    with pytest.raises(InputError) as exc:
        read_text(write(tmp_path, "locked.log", b"x"))
    assert_one_line(exc, "locked.log", "permission denied")


def test_closed_stream() -> None:
    stream = io.BytesIO(b"x")
    stream.close()
    with pytest.raises(InputError) as exc:
        read_text(stream)
    assert_one_line(exc, "closed")


# --- lines ----------------------------------------------------------------------------------


def test_iter_lines_endings() -> None:
    assert list(iter_lines(io.BytesIO(b"a\r\nb\nc"))) == ["a", "b", "c"]
    assert list(iter_lines(io.BytesIO(b"a\rb\rc\r"))) == ["a", "b", "c"]  # old Mac CR-only
    # With \n present, a lone \r is a progress-bar overwrite left for normalize().
    assert list(iter_lines(io.BytesIO(b"10%\r100%\ndone\n"))) == ["10%\r100%", "done"]
    assert list(iter_lines(io.BytesIO(b"\n\n"))) == ["", ""]


def test_iter_lines_across_chunk_boundaries() -> None:
    text = "".join(f"{i:05d} é ü ✓\n" for i in range(30000))  # multi-byte chars cross chunks
    data = text.encode("utf-16")
    assert list(iter_lines(io.BytesIO(data))) == text.split("\n")[:-1]


def test_long_line_is_capped_in_both_readers(tmp_path: Path) -> None:
    extra = 12345
    path = write(tmp_path, "wide.log", b"head\n" + b"y" * (MAX_LINE_CHARS + extra) + b"\ntail\n")
    lines = list(iter_lines(path))
    assert lines[0] == "head" and lines[2] == "tail"
    assert lines[1] == "y" * MAX_LINE_CHARS + dropped_marker(extra)
    assert read_text(path) == "\n".join(lines) + "\n"


def test_cr_only_file_longer_than_the_cap_keeps_its_lines(tmp_path: Path) -> None:
    body = "".join(f"line {i:07d} of a file with old Mac endings\r" for i in range(40000))
    assert len(body) > MAX_LINE_CHARS
    path = write(tmp_path, "mac.log", body.encode())
    assert read_text(path) == body
    assert list(iter_lines(path)) == body.split("\r")[:-1]


def test_utf16_long_line_is_capped() -> None:
    # U+010A encodes as 0A 01: a byte scan for newlines would be fooled, the cap is not.
    data = ("\u010a" * (MAX_LINE_CHARS + 5) + "\nend\n").encode("utf-16")
    assert read_text(io.BytesIO(data)) == "\u010a" * MAX_LINE_CHARS + dropped_marker(5) + "\nend\n"


def test_iter_lines_memory_is_bounded(tmp_path: Path) -> None:
    size = 24 << 20  # 24 MiB single line
    path = tmp_path / "one-line.log"
    with path.open("wb") as out:
        for _ in range(size >> 20):
            out.write(b"z" * (1 << 20))
        out.write(b"\nend\n")
    tracemalloc.start()
    try:
        lengths = [len(line) for line in iter_lines(path)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lengths[1] == 3
    assert peak < 4 * MAX_LINE_CHARS  # independent of the 24 MiB line


def test_read_text_memory_about_twice_the_input(tmp_path: Path) -> None:
    size = 16 << 20
    path = write(tmp_path, "big.log", b"w" * size + b"\n")
    tracemalloc.start()
    try:
        text = read_text(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text.endswith(dropped_marker(size - MAX_LINE_CHARS) + "\n")
    assert peak < 2.3 * size


class _ReadOnly:
    """A file-like object with read() alone, as some callers hand in."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 1024 * 1024 + 17])
@pytest.mark.parametrize("kind", ["file", "bytesio", "read-only", "pipe"])
def test_every_byte_comes_through_after_the_sniffed_head(
    kind: str, size: int, tmp_path: Path
) -> None:
    """The head read to sniff the magic is replayed, then the rest is read straight into the
    caller's buffer where the stream has readinto, through read() where it does not."""
    data = bytes((i * 7 + i // 4096) % 251 for i in range(size))
    if kind == "file":
        path = tmp_path / "log"
        path.write_bytes(data)
        with open_source(str(path)) as stream:
            assert stream.read() == data
        return
    if kind == "pipe":
        r, w = os.pipe()
        with os.fdopen(w, "wb") as out:  # a pipe holds 64 KiB: write from a child thread
            import threading

            writer = threading.Thread(target=lambda: (out.write(data), out.close()))
            writer.start()
            with os.fdopen(r, "rb") as pipe, open_source(pipe) as stream:
                got = b"".join(iter(lambda: stream.read(1 << 16), b""))
            writer.join()
        assert got == data
        return
    source = io.BytesIO(data) if kind == "bytesio" else _ReadOnly(data)
    with open_source(source) as stream:  # type: ignore[arg-type]
        assert stream.read() == data
