"""Fuzz campaign over every way input reaches crashkb; a fixed-seed slice runs in CI.

Each input is generated from ``(seed, index)`` alone, so any failure is replayed with
``--replay INDEX``.  Families (what an attacker or a damaged paste would send):

- ``mutated``: a real log (the dev corpus when ``../shared`` is beside the checkout,
  else the project's own examples and rule examples) with 1-4 mutations: ANSI
  colour, CRLF / CR-only line ends, chat fences and quote marks, hard wrapping, a cut
  tail, byte flips, junk bytes, NULs, lone surrogates, duplicated blocks, a splice of
  two logs, a hostile mangled frame, a warning flood.
- ``mangled``: mangled names drawn from the Itanium grammar's tokens with back
  references (``S_``, ``T_``) that explode when expanded, plain and inside frame lines.
- ``bytes``: random bytes, ELF / zip / gzip headers over junk.
- ``encoded``: a log in UTF-16 (with and without BOM), UTF-32, Latin-1, UTF-8 with BOM.
- ``compressed``: a log as gzip / xz / bz2 / zstd, whole, cut short, or with bytes
  flipped (a decompression bomb of zeros is one of them).
- ``rule``: a shipped rule file with mutated TOML, loaded from a temporary rules dir.
- ``http``: a POST to the server's ASGI app with a random charset, content type, JSON
  shape and body (no socket: the app is called directly).

Targets: :func:`diagnose.diagnose_text`, the readers (``read_text`` / ``iter_lines`` and
``diagnose_file`` on a byte stream), :func:`diagnose.demangle`, :func:`diagnose.parse_name`,
rule loading and the server.  Each input must: raise nothing but the documented
errors (:class:`InputError`, :class:`RuleFileError`, an HTTP 4xx/503), finish in
``--max-seconds`` (2 s), keep the worker's peak RSS under ``--max-rss-mb`` (300 MB),
and point every evidence line inside the input.

Usage::

    python bench/fuzz.py --inputs 1000000 --workers 2 --save bench/results/fuzz.json
    python bench/fuzz.py --replay 123456 --seed 1     # print and re-run one input

Results (counts per family, slowest input per target, peak RSS, failures with their
index) go to ``--save`` and to a markdown summary beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import bz2
import contextlib
import gzip
import io
import json
import lzma
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# A host without ../shared beside the checkout (the lent GPU machine) names a copy.
CORPUS = Path(os.environ.get("CRASHKB_FUZZ_CORPUS", ROOT.parent / "shared" / "corpus" / "dev"))
#: Share of inputs per family; a family's cost decides its weight, not its importance:
#: the cheap name targets get many inputs, the server and rule loading few.
FAMILIES: dict[str, float] = {
    "mutated": 0.34,
    "mangled": 0.30,
    "bytes": 0.08,
    "encoded": 0.08,
    "compressed": 0.08,
    "rule": 0.06,
    "http": 0.06,
}
MAX_INPUT = 1 << 20  # the bound: every input of <= 1 MiB


# ---------------------------------------------------------------- seeds


def _rule_examples() -> list[str]:
    """Every rule's match examples: our own text, present in every checkout."""
    import tomllib

    out: list[str] = []
    for path in sorted((ROOT / "rules").rglob("*.toml")):
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for ex in doc.get("examples", []):
            if isinstance(ex, dict) and isinstance(ex.get("log"), str):
                out.append(ex["log"])
    return out


def seed_logs() -> list[str]:
    """The logs mutations start from: the dev corpus when present, plus our own texts."""
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(CORPUS.glob("*.log"))]
    logs += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "diagnose/examples").glob("*"))]
    logs += _rule_examples()
    return [log for log in logs if log.strip()]


def rule_files() -> list[Path]:
    return sorted(p for p in (ROOT / "rules").rglob("*.toml") if not p.name.startswith("_"))


# ---------------------------------------------------------------- generators

