"""``diagnose serve``: the real server on 127.0.0.1, spoken to over HTTP with the stdlib client.

One server process per module (small limits so the bad-input cases are quick): good
requests give the library's verdict; every kind of bad input gets a clear 4xx JSON
answer, and the server is still up afterwards.  Skips when the ``serve`` extra is absent.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="needs the serve extra (starlette)")
pytest.importorskip("uvicorn", reason="needs the serve extra (uvicorn)")

import serve_process

from diagnose.api import diagnose_text
from diagnose.serve import CHAT_LIMITS

MAX_BYTES = 64 * 1024
READ_TIMEOUT = 1.0

OOM_LOG = """\
[2026-05-04 08:15:00 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/srv/llm/engine/runner.py", line 412, in prefill
    hidden = self.layers[i](hidden)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total \
capacity of 93.00 GiB of which 2.10 GiB is free. Of the allocated memory 88.40 GiB is allocated \
by PyTorch, and 0.90 GiB is reserved by PyTorch but unallocated.
"""


def _start(*extra: str) -> subprocess.Popen[bytes]:
    """Start ``diagnose serve`` with the module's small limits and ``extra`` options."""
    return serve_process.start(
        "--max-bytes", str(MAX_BYTES), "--read-timeout", str(READ_TIMEOUT), *extra
    )


_stop = serve_process.stop
_free_port = serve_process.free_port


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int, subprocess.Popen[bytes]]]:
    """One server for the module's request tests; stopped after them."""
    proc = _start()
    yield "127.0.0.1", proc.port, proc  # type: ignore[attr-defined]
    _stop(proc)


