"""Score ``parse_frame`` against peer crash-parser test suites, and time it on non-frame lines.

Run ``python bench/peer_frames.py [path/to/shared/peer]``.  Peer data (see each README under
``shared/peer/``):

(a) ClusterFuzz stack_analyzer: each record's ``crash_state`` is its top 3 frames after its own
    ignore lists.  We parse every line of the log, drop frames matching :data:`IGNORE` (sanitizer
    runtime, libc abort path, allocator and libFuzzer driver frames), normalise names the way
    ClusterFuzz does (no parameters, no template arguments, no ``(anonymous namespace)::``, cut at
    80 characters) and report two rates over the records whose expected state entries are all
    function-like (messages such as ``a == b in x.cc`` or ``NULL`` are not frames):
    ``in_order``: every expected entry matches one of our frames, in order (a subsequence);
    ``top3``: our first 3 kept frames of the first stack equal the expected entries exactly.
(b) satyr: gdb traces (frame and thread counts, the crash thread's first function, the frames of
    ``short_text``) and Python traces (frame count, per-frame file / function / line).
(c) DrKonqi: its labels are only a usefulness rating, so we check what the traces themselves
    fix: every ``#N`` line is one gdb frame, and every named frame's function is free of argument
    values; plus the share of named frames per usefulness class.

``score_all`` returns one number per suite; ``tests/test_dialects.py`` asserts they hold.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterable
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere, without installing
    sys.path.insert(0, str(ROOT))

from diagnose.frames.dialects import parse_frame  # noqa: E402
from diagnose.model import Frame, LogLine  # noqa: E402

# Runtime frames a report reader skips to reach the program's own code (ClusterFuzz's list is
# ~240 regexes; this is the small subset that covers sanitizer, libc and libFuzzer machinery).
IGNORE = re.compile(
    r"^(?:__asan|__lsan|__msan|__tsan|__ubsan|__sanitizer|__interception|__interceptor_"
    r"|___interceptor_|__hwasan|__scudo|__dfsan|__sancov|__cxa_throw|__cxa_rethrow"
    r"|abort|raise|gsignal|__GI_raise|__GI_abort|__libc_start_main|__libc_start_call_main"
    r"|_start|__pthread_kill|pthread_kill|__restore_rt|__assert_fail|__assert_perror_fail"
    r"|__GI___assert_fail|__kernel_vsyscall|start_thread|clone|__clone"
    r"|malloc|calloc|realloc|free|operator new|operator delete|mem(?:cpy|move|set|cmp)"
    r"|str(?:len|cpy|ncpy|cmp|ncmp|dup)|fuzzer::|LLVMFuzzerTestOneInput$|main$"
    r"|std::__1::__throw|std::__throw|__GI_|__libc_|_asan_rtl_|_sanitizer_|tgkill"
    r"|dump_backtrace|show_stack|dump_stack|__?kasan_report|kasan_report_|print_address_description"
    r"|__kernel_rt_sigreturn)"
)
# Unsymbolized frames of runtime libraries, skipped when the stack has named frames.
RUNTIME_MODULE = re.compile(
    r"(?:^|/)(?:libc|libpthread|libc\+\+|libc\+\+abi|libstdc\+\+|libclang_rt|linux-gate)\b"
)
NOT_A_FRAME = re.compile(r"\s| in |^NULL$|\.(?:cc|cpp|c|h|rs|go|py|java)$")
# An argument value leaking into a gdb function name: "f (this=0x1" or "x=...".
ARG_VALUES = re.compile(r"=| \(")
OPERATOR = re.compile(r"operator\s*\S+")
CAP = 80  # ClusterFuzz's LINE_LENGTH_CAP for one crash-state line


def frames_of(text: str) -> list[Frame]:
    """Parse every line of ``text`` and keep the frames."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        frame = parse_frame(LogLine(number, line))
        if frame is not None:
            out.append(frame)
    return out


def stacks_of(frames: list[Frame]) -> list[list[Frame]]:
    """Split frames into stacks: a new stack starts where the index does not increase."""
    stacks: list[list[Frame]] = []
    for f in frames:
        prev = stacks[-1][-1] if stacks else None
        if prev is None or (
            f.index is not None and prev.index is not None and f.index <= prev.index
        ):
            stacks.append([f])
        else:
            stacks[-1].append(f)
    return stacks