_MANGLED_TOKENS = [
    "N", "E", "I", "E", "S_", "S0_", "S1_", "S2_", "T_", "T0_", "T1_", "St", "Sa", "Sb", "Ss",
    "3foo", "4cute", "7cutlass", "1a", "i", "f", "v", "Dv4_f", "P", "R", "O", "K", "V",
    "Li1E", "Lb0E", "Dp", "DT", "fp_", "fp0_", "Z", "sr", "cl", "St6vector", "NS_", "J", "IJ",
    "Dn", "Tu", "Ut_", "Ul", "Ui", "UlvE_", "F", "M", "A12_", "Sr", "L_Z", "12_GLOBAL__N_1",
    "C1", "D2", "cv", "qu", "plI", "dtS_", "ptS0_", "tw", "sZ", "sp",
]  # fmt: skip


def _mangled(rng: random.Random) -> str:
    if rng.random() < 0.3:
        # "Billion laughs": each level names the previous one twice.
        depth = rng.randint(4, 40)
        inner = "1a"
        body = ""
        for level in range(depth):
            body = (
                f"St4pairI{'S_' if level else inner}{'S' + str(level) + '_' if level else inner}E"
            )
        return "_Z1fI" + body * rng.randint(1, 6) + "Ev"
    n = rng.randint(1, 300 if rng.random() < 0.9 else 3000)
    return "_Z" + "".join(rng.choice(_MANGLED_TOKENS) for _ in range(n))


def _frame_line(rng: random.Random, name: str) -> str:
    style = rng.randrange(4)
    if style == 0:
        return f"{rng.randint(0, 99)}       0x{rng.getrandbits(48):x} {name}"
    if style == 1:
        return f"#{rng.randint(0, 99)} 0x{rng.getrandbits(48):012x} in {name} () from /lib/x.so"
    if style == 2:
        where = rng.getrandbits(48)
        return f"/usr/lib/libx.so({name}+0x{rng.getrandbits(16):x}) [0x{where:x}]"
    where = rng.getrandbits(48)
    offset = rng.randint(0, 999)
    return f"  frame #{rng.randint(0, 40)}: {name} + {offset} (0x{where:x} in libtorch.so)"


_ANSI = [
    "\x1b[31m",
    "\x1b[0m",
    "\x1b[1;33m",
    "\x1b[2K",
    "\x1b]0;title\x07",
    "\x1b[38;5;196m",
    "\x1b[",
]
_FLOOD = [
    "WARNING 01-02 10:00:00 scheduler.py:1 Sequence group 7 is preempted by "
    "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.",
    "node0:1:1 [0] NCCL WARN Cuda failure 'out of memory' (retrying)",
    "[2026-01-02 10:00:00] Cache flush skipped: no error",
]


