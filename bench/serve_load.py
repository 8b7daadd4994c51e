"""Load-test ``diagnose serve`` with real dev-corpus logs, side by side with the library.

One run measures:

- the in-process baseline: ``diagnose_text`` on the corpus logs, one thread, for
  ``--seconds`` (what one core can do without HTTP);
- ``diagnose serve`` with ``--workers 1`` and with ``--workers N`` (``--max-workers``),
  each started on 127.0.0.1 and hit by ``--clients`` concurrent keep-alive clients that
  POST corpus logs round-robin for ``--seconds``: requests/s, p50/p99 latency, errors
  (anything but 200), and the server's RSS (all its processes) sampled every second —
  after warm-up vs. at the end, so a leak shows as growth;
- then the bad-input round: empty, 100 MB, binary, wrong type, slow client; each must get
  its 4xx and the server must still answer ``/healthz``.

Prints the ratios (server rps / in-process rps) and writes ``bench/results/serve.md``.
Needs ``../shared`` (the corpus) and the serve extra.  Bounded: about
``3 * seconds + 20`` s in all.

Usage: ``python bench/serve_load.py [--seconds 30] [--clients 32] [--max-workers 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "dev"
RESULTS = ROOT / "bench" / "results" / "serve.md"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_kib(pid: int) -> tuple[int, int]:
    """RSS of ``pid`` alone and of it with all its descendants (the diagnosis workers), in
    KiB, from /proc.  A worker killed at the time limit is replaced by a fresh one, so the
    total swings with replacements while the server process itself shows a leak plainly."""
    total = own = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    own = own or (int(line.split()[1]) if p == pid else 0)
            # A child is listed under the thread that started it, not only the main one.
            children = [
                c
                for task in Path(f"/proc/{p}/task").iterdir()
                for c in (task / "children").read_text().split()
            ]
        except OSError:
            continue
        todo.extend(int(c) for c in children)
    return own, total


def baseline(logs: list[str], seconds: float) -> float:
    """Logs per second that ``diagnose_text`` does in this process, one thread."""
    from diagnose.api import diagnose_text

    diagnose_text(logs[0])  # load the rule base outside the clock
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        diagnose_text(logs[done % len(logs)])
        done += 1
    return done / (time.perf_counter() - start)


def start_server(port: int, workers: int, *extra: str) -> subprocess.Popen[bytes]:
    """Start ``diagnose serve`` and wait until /healthz answers."""
    args = [sys.executable, "-m", "diagnose", "serve", "--port", str(port)]
    args += ["--workers", str(workers), "--read-timeout", "2", *extra]
    proc = subprocess.Popen(args, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("server did not start")


def load(port: int, pid: int, bodies: list[bytes], clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` keep-alive clients POST ``bodies`` round-robin for ``seconds``."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    statuses: dict[str, int] = {}
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        n = i
        while time.monotonic() < stop:
            body = bodies[n % len(bodies)]
            n += clients
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/diagnose", body, {"Content-Type": "text/plain"})
                resp = conn.getresponse()
                resp.read()
                ok, what = resp.status == 200, str(resp.status)
            except OSError as exc:
                ok, what = False, type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            latencies[i].append(time.perf_counter() - t0)
            errors[i] += 0 if ok else 1
            if not ok:
                statuses[what] = statuses.get(what, 0) + 1  # one key each: a racy add is harmless
        conn.close()

    rss: list[int] = []
    own: list[int] = []
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        server, total = _rss_kib(pid)
        own.append(server)
        rss.append(total)
        time.sleep(1)
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    lat = sorted(x for per in latencies for x in per)
    warm = rss[min(5, len(rss) - 1)]
    return {
        "requests": len(lat),
        "rps": len(lat) / wall,
        "p50_ms": 1000 * statistics.median(lat),
        "p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))],
        "errors": sum(errors),
        "rss_warm_mib": warm / 1024,
        "rss_end_mib": rss[-1] / 1024,
        "rss_growth_pct": 100 * (rss[-1] - warm) / warm if warm else 0.0,
        # Peaks of each third of the run: flat memory is a plateau (the last third's peak no
        # higher than the middle's), where one end sample can catch a worker being replaced.
        **{f"rss_peak{i}_mib": max(part) / 1024 for i, part in enumerate(_thirds(rss), 1)},
        **{f"server_peak{i}_mib": max(part) / 1024 for i, part in enumerate(_thirds(own), 1)},
        "failed": ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items())) or "none",
    }


def _mib(result: dict[str, Any], what: str = "rss") -> str:
    """The peaks of the three thirds of a run, as "a / b / c"."""
    return " / ".join(f"{result[f'{what}_peak{i}_mib']:.0f}" for i in (1, 2, 3))


def _thirds(samples: list[int]) -> list[list[int]]:
    """``samples`` in three consecutive parts (each non-empty when there are three)."""
    n = len(samples)
    cuts = [0, n // 3, 2 * n // 3, n]
    return [samples[a:b] or samples[-1:] for a, b in itertools.pairwise(cuts)]


# A traceback of ~0.9 MB: under the 1 MiB body limit, slower to diagnose than the attack
# round's --timeout, so each one is a time-limit bomb that must cost only its worker.
BOMB = (
    b"Traceback (most recent call last):\n"
    + b'  File "/srv/x.py", line 1, in f\n    g()\n' * 22000
    + b"RuntimeError: boom\n"
)


def attack(port: int, stop: float) -> tuple[dict[str, int], list[float]]:
    """Run a hostile mix until ``stop``: idle sockets, header drippers, bombs, oversized
    bodies; probe /healthz every 0.2 s.  Returns answers by kind and the probe latencies."""
    counts: dict[str, int] = {}
    probes: list[float] = []
    lock = threading.Lock()

    def count(kind: str) -> None:
        with lock:
            counts[kind] = counts.get(kind, 0) + 1

    def idle() -> None:
        socks: list[socket.socket] = []
        while time.monotonic() < stop:
            while len(socks) < 300:
                try:
                    socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                    count("idle sockets opened")
                except OSError:
                    break
            time.sleep(0.5)
            alive = []
            for sk in socks:
                sk.setblocking(False)
                try:
                    gone = sk.recv(1) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    sk.close()
                else:
                    alive.append(sk)
            socks = alive
        for sk in socks:
            sk.close()

    def drip() -> None:
        while time.monotonic() < stop:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sk:
                    for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                        if time.monotonic() > stop:
                            break
                        sk.sendall(bytes([byte]))
                        time.sleep(0.5)
            except OSError:
                count("drippers cut off")

    def post(body: bytes, kind: str, **headers: str) -> None:
        while time.monotonic() < stop:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("POST", "/diagnose", body, {"Content-Type": "text/plain", **headers})
                status = conn.getresponse().status
                conn.close()
                count(f"{kind}: {status}")
            except OSError as exc:
                count(f"{kind}: {type(exc).__name__}")
            time.sleep(0.5)

    def probe() -> None:
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/healthz")
                ok = conn.getresponse().status == 200
                conn.close()
            except OSError:
                ok = False
            probes.append(time.perf_counter() - t0 if ok else float("inf"))
            time.sleep(0.2)

    workers = [threading.Thread(target=idle), threading.Thread(target=probe)]
    workers += [threading.Thread(target=drip) for _ in range(4)]
    workers += [threading.Thread(target=post, args=(BOMB, "time-limit bombs")) for _ in range(2)]
    workers.append(threading.Thread(target=post, args=(b"x" * 2_000_000, "oversized bodies")))
    workers.append(
        threading.Thread(target=post, args=(b"RuntimeError: x", "bad charsets"),
                         kwargs={"Content-Type": "text/plain; charset=punycode"})
    )  # fmt: skip
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return counts, probes


def _raw(port: int, data: bytes) -> bytes:
    """Send raw bytes, return the status line (a short body stalls: the slow client)."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        with contextlib.suppress(OSError):  # the server may answer and close mid-send
            sock.sendall(data)
        try:
            return sock.recv(4096).split(b"\r\n", 1)[0]
        except OSError as exc:
            return f"({type(exc).__name__})".encode()