def _strip_templates(name: str) -> str:
    """Drop every ``<...>`` group (also an unclosed one cut by a length cap)."""
    out, depth = [], 0
    i = 0
    while i < len(name):
        if name.startswith("operator", i):
            j = i + 8
            while j < len(name) and name[j] in "<>=":
                j += 1
            out.append(name[i:j])
            i = j
            continue
        c = name[i]
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(c)
        i += 1
    return "".join(out)


def cf_norm(name: str) -> str:
    """ClusterFuzz-style frame key: no params, templates or anonymous namespace."""
    name = name.replace("(anonymous namespace)::", "")
    return _strip_templates(name).strip()


def cf_keys(frame: Frame) -> list[str]:
    """Names a ClusterFuzz state line may use for ``frame``: function, raw symbol, file name."""
    keys = []
    if frame.function:
        keys.append(cf_norm(frame.function))
    if frame.symbol and frame.symbol != frame.function and frame.mangled is None:
        keys.append(cf_norm(frame.symbol.split("(")[0]))
    if frame.file:
        keys.append(re.split(r"[\\/]", frame.file)[-1])
    if frame.module and not frame.function:
        # Unsymbolized: ClusterFuzz writes "module+0xoffset" or just the module.
        keys.extend([frame.module + (frame.offset or ""), frame.module])
    return keys


def cf_match(expected: str, frame: Frame) -> bool:
    """True when ``frame`` is the frame ClusterFuzz wrote as ``expected``."""
    want = cf_norm(expected)
    cut = len(expected) >= CAP
    for key in cf_keys(frame):
        if key == want or (cut and key.startswith(want[: len(want) - 1])):
            return True
    return False


def kept(frames: Iterable[Frame]) -> list[Frame]:
    """Frames that survive :data:`IGNORE`, innermost first.

    Frames naming nothing at all are dropped.  A Python traceback prints the innermost call
    last, so each run of consecutive Python frames is reversed to put it first, as native
    dialects and ClusterFuzz's crash state do.
    """
    out: list[Frame] = []
    run: list[Frame] = []
    for f in frames:
        if f.dialect == "python":
            run.append(f)
            continue
        out.extend(reversed(run))
        run = []
        out.append(f)
    out.extend(reversed(run))
    named = any(f.function for f in out)
    return [
        f
        for f in out
        if (f.function or f.file or f.module)
        and not IGNORE.match(cf_norm(f.function or ""))
        and not (named and not f.function and RUNTIME_MODULE.search(f.module or ""))
    ]


def score_clusterfuzz(peer: Path) -> dict[str, float]:
    """(a) ClusterFuzz crash states: in-order and top-3 match rates."""
    base = peer / "clusterfuzz-stack-analyzer"
    records = json.loads((base / "expected.json").read_text())
    total = in_order = top3 = 0
    for name, rec in records.items():
        if name.startswith("_"):
            continue
        want = rec.get("expected", {}).get("state_frames") or []
        if not want or any(NOT_A_FRAME.search(w) for w in want):
            continue
        text = (base / "data" / rec["files"][0]).read_text(errors="replace")
        frames = frames_of(text)
        total += 1
        ours = kept(frames)
        pos = 0
        for w in want:
            while pos < len(ours) and not cf_match(w, ours[pos]):
                pos += 1
            if pos == len(ours):
                break
            pos += 1
        else:
            in_order += 1
        first = next((kept(s) for s in stacks_of(frames) if kept(s)), [])
        if len(first) >= len(want) and all(
            cf_match(w, f) for w, f in zip(want, first, strict=False)
        ):
            top3 += 1
    return {
        "records": float(total),
        "in_order": in_order / total if total else 0.0,
        "top3": top3 / total if total else 0.0,
    }


def _basename(path: str | None) -> str | None:
    return re.split(r"[\\/]", path)[-1] if path else None


