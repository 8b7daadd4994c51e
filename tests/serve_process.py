"""A real ``diagnose serve`` on 127.0.0.1 for the tests that speak HTTP to it: start, stop."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


def start(*extra: str) -> subprocess.Popen[bytes]:
    """Start ``diagnose serve`` with ``extra`` options on a free port (``proc.port``) and wait
    until /healthz answers; fail the test if it exits or stays silent for 60 s."""
    port = free_port()
    args = [sys.executable, "-m", "diagnose", "serve", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [*args, *extra], stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"}
    )
    proc.port = port  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"server exited with {proc.returncode}: {err}")
        try:
            if _healthy(port):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("server did not answer /healthz within 60 s")


def stop(proc: subprocess.Popen[bytes]) -> str:
    """Stop the server; return what it wrote on stderr."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    return err