def bad_inputs(port: int) -> list[tuple[str, str, bool]]:
    """Each bad request, the status line it got, and whether /healthz still answers after."""
    head = b"POST /diagnose HTTP/1.1\r\nHost: b\r\n"
    cases = {
        "empty body": head + b"Content-Type: text/plain\r\nContent-Length: 0\r\n\r\n",
        "100 MB body": head
        + b"Content-Type: text/plain\r\nContent-Length: 104857600\r\n\r\n"
        + b"z" * 65536,
        "binary body": head
        + b"Content-Type: text/plain\r\nContent-Length: 8\r\n\r\n\x89PNG\0\0\0\0",
        "wrong content type": head + b"Content-Type: image/png\r\nContent-Length: 3\r\n\r\nabc",
        "slow client": head + b"Content-Type: text/plain\r\nContent-Length: 900\r\n\r\nRuntime",
    }
    out = []
    for name, data in cases.items():
        status = _raw(port, data).decode(errors="replace")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        out.append((name, status, conn.getresponse().status == 200))
    return out


def main() -> None:
    """Run the baseline, the load rounds and the bad-input round; print and write results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--max-workers", type=int, default=2)
    ap.add_argument(
        "--attack-seconds",
        type=float,
        default=None,
        help="length of the under-attack round (default: --seconds)",
    )
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="a folder of real *.log files")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where to write the markdown")
    args = ap.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"needs the dev corpus at {args.corpus}")
    paths = sorted(args.corpus.glob("*.log"))
    bodies = [p.read_bytes() for p in paths]
    logs = [b.decode("utf-8", errors="replace") for b in bodies]

    base = baseline(logs, min(args.seconds, 10.0))
    print(f"in-process diagnose_text: {base:.1f} logs/s (one thread)")
    rounds: list[tuple[int, dict[str, float]]] = []
    for workers in sorted({1, args.max_workers}):
        port = _free_port()
        proc = start_server(port, workers)
        try:
            result = load(port, proc.pid, bodies, args.clients, args.seconds)
            bad = bad_inputs(port) if workers == 1 else []
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        rounds.append((workers, result))
        print(
            f"serve --workers {workers}: {result['rps']:.1f} req/s "
            f"(x{result['rps'] / base:.2f} of in-process), p50 {result['p50_ms']:.0f} ms, "
            f"p99 {result['p99_ms']:.0f} ms, {result['errors']:.0f} errors of "
            f"{result['requests']:.0f}, RSS {result['rss_warm_mib']:.0f} -> "
            f"{result['rss_end_mib']:.0f} MiB ({result['rss_growth_pct']:+.1f}%)"
        )
        for name, status, alive in bad:
            print(f"  {name}: {status}; server up after: {alive}")
        if workers == 1:
            bad_rows = bad

    # The same clients with a hostile mix beside them (one server process, its diagnoses in
    # worker processes killed at --timeout 0.5; real logs take milliseconds).
    port = _free_port()
    proc = start_server(port, 1, "--timeout", "0.5", "--header-timeout", "2")
    try:
        box: dict[str, tuple[dict[str, int], list[float]]] = {}
        attack_seconds = args.attack_seconds or args.seconds
        stop = time.monotonic() + attack_seconds
        hostile = threading.Thread(target=lambda: box.update(a=attack(port, stop)))
        hostile.start()
        under = load(port, proc.pid, bodies, args.clients, attack_seconds)
        hostile.join()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    counts, probes = box["a"]
    worst = max(probes) if probes else float("inf")
    print(
        f"under attack: {under['rps']:.1f} req/s, p99 {under['p99_ms']:.0f} ms, "
        f"{under['errors']:.0f} errors of {under['requests']:.0f}; /healthz worst "
        f"{worst * 1000:.0f} ms over {len(probes)} probes; RSS {under['rss_warm_mib']:.0f} -> "
        f"{under['rss_end_mib']:.0f} MiB, peaks by third {_mib(under)} (server process "
        f"{_mib(under, 'server')}); failed: {under['failed']}; "
        f"attack answers: {dict(sorted(counts.items()))}"
    )

    lines = [
        "# `diagnose serve` under load",
        "",
        f"`python bench/serve_load.py --seconds {args.seconds:g} --clients {args.clients}"
        f" --max-workers {args.max_workers}"
        + (f" --attack-seconds {args.attack_seconds:g}" if args.attack_seconds else "")
        + f"` on {platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}; {len(bodies)} dev-corpus logs posted"
        " round-robin by keep-alive clients on 127.0.0.1 (the client threads share the cores).",
        "",
        f"In-process baseline (`diagnose_text`, one thread): **{base:.1f} logs/s**.",
        "",
        "| workers | req/s | x in-process | p50 ms | p99 ms | errors | RSS warm -> end MiB |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for workers, r in rounds:
        lines.append(
            f"| {workers} | {r['rps']:.1f} | {r['rps'] / base:.2f} | {r['p50_ms']:.0f} | "
            f"{r['p99_ms']:.0f} | {r['errors']:.0f}/{r['requests']:.0f} | "
            f"{r['rss_warm_mib']:.0f} -> {r['rss_end_mib']:.0f} ({r['rss_growth_pct']:+.1f}%) |"
        )
    lines += [
        "",
        "The clients run on the same cores as the server, so a second worker only helps with"
        " spare cores; memory is sampled each second and compared after warm-up (5 s) vs. end.",
        "",
        "Bad input (workers 1), each followed by `GET /healthz`:",
        "",
    ]
    lines += ["| request | answer | up after |", "|---|---|---|"]
    lines += [f"| {n} | `{s}` | {'yes' if a else 'NO'} |" for n, s, a in bad_rows]
    lines += [
        "",
        f"Under attack for {attack_seconds:g} s (workers 1, `--timeout 0.5 --header-timeout 2`):"
        f" the same {args.clients}"
        " clients while 300 idle sockets are held open, 4 clients drip header bytes every"
        " 0.5 s, 2 post ~0.9 MB time-limit bombs, 1 posts 2 MB bodies and 1 a punycode body,"
        " each every 0.5 s, and `/healthz` is probed every 0.2 s:",
        "",
        f"- real clients: {under['rps']:.1f} req/s, p50 {under['p50_ms']:.0f} ms, p99"
        f" {under['p99_ms']:.0f} ms, {under['errors']:.0f} errors of {under['requests']:.0f};"
        f" RSS {under['rss_warm_mib']:.0f} -> {under['rss_end_mib']:.0f} MiB"
        f" ({under['rss_growth_pct']:+.1f}%); peak RSS in each third of the run"
        f" {_mib(under)} MiB (the server process alone {_mib(under, 'server')} MiB; the rest"
        " is diagnosis workers, replaced whenever one is killed at the limit); requests not"
        f" answered 200: {under['failed']}",
        f"- `/healthz`: worst {worst * 1000:.0f} ms over {len(probes)} probes",
        "- attack answers: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