def score_satyr_gdb(peer: Path) -> tuple[int, int]:
    """(b) satyr gdb traces: (checks passed, checks made)."""
    base = peer / "satyr"
    expected = json.loads((base / "expected.json").read_text())
    ok = made = 0
    for key, exp in expected.items():
        if not key.startswith("gdb_stacktraces/"):
            continue
        frames = frames_of((base / key).read_text(errors="replace"))
        stacks = stacks_of(frames)
        # satyr keeps a lone frame printed before the threads as the "crash frame", not a thread.
        threads = stacks[1:] if len(stacks) > 1 and len(stacks[0]) == 1 else stacks
        checks: list[bool] = []
        if "thread_count" in exp:
            checks.append(len(threads) == exp["thread_count"])
        if "frame_count" in exp:
            checks.append(sum(map(len, threads)) == exp["frame_count"])
        if "crash_thread_frame_count" in exp:
            checks.append(len(threads) == 1 and len(threads[0]) == exp["crash_thread_frame_count"])
        if "crash_thread_first_function" in exp:
            tops = {t[0].function for t in threads if t[0].index == 0}
            checks.append(exp["crash_thread_first_function"] in tops)
        for line in exp.get("short_text_5", "").splitlines()[1:]:
            m = re.match(r"\s*#(\d+) (\S+)(?: at (\S+):(\d+))?$", line)
            if not m:
                continue
            idx, func, file, num = m.groups()
            fn = None if func == "??" else func
            checks.append(
                any(
                    f.index == int(idx)
                    and f.function == fn
                    and _basename(f.file) == file
                    and f.line == (int(num) if num else None)
                    for f in frames
                )
            )
        ok += sum(checks)
        made += len(checks)
    return ok, made


def _py_special(name: str | None) -> str | None:
    """satyr writes ``<module>`` as ``module`` and ``<string>`` as ``string``."""
    return name[1:-1] if name and name.startswith("<") and name.endswith(">") else name


def score_satyr_python(peer: Path) -> tuple[int, int]:
    """(b) satyr Python traces: (checks passed, checks made)."""
    base = peer / "satyr"
    expected = json.loads((base / "expected.json").read_text())
    ok = made = 0
    for key, exp in expected.items():
        if not key.startswith("python_stacktraces/"):
            continue
        text = (base / key).read_text(errors="replace")
        # satyr lists the innermost frame first; a traceback prints it last.
        frames = [f for f in frames_of(text) if f.dialect == "python"][::-1]
        checks: list[bool] = []
        if "frame_count" in exp:
            checks.append(len(frames) == exp["frame_count"])
        for want, f in zip(exp.get("frames", []), frames, strict=False):
            # satyr names a SyntaxError's frame "syntax"; the line itself names no function.
            func = "syntax" if f.function is None else _py_special(f.function)
            checks.append(func == want["function_name"])
            checks.append(_py_special(f.file) == want["file_name"])
            if "file_line" in want:
                checks.append(f.line == want["file_line"])
        checks.extend([False] * max(0, len(exp.get("frames", [])) - len(frames)))
        for i, line in enumerate(exp.get("short_text_6", "").splitlines()):
            m = re.match(r"#\d+ \[(.*):(\d+)\] (\S+)$", line)
            if not m or i >= len(frames):
                checks.append(False)
                continue
            f = frames[i]
            file = re.sub(r"^/home/[^/]+/", "/home/anonymized/", f.file or "")
            checks.append((file, f.line, f.function) == (m[1], int(m[2]), m[3]))
        ok += sum(checks)
        made += len(checks)
    return ok, made


def score_drkonqi(peer: Path) -> dict[str, float]:
    """(c) DrKonqi: frame-count agreement, clean function names, named share per rating."""
    base = peer / "drkonqi-gdb"
    labels = ConfigParser()
    labels.optionxform = str  # type: ignore[assignment,method-assign]
    labels.read(base / "data.ini")
    usefulness = dict(labels["usefulness"]) if labels.has_section("usefulness") else {}
    lines_total = frames_total = named = clean = 0
    per_class: dict[str, list[float]] = {}
    for path in sorted(base.glob("test_*")):
        text = path.read_text(errors="replace")
        hash_lines = sum(1 for ln in text.splitlines() if re.match(r"#\d+\s", ln))
        frames = [f for f in frames_of(text) if f.dialect == "gdb"]
        lines_total += hash_lines
        frames_total += min(len(frames), hash_lines)
        names = [f.function for f in frames if f.function]
        named += len(names)
        clean += sum(not ARG_VALUES.search(OPERATOR.sub("", n)) for n in names)
        if path.name in usefulness and frames:
            per_class.setdefault(usefulness[path.name], []).append(len(names) / len(frames))
    out = {
        "frame_coverage": frames_total / lines_total if lines_total else 0.0,
        "clean_names": clean / named if named else 0.0,
    }
    for cls, shares in per_class.items():
        out[f"named_share[{cls}]"] = sum(shares) / len(shares)
    return out


