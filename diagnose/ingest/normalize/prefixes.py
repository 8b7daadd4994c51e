"""Shipper, process and logger prefixes peeled off a line, noting the rank and level they name."""

from __future__ import annotations

import re

from diagnose.lazyre import lazy
from diagnose.records import record

# Nested prefixes seen in real logs go up to 4 deep (two worker prefixes before a logger
# prefix in vllm-project/vllm#36077); the bound only guarantees termination.
MAX_PREFIXES = 8

# Each pattern is anchored at the line start and ends at the single space that separates
# prefix from message, so the message keeps its own indentation (Python frames).
_TS = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
_TAGS = r"(?:[A-Z]{2,4}\d{1,5})(?: [A-Z]{2,4}\d{1,5}){0,5}"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE)"

# One anchored alternation per first character: a single C-level match per line.
_BRACKET_PREFIX = lazy(
    r"\[(?:"
    # python logging's "[%(asctime)s] %(name)s %(levelname)s: ": LMCache's "[2025-07-03
    # 12:45:23,599] LMCache WARNING: Failed to allocate memory for the KV cache." (a warning its
    # cache survives, LMCache/LMCache#969); the logger name and level go with the prefix
    rf"{_TS}\] [A-Za-z][\w.-]{{0,40}} (?P<namedlevel>{_LEVEL}): "
    # sglang: [2026-01-02 10:00:00 TP3] / [2025-05-14 03:58:33 DP0 TP0]; buildkite [ts]
    rf"|{_TS}(?: (?P<tags>{_TAGS}))?\]"
    # Ray's C++ core logger: [2025-04-15 00:31:11,815 E 808 17795] (level, pid, thread)
    rf"|{_TS} (?P<raylevel>[DIWEF]) \d{{1,8}} \d{{1,8}}\]"
    # torchrun/torch.distributed: [rank3]: (also [rank3]:[E...] with no space)
    r"|(?P<rank>rank\d{1,5})\]:"
    # torchrun --tee / --log-dir: [default3]: (role name, then the local rank); no blank
    # follows, so none is taken (see _strip_one_prefix)
    r"|(?P<role>[A-Za-z][A-Za-z_]{2,31}\d{1,5})\]:"
    # Azure ML and other job runners: [stderr] after their timestamp
    r"|std(?:out|err)\](?= )"
    # mpirun --tag-output: [1,6]<stdout>:
    r"|(?P<mpi>\d{1,5},\d{1,6})\]<(?:stdout|stderr)>:"
    # TensorRT logger timestamp: [10/01/2025-08:26:34]; the [TRT] [W] after it is content
    # (ultralytics/ultralytics#22271)
    r"|\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\]"
    # kubectl logs --prefix: [pod/name-abc12/container]
    r"|pod/(?P<pod>[\w.-]{1,253})/[\w.-]{1,63}\]"
    # a container or service tag before the process's own prefix: "[vllm]: (VllmWorker...";
    # only there: "[Autotuner]: Skipping tactic" is the message's own tag
    r"|[A-Za-z][\w.-]{0,62}\]: (?=\((?:[\w ]+ )?(?:pid|rank)=|\[)"
    # Open MPI's signal handler and mca messages: [trainer-03:00412] (host, pid printed %05d)
    r"|(?P<ompi>[A-Za-z][\w.-]{0,252}:\d{5,8})\](?= )"
    # a bare pid before another bracketed prefix: [80746] [rank0]: (hiyouga/LlamaFactory#7396)
    r"|(?P<pid>\d{2,8})\](?= \[)"
    # dmesg: seconds since boot "[ 1234.567890]", or dmesg -T "[Mon Mar  3 10:00:00 2025]"
    r"| {0,7}\d{1,10}\.\d{6}\]"
    rf"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) {_MON} [ \d]\d \d\d:\d\d:\d\d \d{{4}}\]"
    r") ?"
)
# c10 logging: [E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] -> [E ProcessGroupNCCL.cpp:607]
# (the older spelling), so one failure printed at different times by many ranks reads alike.
_C10_STAMP = lazy(r"\[([EWIF])\d{3,4} \d\d:\d\d:\d\d\.\d{1,9} (\d+ )?(?=[\w./-]+:\d+\])")

# vLLM/Ray worker prefix: (VllmWorker rank=2 pid=123) (RayWorkerWrapper pid=1054, ip=10.1.2.3)
# (EngineCore_DP0 pid=17833) (pid=123), and vLLM V1's (VllmWorker TP0 pid=118) with its
# parallel ranks as words after the name — needs a pid= or ip= field to count.
WORKER_NAME = r"[A-Za-z_][\w.:-]{0,63}(?: [A-Z]{2,4}\d{1,5}){0,4}"
_WORKER = lazy(
    rf"\((?P<name>{WORKER_NAME})?(?:,? ?(?P<kv>(?:rank|pid|ip|node|node_id|repr)"
    r"=[\w.:/-]{1,64}))+\) ?"
)
_WORKER_KV = lazy(r"\b(rank|pid)=([\w.-]+)")
_NAME_TAGS = lazy(r"(?:[_ -](?:[A-Z]{2,4}\d{1,5}))+$")