def _call(
    host: str,
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


Server = tuple[str, int, "subprocess.Popen[bytes]"]


def post(server: Server, body: bytes, ctype: str | None = "text/plain", path: str = "/diagnose",
         **headers: str) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """POST ``body`` to the server with the given content type."""
    hdrs = dict(headers)
    if ctype is not None:
        hdrs["Content-Type"] = ctype
    return _call(server[0], server[1], "POST", path, body, hdrs)


def _error(status: int, body: bytes) -> str:
    data = json.loads(body)
    assert data["status"] == status
    return str(data["error"])


def _still_up(server: Server) -> None:
    assert server[2].poll() is None, "server process died"
    assert _call(server[0], server[1], "GET", "/healthz")[0] == 200


# --- good requests --------------------------------------------------------------------------


def test_healthz(server: Server) -> None:
    status, headers, body = _call(server[0], server[1], "GET", "/healthz")
    assert status == 200 and headers["content-type"] == "application/json"
    data = json.loads(body)
    assert data["status"] == "ok"
    assert data["kb_version"] == diagnose_text("").kb_version


def test_text_in_json_out_matches_the_library(server: Server) -> None:
    status, headers, body = post(server, OOM_LOG.encode())
    assert status == 200, body
    want = diagnose_text(OOM_LOG)
    got = json.loads(body)
    assert (got["cause"], got["fatal"]) == (want.cause, want.fatal) == ("cuda-oom", True)
    assert headers["x-diagnose-cause"] == "cuda-oom"
    assert got["source"] == "request"  # no client-chosen name reaches the report


def test_markdown_by_query_accept_and_json_field(server: Server) -> None:
    by_query = post(server, OOM_LOG.encode(), path="/diagnose?format=markdown")
    by_accept = post(server, OOM_LOG.encode(), Accept="text/markdown")
    by_field = post(server, json.dumps({"text": OOM_LOG, "format": "markdown"}).encode(),
                    "application/json")  # fmt: skip
    for status, headers, body in (by_query, by_accept, by_field):
        assert status == 200
        assert headers["content-type"].startswith("text/markdown")
        assert body.decode().startswith("**") and "cuda-oom" in body.decode()
    assert by_query[2] == by_accept[2] == by_field[2]


def _deep_traceback() -> bytes:
    """An OOM under ten frames with long vendored paths: a report longer than Slack allows."""
    deep = "/".join(f"pkg_level_{i:02d}_of_a_deeply_vendored_tree" for i in range(8))
    frames = "".join(
        f'  File "/opt/{deep}/mod_{i}.py", line {100 + i}, in step_{i}\n    self.step_{i + 1}()\n'
        for i in range(10)
    )
    oom = OOM_LOG.splitlines()[-1]
    return f"Traceback (most recent call last):\n{frames}{oom}\n".encode()


@pytest.mark.parametrize("chat", sorted(CHAT_LIMITS))
def test_markdown_fits_each_chat_client(server: Server, chat: str) -> None:
    """A report longer than Discord and Slack allow is cut to each chat client's limit."""
    log = _deep_traceback()
    status, _, full = post(server, log, path="/diagnose?format=markdown&chat=github")
    assert status == 200 and len(full.decode()) > CHAT_LIMITS["slack"]
    status, _, body = post(server, log, path=f"/diagnose?format=markdown&chat={chat}")
    assert status == 200
    text = body.decode()
    assert len(text) <= CHAT_LIMITS[chat]
    assert text.count("```") % 2 == 0, "a cut must not leave a code fence open"


def test_non_utf8_text_is_diagnosed(server: Server) -> None:
    """Latin-1 bytes in a log are text, not binary: replaced, not refused."""
    status, _, body = post(server, OOM_LOG.encode() + b"host caf\xe9 \xff\n")
    assert status == 200 and json.loads(body)["cause"] == "cuda-oom"


def test_requests_cannot_make_the_server_read_files(server: Server, tmp_path: Path) -> None:
    """A path in the body is only text; a JSON field naming a path is refused."""
    crash = tmp_path / "crash.log"
    crash.write_text(OOM_LOG)
    status, _, body = post(server, str(crash).encode())
    assert status == 200 and json.loads(body)["cause"] == "unknown"
    for extra in ({"path": str(crash)}, {"rules": str(tmp_path)}, {"verify": True}):
        status, _, body = post(server, json.dumps({"text": "x", **extra}).encode(),
                               "application/json")  # fmt: skip
        assert status == 400 and "unknown field" in _error(400, body)


# --- bad input: a clear 4xx, and the server stays up ----------------------------------------


@pytest.mark.parametrize("body", [b"", b"   \n\t\n"], ids=["empty", "blank"])
def test_empty_body_is_400(server: Server, body: bytes) -> None:
    status, _, answer = post(server, body)
    assert status == 400 and "empty" in _error(400, answer)
    _still_up(server)


@pytest.mark.parametrize(
    "ctype", ["application/x-www-form-urlencoded", "image/png", "multipart/form-data; b=x"]
)
def test_wrong_content_type_is_415(server: Server, ctype: str) -> None:
    status, _, answer = post(server, OOM_LOG.encode(), ctype)
    assert status == 415 and "text/plain" in _error(415, answer)
    _still_up(server)


@pytest.mark.parametrize("charset", ["punycode", "unicode_escape", "idna", "no-such-codec"])
def test_a_charset_that_is_not_a_text_encoding_is_415(server: Server, charset: str) -> None:
    status, _, answer = post(server, OOM_LOG.encode(), f"text/plain; charset={charset}")
    assert status == 415 and "charset" in _error(415, answer)
    _still_up(server)


def test_a_declared_text_charset_is_read(server: Server) -> None:
    status, _, answer = post(server, OOM_LOG.encode("utf-16"), "text/plain; charset=utf-16")
    assert status == 200 and json.loads(answer)["cause"] == "cuda-oom"


def test_lone_surrogates_in_a_json_body_are_answered(server: Server) -> None:
    body = json.dumps({"text": "\ud800 " + OOM_LOG}).encode()  # escaped as \\ud800
    status, _, answer = post(server, body, "application/json")
    assert status == 200 and json.loads(answer)["cause"] == "cuda-oom"


@pytest.mark.parametrize(
    "body",
    [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"\x1f\x8b\x08\x00" + bytes(range(256)), b"a\x00b"],
    ids=["png", "gzip", "nul"],
)
def test_binary_body_is_415(server: Server, body: bytes) -> None:
    status, _, answer = post(server, body)
    assert status == 415 and "binary" in _error(415, answer)
    _still_up(server)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be an object"),
        (b'{"text": 5}', '"text"'),
        (b'{"text": "x", "format": "yaml"}', "format must be"),
        (b'{"text": "x", "chat": "irc"}', "chat must be"),
        (b"[" * 50_000, "JSON"),
    ],
    ids=["syntax", "array", "text-type", "format", "chat", "deep"],
)
def test_bad_json_is_400(server: Server, body: bytes, fragment: str) -> None:
    status, _, answer = post(server, body, "application/json")
    assert status == 400 and fragment in _error(400, answer)
    _still_up(server)


def test_declared_100mb_body_is_413_before_it_is_read(server: Server) -> None:
    """An honest Content-Length over the limit is answered at once, without the body."""
    with socket.create_connection(server[:2], timeout=10) as sock:
        sock.sendall(
            b"POST /diagnose HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 104857600\r\n\r\n" + b"x" * 1024
        )
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 413 ")
    _still_up(server)