def score_all(peer: Path) -> dict[str, float]:
    """One headline number per suite (the ones tests/test_dialects.py guards)."""
    cf = score_clusterfuzz(peer)
    g_ok, g_made = score_satyr_gdb(peer)
    p_ok, p_made = score_satyr_python(peer)
    dk = score_drkonqi(peer)
    return {
        "clusterfuzz_state": cf["in_order"],
        "clusterfuzz_top3": cf["top3"],
        "satyr_gdb": g_ok / g_made if g_made else 0.0,
        "satyr_python": p_ok / p_made if p_made else 0.0,
        "drkonqi": dk["frame_coverage"] * dk["clean_names"],
    }


# --- speed -------------------------------------------------------------------------------------

NON_FRAMES = [
    "INFO 12-01 10:00:00 [engine.py:42] Added request chatcmpl-0a1b2c with 512 prompt tokens",
    "[2026-01-01 10:00:00 TP3] Decode batch. #running-req: 12, #token: 40960, gen throughput",
    "  warnings.warn(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB)",
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:03<00:03,  1.52s/it]",
    "    return self._call_impl(*args, **kwargs)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "",
    "NCCL INFO Channel 00/02 :    0   1   2   3",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1 (see docs)",
]


FRAMES = [
    "1       0x7a1b2c3d4e5f acme::common::throwRuntimeError(char const*, int, char const*)",
    "/opt/acme/lib/libacme.so(_ZN4acme3run4stepEv+0x1a) [0x7f0012345678]",
    "frame #3: acme::cuda::check_impl(int, char const*, int, bool) + 0x1a (0x7f11 in /x/lib.so)",
    "#0  0x00007f1234567890 in acme::Engine::step (this=0x55aa, n=1) at engine.cc:12",
    "    #0 0x4f8a2b in acme::Parser::feed(int) /src/acme/parser.cc:12:3",
    '  File "/srv/app/worker.py", line 116, in forward_loop',
]


def _rate(fn: Callable[[LogLine], object], lines: list[LogLine], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for line in lines:
            fn(line)
    return len(lines) * repeat / (time.perf_counter() - start)


def speed(repeat: int = 20_000) -> dict[str, float]:
    """Lines per second: parse_frame vs a no-op call and vs one compiled regex per line."""
    lines = [LogLine(i, t) for i, t in enumerate(NON_FRAMES, 1)]
    one_regex = re.compile(r"\s*(?:#\d+\s|frame #|File \"|\d+\s+0x)")

    def noop(line: LogLine) -> object:
        return None

    def regex_only(line: LogLine) -> object:
        return one_regex.match(line.text)

    frames = [LogLine(i, t) for i, t in enumerate(FRAMES, 1)]
    return {
        "noop": _rate(noop, lines, repeat),
        "one_regex": _rate(regex_only, lines, repeat),
        "parse_frame": _rate(parse_frame, lines, repeat),
        # Frame lines cost name parsing; parse_name and demangle cache their results, so the
        # first pass (cold) is reported apart from repeats (warm).
        "frames_cold": _rate(parse_frame, frames, 1),
        "frames_warm": _rate(parse_frame, frames, repeat // 10),
    }


def main(argv: list[str]) -> int:
    """Print per-suite scores and the non-frame throughput, side by side."""
    peer = Path(argv[1]) if len(argv) > 1 else ROOT.parent / "shared" / "peer"
    if peer.is_dir():
        cf = score_clusterfuzz(peer)
        print(
            f"(a) ClusterFuzz  records={cf['records']:.0f}  in_order={cf['in_order']:.3f}"
            f"  top3={cf['top3']:.3f}"
        )
        g_ok, g_made = score_satyr_gdb(peer)
        p_ok, p_made = score_satyr_python(peer)
        print(f"(b) satyr gdb     {g_ok}/{g_made} checks = {g_ok / g_made:.3f}")
        print(f"(b) satyr python  {p_ok}/{p_made} checks = {p_ok / p_made:.3f}")
        for key, value in score_drkonqi(peer).items():
            print(f"(c) DrKonqi {key:28s} {value:.3f}")
        print("headline:", {k: round(v, 3) for k, v in score_all(peer).items()})
    else:
        print(f"no peer data at {peer}; skipping scores")
    rates = speed()
    base = rates["parse_frame"]
    for name, rate in rates.items():
        kind = "frame lines/s    " if name.startswith("frames") else "non-frame lines/s"
        print(f"{kind}  {name:12s} {rate:12,.0f}   ratio to parse_frame {rate / base:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