_DIGIT_PREFIX = lazy(
    # loguru: 2026-01-02 10:00:00.123 | ERROR    | module:func:12 - message
    rf"{_TS} \| (?P<loguru>{_LEVEL}) {{0,8}}\| [\w.<>:-]{{1,200}} - "
    # python logging's cookbook format: asctime - name - levelname - message
    rf"|{_TS} - [\w.<>-]{{1,200}} - (?P<cookbook>{_LEVEL}) - "
    # and "asctime name process levelname message" (xinference): the level padded to 8
    rf"|{_TS} [A-Za-z_][\w.<>-]{{0,199}}(?: \d{{1,8}})? (?P<spaced>{_LEVEL}) +"
    # Rust's tracing (TGI's launcher and router): "2023-10-17T07:47:06.229031Z  WARN
    # text_generation_launcher: Unable to use Flash Attention V2: ..." (the level padded to 5;
    # a warning the launcher goes on after, huggingface/text-generation-inference#1161). The
    # target stays in the message: kb/stacks.toml knows the engine by it.
    rf"|{_TS} {{1,2}}(?P<tracing>{_LEVEL}) (?=[\w:.-]{{1,200}}: )"
    # docker --timestamps / k8s (CRI adds 'stdout F'), python logging "ts - ", ts | message
    rf"|{_TS}(?: (?:stdout|stderr) [FP])?(?: - | \| | ?)"
)
_ALPHA_PREFIX = lazy(
    # vLLM logger: ERROR 01-02 02:39:17 worker_base.py:467] / INFO 03-04 ... [core.py:12]
    rf"(?P<vllm>{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{{1,6}})? "
    r"(?:\[[\w./-]{1,200}:\d{1,6}\]|[\w./-]{1,200}:\d{1,6}\]) ?"
    # glog: E0102 10:00:00.123456 12345 file.cc:12]; torch's logging with an ISO time:
    # E2025-08-13T11:34:14+08:00.677000 1201 select_algorithm.py:2100]
    # (a Windows path too: "E1105 18:09:29.303000 9336 Lib\site-packages\torch\...py:715]")
    r"|(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d{1,9} +\d{1,10} "
    r"(?:[A-Za-z]:)?[\w./\\-]{1,200}:\d{1,6}\] ?"
    r"|(?P<glogiso>[IWEF])\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)?\.\d{1,9} +\d{1,10}"
    r" [\w./-]{1,200}:\d{1,6}\] ?"
    # journald: Mar 03 10:00:00 host python[123]:
    rf"|{_MON} [ \d]\d \d\d:\d\d:\d\d [\w.-]{{1,253}} [\w./@-]{{1,200}}(?:\[\d+\])?: ?"
)
# First letters of a level name, a glog severity or a month: others skip _ALPHA_PREFIX.
_ALPHA_FIRST = frozenset("ACDEFIJMNOSTW")
# docker compose: "vllm-1  | " (vllm-project/vllm#10439) / "container  | " / "pod-abc12 | ".
# One token, then either 2+ spaces (compose pads names to align) or a name ending in a
# replica index or pod suffix holding a digit (-1, _2, -abc12).
_COMPOSE = lazy(
    r"(?P<svc>[A-Za-z0-9][\w.-]{0,62}?) {2,}\| "
    r"|(?P<replica>[A-Za-z0-9][\w.-]{0,62}[-_](?=[0-9a-z]{0,9}\d)[0-9a-z]{1,10}) \| "
)
_SOURCE_SUFFIXES = (".py", ".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".rs", ".go")
RAY_REPEATED = lazy(r" ?\[repeated \d+x across cluster\]$")
_BUILDKIT = lazy(r"#\d{1,4} \d{1,6}\.\d{1,3} ")
# Buildkite / CI log viewers: "  | " before each line, often inside a chat quote
# (vllm-project/vllm#8204); not a markdown table row: those end in "|".
_PIPE = lazy(r" {0,4}\| ")


@record(frozen=False)
class Ident:
    """The best process identity seen in a line's prefixes (rank beats pid/container).

    ``level`` is the log level a prefix named, spelled as :data:`_LEVELS` spells it.
    """

    value: str | None = None
    strength: int = 0
    level: str | None = None

    def offer(self, value: str | None, strength: int) -> None:
        """Keep ``value`` when it names the process more specifically than what we have."""
        if value and strength > self.strength:
            self.value, self.strength = value, strength


def _worker_ident(match: re.Match[str], ident: Ident) -> None:
    """Pick the rank out of a vLLM/Ray worker prefix: rank=N, a TP/DP tag in the name, pid."""
    fields = dict(_WORKER_KV.findall(match.group(0)))
    if "rank" in fields:
        ident.offer(f"rank={fields['rank']}", 3)
        return
    name = match.group("name") or ""
    tags = _NAME_TAGS.search(name)
    if tags:
        ident.offer(tags.group(0)[1:], 3)
    elif "pid" in fields:
        ident.offer(f"pid={fields['pid']}", 1)


def _strip_one_prefix(text: str, ident: Ident) -> str | None:
    """Strip one recognised prefix from the start of ``text``; None when there is none."""
    first = text[0]
    if first == "[":
        match = _BRACKET_PREFIX.match(text)
        if match is None:
            return None
        tags, rank, mpi, role, pod, pid, ompi = match.group(
            "tags", "rank", "mpi", "role", "pod", "pid", "ompi"
        )
        _note_level(match.group("raylevel") or match.group("namedlevel"), ident)
        if tags or rank or mpi or role:
            ident.offer(tags or rank or mpi or role, 3)
        if role:  # the blank after "[default0]:" is the message's own indentation
            return text[match.end("role") + 2 :]
        elif pod:
            ident.offer(pod, 2)
        elif pid:
            ident.offer(f"pid={pid}", 1)
        elif ompi:
            if ompi.rpartition(":")[0].endswith(_SOURCE_SUFFIXES):
                return None  # a logger's [file.py:12345] tag, not a host
            ident.offer(ompi, 1)
        return text[match.end() :]
    if first == "#":
        # Docker BuildKit's plain progress: "#17 305.3 " (step, then seconds into it)
        match = _BUILDKIT.match(text)
        return text[match.end() :] if match else None
    if first == "(":
        match = _WORKER.match(text)
        if match and ("pid=" in match.group(0) or "ip=" in match.group(0)):
            _worker_ident(match, ident)
            return text[match.end() :]
        return None
    if first.isdigit():
        match = _DIGIT_PREFIX.match(text) if text[4:5] == "-" else None
        if match:
            _note_level(
                match.group("loguru")
                or match.group("cookbook")
                or match.group("spaced")
                or match.group("tracing"),
                ident,
            )
            return text[match.end() :]
    elif first in _ALPHA_FIRST:
        match = _ALPHA_PREFIX.match(text)
        if match:
            _note_level(match.group("vllm") or match.group("glog") or match.group("glogiso"), ident)
            return text[match.end() :]
    if first.isalnum() and "| " in text[:80]:
        match = _COMPOSE.match(text)
        if match:
            ident.offer(match.group("svc") or match.group("replica"), 2)
            return text[match.end() :]
    if first == " " and text.lstrip(" ")[:1] == "[":
        # A paste indented as a Markdown code block: "    [ic5:133017] [ 1] lib.so(...)".
        body = text.lstrip(" ")
        match = _BRACKET_PREFIX.match(body)
        if match is not None and any(match.group("rank", "mpi", "ompi", "tags", "pod")):
            return _strip_one_prefix(body, ident)
    if first == " " or first == "|":
        match = _PIPE.match(text)
        if match and not text.rstrip().endswith("|"):
            return text[match.end() :]
    return None


# Level names as prefixes spell them -> one spelling (glog's single letters included).
_LEVELS = {
    "W": "WARNING", "WARN": "WARNING", "WARNING": "WARNING",
    "E": "ERROR", "ERROR": "ERROR", "CRITICAL": "CRITICAL",
    "F": "FATAL", "FATAL": "FATAL",
    "I": "INFO", "INFO": "INFO", "DEBUG": "DEBUG", "TRACE": "TRACE",
}  # fmt: skip


# A logfmt record (Go's slog and logrus, so Ollama) names its level in a field after the time,
# which stays in the text: "time=2025-11-26T08:00:04.513Z level=WARN source=sched.go:646 msg=...".
_LOGFMT_LEVEL = lazy(r"(?:time=\S+ )?level=([A-Za-z]+) ")


def note_logfmt_level(text: str, ident: Ident) -> None:
    """Take a logfmt record's ``level=`` field as the line's level (ollama/ollama#9160)."""
    match = _LOGFMT_LEVEL.match(text)
    if match is not None:
        _note_level(match.group(1).upper(), ident)


def _note_level(name: str | None, ident: Ident) -> None:
    """Keep the first level a line's prefixes name (the outermost is the logger's own)."""
    if name and ident.level is None:
        ident.level = _LEVELS.get(name)


def strip_prefixes(text: str, ident: Ident) -> tuple[str, bool]:
    """Strip every nested prefix; return the message and whether anything was stripped."""
    stripped = False
    for _ in range(MAX_PREFIXES):
        if not text:
            break
        rest = _strip_one_prefix(text, ident)
        if rest is None:
            break
        text, stripped = rest, True
    if len(text) > 3 and text[0] == "[" and text[1] in "EWIF" and text[2].isdigit():
        text = _C10_STAMP.sub(r"[\1 ", text, count=1)
    return text, stripped