def test_streamed_100mb_body_is_413(server: Server) -> None:
    """A chunked upload with no length is cut off at the limit while it streams."""
    sock = socket.create_connection(server[:2], timeout=10)

    def send() -> None:
        block = b"%x\r\n%s\r\n" % (65536, b"y" * 65536)
        try:
            for _ in range(1600):  # 100 MiB
                sock.sendall(block)
        except OSError:
            pass  # the server answered and closed: what we want

    sock.sendall(b"POST /diagnose HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        head = sock.recv(4096)
    finally:
        sock.close()
        sender.join(timeout=10)
    assert head.startswith(b"HTTP/1.1 413 ")
    _still_up(server)


def test_slow_client_is_408(server: Server) -> None:
    """A client that stops sending mid-body is answered after the read timeout."""
    with socket.create_connection(server[:2], timeout=10) as sock:
        sock.sendall(b"POST /diagnose HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: 5000\r\n\r\nRuntimeError: par")  # fmt: skip
        start = time.monotonic()
        head = sock.recv(4096)
        waited = time.monotonic() - start
    assert head.startswith(b"HTTP/1.1 408 ")
    assert waited >= READ_TIMEOUT * 0.8  # it waited for the client, then gave up
    _still_up(server)


def test_wrong_method_and_route(server: Server) -> None:
    assert _call(server[0], server[1], "GET", "/diagnose")[0] == 405
    assert _call(server[0], server[1], "POST", "/etc/passwd", b"x")[0] == 404
    _still_up(server)


def test_cli_dispatch_keeps_diagnose_file(tmp_path: Path) -> None:
    """``diagnose serve --help`` reaches the chat CLI; ``diagnose FILE`` is unchanged."""
    helped = subprocess.run([sys.executable, "-m", "diagnose", "serve", "--help"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert helped.returncode == 0 and "--max-bytes" in helped.stdout
    log = tmp_path / "oom.log"
    log.write_text(OOM_LOG)
    ran = subprocess.run([sys.executable, "-m", "diagnose", str(log), "--format", "json"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ran.returncode == 1 and json.loads(ran.stdout)["cause"] == "cuda-oom"


def test_bad_rule_dir_fails_at_start(tmp_path: Path) -> None:
    """A broken --rules directory stops the server before it binds, in one line, exit 2."""
    bad = tmp_path / "rules" / "cuda-oom"
    bad.mkdir(parents=True)
    (bad / "broken.toml").write_text('id = "cuda-oom/broken"\ncause = \n')
    ran = subprocess.run(
        [sys.executable, "-m", "diagnose", "serve", "--port", str(_free_port()),
         "--rules", str(tmp_path / "rules")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 2
    assert ran.stderr.startswith("diagnose: ") and "broken.toml" in ran.stderr


HEADER_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[str, int, subprocess.Popen[bytes]]]:
    """A server with a short header deadline and a small connection cap."""
    proc = _start("--header-timeout", str(HEADER_TIMEOUT), "--max-connections", "8")
    yield "127.0.0.1", proc.port, proc  # type: ignore[attr-defined]
    _stop(proc)


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock`` (recv gives b""), or None if it did not."""
    sock.settimeout(seconds)
    start = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def test_a_silent_connection_is_closed_at_the_header_deadline(guarded: Server) -> None:
    with socket.create_connection(guarded[:2], timeout=10) as sock:
        took = _closed_within(sock, HEADER_TIMEOUT * 5)
    assert took is not None and took < HEADER_TIMEOUT * 5
    _still_up(guarded)


def test_headers_dripped_a_byte_at_a_time_are_cut_off(guarded: Server) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 200
    with socket.create_connection(guarded[:2], timeout=10) as sock:
        start = time.monotonic()
        closed = False
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if _closed_within(sock, 0.05) is not None:
                closed = True
                break
        took = time.monotonic() - start
    assert closed and took < HEADER_TIMEOUT * 5
    _still_up(guarded)


def test_past_the_connection_cap_the_oldest_idle_socket_makes_room(guarded: Server) -> None:
    idle = [socket.create_connection(guarded[:2], timeout=10) for _ in range(8)]
    try:
        time.sleep(0.1)  # all eight are accepted before the next one comes
        # A real request over the cap gets through at once: the oldest idle socket goes.
        start = time.monotonic()
        status = _call(guarded[0], guarded[1], "GET", "/healthz")[0]
        assert status == 200 and time.monotonic() - start < HEADER_TIMEOUT
        assert _closed_within(idle[0], HEADER_TIMEOUT * 0.5) is not None
    finally:
        for sock in idle:
            sock.close()


def test_refusals_are_logged_once_per_interval_with_a_count() -> None:
    from diagnose.serve_guard import RefusalLog

    log = RefusalLog(interval_s=3600)
    for _ in range(1000):
        log.refused("header timeout", "headers not received within 1 s")
    assert log.counts == {"header timeout": 1000}
    assert log._unlogged == {"header timeout": 999}  # one line written, 999 folded into it


def test_malloc_arenas_capped_unless_the_operator_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server caps glibc's arenas for itself and the processes it starts (they read the
    # variable at start-up); a value already in the environment is the operator's and stays.
    from diagnose.serve import cap_malloc_arenas

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    cap_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "2"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "6")
    cap_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "6"