def _mutate(rng: random.Random, text: str, logs: list[str]) -> str:
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(14)
        lines = text.split("\n")
        if op == 0:  # colour
            i = rng.randrange(len(lines))
            lines[i] = rng.choice(_ANSI) + lines[i] + rng.choice(_ANSI)
            text = "\n".join(lines)
        elif op == 1:
            text = text.replace("\n", rng.choice(["\r\n", "\r", "\n\n", "\r\r\n"]))
        elif op == 2:  # chat paste
            text = (
                rng.choice(["```\n", "```text\n", "> ", "<details>\n\n```\n"])
                + text.replace("\n", rng.choice(["\n", "\n> ", "\n    "]))
                + rng.choice(["\n```", "", "\n```\n</details>"])
            )
        elif op == 3:  # hard wrap
            width = rng.randint(20, 200)
            text = "\n".join(
                line[i : i + width] for line in lines for i in range(0, max(len(line), 1), width)
            )
        elif op == 4:  # cut
            text = text[: rng.randint(0, len(text))]
        elif op == 5 and text:  # flip characters
            chars = list(text)
            for _ in range(rng.randint(1, 20)):
                chars[rng.randrange(len(chars))] = chr(
                    rng.randrange(0x110000) if rng.random() < 0.3 else rng.randrange(128)
                )
            text = "".join(chars)
        elif op == 6:  # junk
            i = rng.randint(0, len(text))
            junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200))).decode("latin-1")
            text = text[:i] + junk + text[i:]
        elif op == 7:  # NULs and lone surrogates
            i = rng.randint(0, len(text))
            text = (
                text[:i]
                + rng.choice(["\x00" * rng.randint(1, 5000), "\ud800", "\udfff\ud83d", "\ufeff"])
                + text[i:]
            )
        elif op == 8:  # duplicated block
            a = rng.randrange(len(lines))
            b = min(len(lines), a + rng.randint(1, 30))
            block = sum(len(x) + 1 for x in lines[a:b]) or 1
            lines[b:b] = lines[a:b] * max(1, min(rng.randint(1, 50), MAX_INPUT // block))
            text = "\n".join(lines)
        elif op == 9:  # splice two logs
            other = rng.choice(logs)
            text = text[: rng.randint(0, len(text))] + other[rng.randint(0, len(other)) :]
        elif op == 10:  # hostile frame
            i = rng.randrange(len(lines))
            lines.insert(i, _frame_line(rng, _mangled(rng)))
            text = "\n".join(lines)
        elif op == 11:  # warning flood
            i = rng.randrange(len(lines))
            lines[i:i] = [rng.choice(_FLOOD)] * rng.randint(10, 3000)
            text = "\n".join(lines)
        elif op == 12:  # one enormous line
            i = rng.randrange(len(lines))
            lines[i] = lines[i] * max(
                1, min(rng.randint(1, 400), MAX_INPUT // (len(lines[i]) or 1))
            )
            text = "\n".join(lines)
        else:  # unicode whitespace and line separators
            text = text.replace(
                " ", rng.choice(["\u00a0", "\t", "\u2028", " "]), rng.randint(1, 50)
            )
        # Each step stays within the input bound: repeated growth once built a 17 GB string
        # in the generator, which hid the product's own memory from the per-input check.
        text = text[:MAX_INPUT]
    return text


def _compress(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        blob = gzip.compress(data)
    elif kind == 1:
        blob = lzma.compress(data)
    elif kind == 2:
        blob = bz2.compress(data)
    else:
        import zstandard

        blob = zstandard.ZstdCompressor().compress(data)
    damage = rng.randrange(4)
    if damage == 1:
        blob = blob[: rng.randint(0, len(blob))]
    elif damage == 2 and blob:
        b = bytearray(blob)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.getrandbits(8)
        blob = bytes(b)
    return blob


@dataclass(frozen=True)
class Case:
    """One generated input: its family, the target it goes to and the payload."""

    index: int
    family: str
    target: str
    payload: Any
    extra: dict[str, Any] = field(default_factory=dict)


def _family(rng: random.Random) -> str:
    x = rng.random()
    for name, share in FAMILIES.items():
        if x < share:
            return name
        x -= share
    return "mutated"


def generate(seed: int, index: int, logs: list[str], rules: list[Path]) -> Case:
    """The input number ``index`` of campaign ``seed`` (pure: same arguments, same case)."""
    rng = random.Random(seed * 1_000_003 + index)
    family = _family(rng)
    if family == "mutated":
        text = _mutate(rng, rng.choice(logs), logs)
        return Case(index, family, "diagnose_text", text)
    if family == "mangled":
        name = _mangled(rng)
        target = rng.choice(["demangle", "parse_name", "diagnose_text"])
        if target == "diagnose_text":
            frames = "\n".join(_frame_line(rng, _mangled(rng)) for _ in range(rng.randint(1, 50)))
            return Case(index, family, target, "RuntimeError: boom\n" + frames)
        if target == "parse_name" and rng.random() < 0.5:
            from diagnose.frames.demangle import demangle

            name = demangle(name)
        return Case(index, family, target, name)
    if family == "bytes":
        n = rng.randint(0, 1 << rng.randint(4, 16))
        head = rng.choice(
            [
                b"",
                b"\x7fELF\x02\x01\x01",
                b"PK\x03\x04",
                b"\x1f\x8b\x08",
                b"\xfd7zXZ\x00",
                b"BZh91AY&SY",
                b"\x28\xb5\x2f\xfd",
            ]
        )
        return Case(index, family, "reader", head + rng.randbytes(n))
    if family == "encoded":
        text = rng.choice(logs)[: MAX_INPUT // 4]
        codec = rng.choice(
            ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "utf-8-sig", "cp1252"]
        )
        return Case(index, family, "reader", text.encode(codec, errors="replace"), {"codec": codec})
    if family == "compressed":
        if rng.random() < 0.05:
            data = b"\x00" * (rng.randint(1, 64) << 20)  # a bomb: small on disk, large inside
        else:
            data = _mutate(rng, rng.choice(logs), logs).encode("utf-8", "surrogatepass")
        return Case(index, family, "reader", _compress(rng, data))
    if family == "rule":
        path = rng.choice(rules)
        text = path.read_text(encoding="utf-8")
        chars = list(text)
        for _ in range(rng.randint(1, 6)):
            op = rng.randrange(4)
            i = rng.randrange(len(chars))
            if op == 0:
                del chars[i : i + rng.randint(1, 40)]
            elif op == 1:
                chars.insert(
                    i,
                    rng.choice(
                        ['"', "'", "[", "]", "=", "\n", "(?i)", "(a+)+$", "{", "\\", "\x00", "ä"]
                    ),
                )
            elif op == 2:
                chars[i : i + 1] = list(
                    rng.choice(["true", "1e400", "-1", '""', "[[examples.match]]", "(((("])
                )
            else:
                chars[i] = chr(rng.randrange(32, 127))
        return Case(
            index, family, "rule", "".join(chars), {"rel": str(path.relative_to(ROOT / "rules"))}
        )
    # http
    body_text = _mutate(rng, rng.choice(logs), logs)
    mime = rng.choice(
        [
            "text/plain",
            "application/json",
            "text/markdown",
            "application/x-www-form-urlencoded",
            "",
            "image/png",
        ]
    )
    charset = rng.choice(
        [
            "",
            "; charset=utf-8",
            "; charset=punycode",
            "; charset=utf-16",
            "; charset=idna",
            "; charset=unicode_escape",
            "; charset=nope",
            "; charset=latin-1",
            "; charset=utf-32",
        ]
    )
    if mime == "application/json":
        shape = rng.randrange(4)
        if shape == 0:
            body_text = json.dumps(
                {"text": body_text, "format": rng.choice(["json", "markdown", "x"])}
            )
        elif shape == 1:
            body_text = json.dumps({"log": [1, 2], "chat": "slack"})
        elif shape == 2:
            body_text = json.dumps(body_text)
        else:
            body_text = '{"text": "\\ud800 ' + body_text[:100].replace('"', "") + '"}'
    codec = charset.partition("=")[2] or "utf-8"
    try:
        body = body_text.encode(codec, errors="surrogatepass")
    except (LookupError, UnicodeError):
        body = body_text.encode("utf-8", errors="surrogatepass")
    query = rng.choice(["", "format=markdown", "chat=slack", "chat=bogus", "format=yaml"])
    return Case(index, family, "http", body, {"content_type": mime + charset, "query": query})


# ---------------------------------------------------------------- targets


def _lines_in(text: str) -> int:
    return len(re.split(r"\r\n|\r|\n", text)) if text else 1


def _check_evidence(d: Any, lines: int) -> None:
    if d.total_lines > lines + 1:
        raise AssertionError(f"total_lines {d.total_lines} > {lines} lines in the input")
    for finding in d.findings:
        for ev in finding.evidence:
            if not 0 <= ev.line <= lines:
                raise AssertionError(
                    f"evidence line {ev.line} outside 1..{lines}: {ev.text[:80]!r}"
                )
    d.to_dict()


class Runner:
    """Runs cases in this process; built once per worker (the server app, temp dirs)."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="crashkb-fuzz-"))
        self._app: Any = None

    def warm(self) -> None:
        """Load the rule base and the kb once, before any input is timed: the bound is an
        input's own cost, and a child that runs one input (a replay, a chunk split around a
        hang) would otherwise charge it the process's start-up, seconds when the rule
        snapshot is rebuilt after a rule changed (seed 1 #23938 read 2.25 CPU s so, 0.24 s
        warm)."""
        from diagnose import diagnose_text

        diagnose_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")

    def close(self) -> None:
        if self._app is not None:
            asyncio.run(_lifespan(self._app))  # stops the server's diagnosis workers
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, case: Case) -> None:
        getattr(self, "_" + case.target)(case)

    def _diagnose_text(self, case: Case) -> None:
        from diagnose import diagnose_text

        _check_evidence(diagnose_text(case.payload), _lines_in(case.payload))

    def _demangle(self, case: Case) -> None:
        from diagnose import demangle

        out = demangle(case.payload)
        assert isinstance(out, str)

    def _parse_name(self, case: Case) -> None:
        from diagnose import parse_name

        parse_name(case.payload)

    def _reader(self, case: Case) -> None:
        from diagnose import diagnose_file
        from diagnose.errors import InputError
        from diagnose.ingest.read import iter_lines, read_text

        data: bytes = case.payload
        try:
            text = read_text(io.BytesIO(data), limit=8 << 20)
            streamed = sum(1 for _ in iter_lines(io.BytesIO(data)))
            d = diagnose_file(io.BytesIO(data))
        except InputError:
            return
        # read_text stops at its 8 MiB limit; a bomb expands past it and diagnose_file reads
        # on (to its own bound), so the input's line count is the stream's when that is more.
        _check_evidence(d, max(_lines_in(text), streamed) + 2)

    def _rule(self, case: Case) -> None:
        from diagnose.errors import RuleFileError
        from diagnose.rules.loader import check_rules

        root = self.tmp / f"rules-{case.index}"
        target = root / case.extra["rel"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(case.payload, encoding="utf-8", errors="surrogatepass")
        try:
            _, errors, _ = check_rules([root], include_default=False)
            for err in errors:
                assert isinstance(err, RuleFileError) and str(err)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _http(self, case: Case) -> None:
        if self._app is None:
            from diagnose.serve import ServeConfig, create_app

            self._app = create_app(ServeConfig(concurrency=1, queue=4, timeout_s=5.0))
        status, body = asyncio.run(
            _post(self._app, case.payload, case.extra["content_type"], case.extra["query"])
        )
        if status not in {200, 400, 408, 413, 415, 503}:
            raise AssertionError(f"HTTP {status}: {body[:200]!r}")


async def _lifespan(app: Any) -> None:
    """Run the app's start-up and shut-down, as a server does around its life."""
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        return None

    await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)


async def _post(app: Any, body: bytes, content_type: str, query: str) -> tuple[int, bytes]:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/diagnose", "raw_path": b"/diagnose", "root_path": "",
        "query_string": query.encode(), "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        "headers": [(b"content-type", content_type.encode("latin-1")),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    sent = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    answer: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            answer.append(message.get("body", b""))

    await app(scope, receive, send)
    return (status[0] if status else 0), b"".join(answer)


# ---------------------------------------------------------------- campaign


class _Hung(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hung


def _rss_mb() -> float:
    """Peak resident memory (MB) since the last :func:`_reset_peak`: Linux's VmHWM, which
    ``/proc/self/clear_refs`` resets, so each input's peak is its own; else the process's."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


@dataclass
class Tally:
    """What one worker saw: counts, the slowest input per target, failures."""

    counts: dict[str, int] = field(default_factory=dict)
    slowest: dict[str, tuple[float, int]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    seconds: float = 0.0

    def merge(self, other: Tally) -> None:
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        for k, (s, i) in other.slowest.items():
            if s > self.slowest.get(k, (0.0, -1))[0]:
                self.slowest[k] = (s, i)
        self.failures += other.failures
        self.peak_rss_mb = max(self.peak_rss_mb, other.peak_rss_mb)
        self.seconds += other.seconds


def run_range(
    seed: int,
    start: int,
    stop: int,
    max_seconds: float,
    max_rss_mb: float,
    progress: Path | None = None,
) -> Tally:
    """Run inputs ``start..stop`` of campaign ``seed`` in this process; ``progress`` gets
    the index of the input under way (for :func:`run_chunk`'s watchdog)."""
    logs, rules = seed_logs(), rule_files()
    runner = Runner()
    runner.warm()
    tally = Tally()
    signal.signal(signal.SIGALRM, _alarm)
    began = time.perf_counter()
    try:
        for index in range(start, stop):
            if progress is not None:
                progress.write_text(str(index))
            if os.environ.get("CRASHKB_FUZZ_HANG_AT") == str(index):
                time.sleep(3600)  # the watchdog's test: a hang no Python signal can end
            case = generate(seed, index, logs, rules)
            key = f"{case.family}/{case.target}"
            tally.counts[key] = tally.counts.get(key, 0) + 1
            _reset_peak()  # the input's own peak, not the generator's or an earlier input's
            rss_before = 0.0
            # CPU seconds, not wall: the bound is the input's cost, and a campaign shares
            # its cores (wall time doubled under a concurrent build and read as failures).
            t0 = time.process_time()
            error = ""
            signal.alarm(int(max_seconds * 10) + 1)  # a hard stop far past the bound
            try:
                runner.run(case)
            except _Hung:
                error = "hung (killed by alarm)"
            except Exception as exc:  # the harness exists to catch these
                error = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                signal.alarm(0)
            took = time.process_time() - t0
            if took > tally.slowest.get(case.target, (0.0, -1))[0]:
                tally.slowest[case.target] = (took, index)
            rss = _rss_mb()
            tally.peak_rss_mb = max(tally.peak_rss_mb, rss)
            if not error and took > max_seconds:
                error = f"took {took:.2f} CPU s (bound {max_seconds} s)"
            if not error and rss > max_rss_mb and rss_before <= max_rss_mb:
                error = f"peak RSS {rss:.0f} MB (bound {max_rss_mb} MB)"
            if error:
                tally.failures.append(
                    {"index": index, "family": case.family, "target": case.target, "error": error}
                )
    finally:
        runner.close()
    tally.peak_rss_mb = max(tally.peak_rss_mb, _rss_mb())
    tally.seconds = time.perf_counter() - began
    return tally


def _tally_json(tally: Tally) -> str:
    return json.dumps(
        {
            "counts": tally.counts,
            "slowest": {k: list(v) for k, v in tally.slowest.items()},
            "failures": tally.failures,
            "peak_rss_mb": tally.peak_rss_mb,
            "seconds": tally.seconds,
        }
    )


def _tally_of(text: str) -> Tally:
    data = json.loads(text)
    return Tally(
        data["counts"],
        {k: (float(v[0]), int(v[1])) for k, v in data["slowest"].items()},
        data["failures"],
        data["peak_rss_mb"],
        data["seconds"],
    )


def _watch(child: subprocess.Popen[bytes], progress: Path, limit: float) -> bytes:
    """Wait for ``child``'s output; raise ``TimeoutExpired`` once the input under way (the
    index in ``progress``, rewritten as each input starts) has run ``limit`` seconds."""
    started, seen = time.monotonic(), ""
    while True:
        try:
            out, _ = child.communicate(timeout=1.0)
            return out
        except subprocess.TimeoutExpired:
            pass
        now = progress.read_text() if progress.exists() else ""
        if now != seen:
            started, seen = time.monotonic(), now
        elif time.monotonic() - started > limit:
            raise subprocess.TimeoutExpired(child.args, limit)


def run_chunk(
    seed: int,
    start: int,
    stop: int,
    max_seconds: float,
    max_rss_mb: float,
    limit: float,
    stderr: Path | None = None,
) -> Tally:
    """Inputs ``start..stop`` in a child process, killed (with its process group) when one
    input has been under way for ``limit`` seconds: a loop in C code (a demangler, a regex
    engine) cannot be interrupted from Python, so only a watchdog outside the process
    catches it. The input it hung on is a failure; the chunk goes on in a fresh child after it.

    ``stderr``: a file the children's standard error goes to (discarded by default).

    The clock is the input's, not the chunk's (the progress file is rewritten as each input
    starts): on a machine loaded 12-fold a healthy 500-input chunk ran past a 180 s chunk
    limit and its last input was named hung (seed 4, #939499; 0.2 s when replayed)."""
    total = Tally()
    ranges = [(start, stop)]
    with (
        tempfile.TemporaryDirectory(prefix="crashkb-fuzz-chunk-") as tmp,
        open(stderr or os.devnull, "ab") as errors,
    ):
        progress = Path(tmp) / "at"
        while ranges:
            lo, hi = ranges.pop(0)
            if lo >= hi:
                continue
            progress.unlink(missing_ok=True)
            cmd = [
                sys.executable, str(Path(__file__).resolve()), "--seed", str(seed),
                "--range", str(lo), str(hi), "--progress", str(progress),
                "--max-seconds", str(max_seconds), "--max-rss-mb", str(max_rss_mb),
            ]  # fmt: skip
            child = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=errors, start_new_session=True
            )
            try:
                out = _watch(child, progress, limit)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.communicate()
                text = progress.read_text() if progress.exists() else ""
                at = int(text) if text.isdigit() else lo
                case = generate(seed, at, seed_logs(), rule_files())
                total.merge(Tally(counts={f"{case.family}/{case.target}": 1}))
                total.failures.append(
                    {
                        "index": at,
                        "family": case.family,
                        "target": case.target,
                        "error": f"hung: one input under way for {limit:.0f} s",
                    }
                )
                # The inputs before it ran in the killed child unreported: run them again.
                ranges[:0] = [(lo, at), (at + 1, hi)]
                continue
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)  # stray server or demangle workers
            if child.returncode != 0 or not out.strip():
                died = f"chunk died (exit {child.returncode})"
                total.failures.append({"index": lo, "family": "-", "target": "-", "error": died})
                continue
            total.merge(_tally_of(out.decode()))
    return total


def campaign(
    seed: int,
    inputs: int,
    workers: int,
    max_seconds: float,
    max_rss_mb: float,
    chunk: int = 500,
    seconds: float = 0.0,
    journal: Path | None = None,
    chunk_limit: float = 60.0,
    first: int = 0,
) -> Tally:
    """Run ``inputs`` inputs in chunks of ``chunk``, ``workers`` child processes at a time,
    each chunk in a fresh process under a watchdog (:func:`run_chunk`).

    A fresh process per chunk keeps one input's peak RSS from hiding the next ones'.
    ``seconds`` > 0 stops starting chunks after that long (the count says how many ran);
    ``journal`` gets one JSON line per finished chunk (its counts and failures);
    ``first`` is the first index, so one campaign can be run in parts (``--merge``).
    """
    from concurrent.futures import ThreadPoolExecutor

    began = time.perf_counter()
    starts = list(range(first, first + inputs, chunk))
    total = Tally()

    def one(start: int) -> Tally | None:
        if seconds and time.perf_counter() - began > seconds:
            return None
        return run_chunk(
            seed, start, min(start + chunk, first + inputs), max_seconds, max_rss_mb, chunk_limit
        )

    with ThreadPoolExecutor(workers) as pool:
        for done, part in enumerate(pool.map(one, starts), 1):
            if part is None:
                continue
            total.merge(part)
            if journal is not None:  # a campaign stopped early keeps what it found
                with journal.open("a", encoding="utf-8") as out:
                    out.write(_tally_json(part) + "\n")
            if done % max(1, len(starts) // 50) == 0:
                print(
                    f"  {sum(total.counts.values()):,} inputs, {len(total.failures)} failures",
                    file=sys.stderr,
                    flush=True,
                )
    return total


def _summary(seed: int, tally: Tally, wall: float) -> dict[str, Any]:
    return {
        "seed": seed,
        "inputs": sum(tally.counts.values()),
        "wall_s": round(wall, 1),
        "cpu_s": round(tally.seconds, 1),
        "by_family_target": dict(sorted(tally.counts.items())),
        "slowest_s": {
            k: {"seconds": round(s, 3), "index": i} for k, (s, i) in sorted(tally.slowest.items())
        },
        "peak_rss_mb": round(tally.peak_rss_mb, 1),
        "failures": tally.failures[:200],
        "failure_count": len(tally.failures),
        "python": sys.version.split()[0],
    }


def _merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary from the saved summaries of a campaign's parts (same seed)."""
    if len({p["seed"] for p in parts}) != 1:
        raise SystemExit("--merge: the parts come from different seeds")
    tally = Tally()
    for p in parts:
        slowest = {k: (v["seconds"], v["index"]) for k, v in p["slowest_s"].items()}
        tally.merge(
            Tally(
                dict(p["by_family_target"]),
                slowest,
                list(p["failures"]),
                p["peak_rss_mb"],
                p["cpu_s"],
            )
        )
    result = _summary(parts[0]["seed"], tally, sum(p["wall_s"] for p in parts))
    result["failure_count"] = sum(p["failure_count"] for p in parts)
    result["parts"] = len(parts)
    return result


def _markdown(result: dict[str, Any]) -> str:
    rows = "\n".join(f"| {k} | {v:,} |" for k, v in result["by_family_target"].items())
    slow = "\n".join(
        f"| {k} | {v['seconds']:.3f} | {v['index']} |" for k, v in result["slowest_s"].items()
    )
    fails = (
        "\n".join(
            f"- #{f['index']} {f['family']}/{f['target']}: {f['error']}"
            for f in result["failures"][:30]
        )
        or "- none"
    )
    return (
        f"# Fuzz campaign (seed {result['seed']})\n\n"
        f"{result['inputs']:,} inputs in {result['wall_s']} s wall "
        f"({result['cpu_s']} s in workers), "
        f"Python {result['python']}; peak RSS of any input {result['peak_rss_mb']} MB; "
        f"**{result['failure_count']} failures**.\n\n"
        "Command: `python bench/fuzz.py --inputs N --seed S --workers W "
        "--save bench/results/fuzz.json`\n\n"
        "| family/target | inputs |\n|---|---:|\n" + rows + "\n\n"
        "| target | slowest input (CPU s) | index (`--replay`) |\n|---|---:|---:|\n" + slow + "\n\n"
        "Failures:\n\n" + fails + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--max-seconds", type=float, default=2.0)
    ap.add_argument("--max-rss-mb", type=float, default=300.0)
    ap.add_argument("--seconds", type=float, default=0.0, help="stop starting chunks after this")
    ap.add_argument("--replay", type=int, help="print and run one input")
    ap.add_argument("--range", type=int, nargs=2, metavar=("START", "STOP"), help=argparse.SUPPRESS)
    ap.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help="first input index (a campaign in parts)")
    ap.add_argument("--merge", type=Path, nargs="+", help="join saved parts into --save")
    ap.add_argument("--save", type=Path)
    args = ap.parse_args(argv)
    if args.merge:
        result = _merged([json.loads(p.read_text(encoding="utf-8")) for p in args.merge])
        print(_markdown(result))
        if args.save:
            args.save.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            args.save.with_suffix(".md").write_text(_markdown(result), encoding="utf-8")
        return 1 if result["failure_count"] else 0
    if args.range is not None:  # one chunk, for run_chunk: the tally as JSON on stdout
        os.nice(5)
        tally = run_range(args.seed, *args.range, args.max_seconds, args.max_rss_mb, args.progress)
        print(_tally_json(tally))
        return 0
    if args.replay is not None:
        case = generate(args.seed, args.replay, seed_logs(), rule_files())
        print(f"{case.family}/{case.target} {case.extra}\n{case.payload!r}"[:4000])
        tally = run_range(
            args.seed, args.replay, args.replay + 1, args.max_seconds, args.max_rss_mb
        )
        print(json.dumps(_summary(args.seed, tally, tally.seconds), indent=1))
        return 1 if tally.failures else 0
    began = time.perf_counter()
    tally = campaign(
        args.seed,
        args.inputs,
        args.workers,
        args.max_seconds,
        args.max_rss_mb,
        seconds=args.seconds,
        first=args.first,
        journal=args.save.with_suffix(".jsonl") if args.save else None,
    )
    result = _summary(args.seed, tally, time.perf_counter() - began)
    print(_markdown(result))
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        args.save.with_suffix(".md").write_text(_markdown(result), encoding="utf-8")
    return 1 if tally.failures else 0


def iter_cases(seed: int, count: int) -> Iterator[Case]:
    """The first ``count`` cases of campaign ``seed`` (for the CI slice)."""
    logs, rules = seed_logs(), rule_files()
    for index in range(count):
        yield generate(seed, index, logs, rules)


Check = Callable[[Case], None]

if __name__ == "__main__":
    sys.exit(main())
