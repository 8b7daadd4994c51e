"""Log-wide facts that rules and fixes need: server args, GPUs, archs, versions, readiness, memory.

:func:`extract_context` reads normalised lines once and returns a frozen
:class:`LogContext`.  Every fact remembers the ORIGINAL line it came from.

How it stays fast and safe on huge, hostile input:

* Each extractor names the literal substrings a line must contain before any
  regex runs on it; :data:`CONTEXT_LITERALS` is their union, so the big-file
  scanner can drop every other line without losing a fact.
* Regexes use bounded quantifiers on disjoint character classes (no nested
  repetition), so one line costs time linear in its length; only the first
  ``_MAX_SCAN`` characters of a line are read.
* Nothing here raises on odd text: numbers are taken from ``\\d`` groups only.

Conflicts: for server args and versions the most specific source wins (a
``ServerArgs(...)`` repr over a flag, ``nvcc`` over a ``cuda-12.4`` path), ties
go to the first line.  Memory is a state that changes while the server starts,
so the LAST reading wins: it is what the crash saw.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from diagnose.lazyre import LazyPattern, lazy
from diagnose.model import LogLine
from diagnose.records import record

__all__ = ["CONTEXT_LITERALS", "Fact", "LogContext", "extract_context"]

_MAX_SCAN = 65536  # a ServerArgs repr is ~10 KB; nothing useful sits beyond 64 KiB of one line
_MAX_VALUE = 200


@record
class Fact:
    """One observed value and the original 1-based line where it was seen."""

    value: str
    line: int

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"value", "line"}``."""
        return {"value": self.value, "line": self.line}


def _empty() -> Mapping[str, Fact]:
    return MappingProxyType({})


@record
class LogContext:
    """Facts about the whole log.

    ``server_args`` uses canonical snake_case keys (``tp_size``, ``ep_size``,
    ``mem_fraction_static``, ``model`` ...; environment variables appear
    lower-cased, ``nccl_debug``).  Booleans are ``"true"``/``"false"``.
    ``archs`` are ``sm_<cc>[a|f]`` or AMD ``gfx<n>``.  ``versions`` maps
    ``torch``, ``cuda``, ``cuda_driver`` (the CUDA version the driver supports,
    nvidia-smi's "CUDA Version"), ``torch_cuda`` (the CUDA torch was built
    with), ``driver``, ``flashinfer``, ``sglang``, ``sgl_kernel``, ``vllm``,
    ``tensorrt_llm``, ``triton``, ``nccl``, ``deepep``, ``nvshmem``,
    ``cutlass``, ``cutlass_dsl``, ``transformers``, ``python``.
    ``memory`` values are integer bytes as decimal strings, except
    ``kv_tokens`` and ``gpu_blocks`` which are counts.
    """

    server_args: Mapping[str, Fact] = field(default_factory=_empty, hash=False)
    gpus: tuple[Fact, ...] = ()
    archs: tuple[Fact, ...] = ()
    versions: Mapping[str, Fact] = field(default_factory=_empty, hash=False)
    ready: tuple[Fact, ...] = ()
    memory: Mapping[str, Fact] = field(default_factory=_empty, hash=False)

    def __post_init__(self) -> None:
        # Callers (tests, rule examples) may pass plain dicts; keep the object immutable.
        for name in ("server_args", "versions", "memory"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    def is_empty(self) -> bool:
        """True when no fact at all was found."""
        return not (
            self.server_args
            or self.gpus
            or self.archs
            or self.versions
            or self.ready
            or self.memory
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: mappings become objects, tuples lists of ``{"value", "line"}``."""
        return {
            "server_args": {k: f.to_dict() for k, f in sorted(self.server_args.items())},
            "gpus": [f.to_dict() for f in self.gpus],
            "archs": [f.to_dict() for f in self.archs],
            "versions": {k: f.to_dict() for k, f in sorted(self.versions.items())},
            "ready": [f.to_dict() for f in self.ready],
            "memory": {k: f.to_dict() for k, f in sorted(self.memory.items())},
        }


# --------------------------------------------------------------------------- accumulation


class _Acc:
    """Mutable accumulator used while scanning; frozen into a LogContext at the end."""

    def __init__(self) -> None:
        self.args: dict[str, tuple[int, Fact]] = {}
        self.versions: dict[str, tuple[int, Fact]] = {}
        self.gpus: dict[str, Fact] = {}
        self.archs: dict[str, Fact] = {}
        self.ready: dict[str, Fact] = {}
        self.memory: dict[str, Fact] = {}

    @staticmethod
    def _ranked(
        store: dict[str, tuple[int, Fact]], key: str, value: str, line: int, prio: int
    ) -> None:
        old = store.get(key)
        if old is None or prio > old[0]:
            store[key] = (prio, Fact(value[:_MAX_VALUE], line))

    def arg(self, key: str, value: str, line: int, prio: int) -> None:
        self._ranked(self.args, key, value, line, prio)

    def version(self, key: str, value: str, line: int, prio: int) -> None:
        self._ranked(self.versions, key, value, line, prio)

    def freeze(self) -> LogContext:
        return LogContext(
            server_args=MappingProxyType({k: f for k, (_, f) in self.args.items()}),
            gpus=tuple(self.gpus.values()),
            archs=tuple(self.archs.values()),
            versions=MappingProxyType({k: f for k, (_, f) in self.versions.items()}),
            ready=tuple(self.ready.values()),
            memory=MappingProxyType(dict(self.memory)),
        )


# --------------------------------------------------------------------------- server args


# Flag / field name (lower-case, '-' -> '_') -> canonical key.  Names not listed are
# dropped: a ServerArgs repr holds ~200 defaults and rules only need these.
def _arg_aliases() -> dict[str, str]:
    """Spellings of a setting -> the key rules read (kb/server-args.toml; snapshotted)."""
    return _aliases_of(_server_args_file())


def _server_args_file() -> Path:
    from diagnose.datafiles import data_dir

    return data_dir("kb") / "server-args.toml"


@lru_cache(maxsize=2)
def _aliases_of(path: Path) -> dict[str, str]:
    from diagnose.snapshot import memo

    return memo("server-args", (path, Path(__file__)), lambda: _read_aliases(path))


def _read_aliases(path: Path) -> dict[str, str]:
    from diagnose.tomlsource import load_toml

    src = load_toml(path)
    table = src.data.get("aliases")
    if not isinstance(table, dict):
        raise src.error("aliases", "expected an [aliases] table of spelling = key")
    for key, value in table.items():
        if not isinstance(value, str) or not value or key != key.lower():
            raise src.error(f"aliases.{key}", "expected a lower-case spelling = a key string")
    return dict(table)


# store_true flags: present means "true" and they never consume the next token.
_BOOL_KEYS = frozenset(
    {
        "disable_cuda_graph",
        "enforce_eager",
        "enable_expert_parallel",
        "enable_dp_attention",
        "enable_ep_moe",
        "enable_deepep_moe",
        "enable_eplb",
        "enable_torch_compile",
    }
)

# Keys whose values are numbers: "--mem-fraction-static to 0.85" in prose must not
# record "to".  vLLM accepts "32k" style lengths.
_NUMERIC_KEYS = frozenset(
    {
        "tp_size",
        "ep_size",
        "dp_size",
        "pp_size",
        "nnodes",
        "mem_fraction_static",
        "gpu_memory_utilization",
        "kv_cache_free_gpu_memory_fraction",
        "max_model_len",
        "max_num_seqs",
        "max_running_requests",
        "max_batch_size",
        "max_num_batched_tokens",
        "max_num_tokens",
        "max_total_tokens",
        "max_prefill_tokens",
        "chunked_prefill_size",
        "cuda_graph_max_bs",
        "num_max_dispatch_tokens_per_rank",
        "ep_num_redundant_experts",
        "hidden_size",
        "moe_intermediate_size",
        "intermediate_size",
        "num_experts",
        "top_k",
    }
)
_NUMBER = lazy(r"-?\d{1,12}(?:\.\d{1,8})?[kKmM]?")
_WORD_VALUE = lazy(r"[\w./:@+,=-]{1,200}")

_PRIO_REPR = 3  # the effective value after defaults and validation
_PRIO_FLAG = 2
_PRIO_ENV = 2
_PRIO_DERIVED = 1  # read off an error message, e.g. vLLM's "max seq len (32768)"

_PRIO_TOOL = 3  # a tool printing its own version: nvcc, vLLM engine banner
_PRIO_NAMED = 2  # "torch 2.8.0", "torch==2.8.0", "PyTorch version: 2.8.0", a cache path
_PRIO_PATH = 1  # "site-packages/vllm-0.10.1.dist-info", "/usr/local/cuda-12.4", "python3.10/"


def _clean_arg(key: str, raw: str) -> str | None:
    """Normalise one raw value; None when it carries no information."""
    v = raw.strip().strip("`")  # markdown inline code around a pasted value
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        v = v[1:-1]
    if not v or v in {"None", "null", "none"} or len(v) > _MAX_VALUE:
        return None
    if v in {"True", "False", "true", "false"}:
        return v.lower()
    if key in _BOOL_KEYS:
        return None
    if key in _NUMERIC_KEYS:
        return v if _NUMBER.fullmatch(v) else None
    if key in {"dtype", "kv_cache_dtype"} and v.startswith("torch."):
        v = v[len("torch.") :]
    # Environment values (CUDA_VISIBLE_DEVICES=0,1) and backends are single words.
    return v if _WORD_VALUE.fullmatch(v) or key == "model" else None


_IDENT = lazy(r"[A-Za-z_][A-Za-z0-9_]{0,80}")
_VALUE_STOP = lazy(r"[,()\[\]{}'\"]")


def _skip_value(text: str, i: int) -> int:
    """Index of the ',' / ')' / '}' that ends the value starting at ``i`` (or len)."""
    n = len(text)
    depth = 0
    while i < n:
        m = _VALUE_STOP.search(text, i)
        if m is None:
            return n
        j = m.start()
        c = text[j]
        if c in "'\"":
            k = j + 1
            while True:
                k = text.find(c, k)
                if k < 0:
                    return n
                if text[k - 1] != "\\":
                    break
                k += 1
            i = k + 1
        elif c in "([{":
            depth += 1
            i = j + 1
        elif depth > 0:
            if c != ",":
                depth -= 1
            i = j + 1
        elif c in ",)}":
            return j
        else:  # a stray ']' at top level belongs to the value
            i = j + 1
    return n


def _iter_pairs(text: str, i: int) -> Iterable[tuple[str, str]]:
    """Yield ``(key, raw value)`` from ``k=v, ...`` or ``'k': v, ...`` starting at ``i``."""
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t,{":
            i += 1
            continue
        if c in ")}":
            return
        if c in "'\"":
            end = text.find(c, i + 1)
            if end < 0:
                return
            key = text[i + 1 : end]
            i = end + 1
        else:
            m = _IDENT.match(text, i)
            if m is None:
                i = max(_skip_value(text, i), i + 1)
                continue
            key = m.group()
            i = m.end()
        while i < n and text[i] == " ":
            i += 1
        if i < n and text[i] in "=:":
            i += 1
            while i < n and text[i] == " ":
                i += 1
            start = i
            i = _skip_value(text, i)
            yield key, text[start:i]
        else:
            i = max(_skip_value(text, i), i + 1)


# Where a key=value dump starts.  vLLM: "with config: model=..." (engine init),
# "non-default args: {...}" (0.10+), "args: Namespace(...)" (<= 0.6).
_REPR_OPENERS = ("ServerArgs(", "with config:", "non-default args:", "Namespace(")


def _x_repr(text: str, n: int, acc: _Acc) -> None:
    for opener in _REPR_OPENERS:
        pos = text.find(opener)
        if pos < 0:
            continue
        for raw_key, raw_value in _iter_pairs(text, pos + len(opener)):
            key = _arg_aliases().get(raw_key.lower())
            if key is None:
                continue
            value = _clean_arg(key, raw_value)
            if value is not None:
                acc.arg(key, value, n, _PRIO_REPR)


# A JSON member as model config dumps print it, one a line (HF ``Qwen3MoeConfig {``
# followed by ``"hidden_size": 2048,``) or several in one line.
_JSON_MEMBER = lazy(
    r'"([A-Za-z_][A-Za-z0-9_]{0,60})":\s{0,2}(-?[0-9][0-9.eE+-]{0,20}|"[^"]{0,200}")'
)


def _x_json(text: str, n: int, acc: _Acc) -> None:
    for m in _JSON_MEMBER.finditer(text):
        key = _arg_aliases().get(m.group(1).lower())
        if key is None:
            continue
        value = _clean_arg(key, m.group(2))
        if value is not None:
            acc.arg(key, value, n, _PRIO_FLAG)


_FLAG = lazy(r"(?<![\w-])(?:--(?P<long>[A-Za-z][A-Za-z0-9_-]{0,60})|-(?P<short>tp|pp|dp))")
_TOKEN = lazy(r"\"[^\"]{0,300}\"|'[^']{0,300}'|[^\s\"'`]{1,300}")
_PLACEHOLDER = lazy(r"[A-Z][A-Z0-9_]{0,60}|<[^>]{0,60}>|\$\{?\w{1,60}\}?")


# Words that make a flag a suggestion rather than the user's command line: sglang's
# "Please try to increase --mem-fraction-static", "try reducing --max-running-requests
# 32 or --chunked-prefill-size 1024".  Whole words, so "--retry" or "--dataset" pass.
_FLAG_ADVICE = lazy(
    r"\b(?:try|trying|increas\w{0,5}|decreas\w{0,5}|reduc\w{0,5}|lower\w{0,3}|rais\w{0,5}"
    r"|consider\w{0,3}|please|recommend\w{0,4}|adjust\w{0,5}|set)\b"
)
_FLAG_ADVICE_WINDOW = 64


def _x_flags(text: str, n: int, acc: _Acc) -> None:
    # argparse usage/help text lists every flag with a placeholder value.
    if "usage:" in text or "[--" in text:
        return
    for m in _FLAG.finditer(text):
        name = (m.group("long") or m.group("short") or "").lower().replace("-", "_")
        key = _arg_aliases().get(name)
        if key is None:
            continue
        if _FLAG_ADVICE.search(text, max(0, m.start() - _FLAG_ADVICE_WINDOW), m.start()):
            continue
        i = m.end()
        if key in _BOOL_KEYS:
            if i == len(text) or text[i] in " \t\\":
                acc.arg(key, "true", n, _PRIO_FLAG)
            elif text[i] == "=":
                t = _TOKEN.match(text, i + 1)
                value = _clean_arg(key, t.group()) if t else None
                if value is not None:
                    acc.arg(key, value, n, _PRIO_FLAG)
            continue
        if i < len(text) and text[i] == "=":
            i += 1
        elif i < len(text) and text[i] in " \t":
            while i < len(text) and text[i] in " \t":
                i += 1
        else:
            continue  # "--tp-size/--tp:" in an argparse error, "--tp." in prose
        t = _TOKEN.match(text, i)
        if t is None:
            continue
        tok = t.group()
        if tok == "\\" or (tok.startswith("-") and not tok[1:2].isdigit()):
            continue  # the flag had no value: next flag or a line continuation
        if _PLACEHOLDER.fullmatch(tok):
            continue
        value = _clean_arg(key, tok)
        if value is not None:
            acc.arg(key, value, n, _PRIO_FLAG)


_POSITIONAL_MODEL = lazy(
    r"(?:\bvllm[ \t]+serve|(?<![\w-])trtllm-serve(?:[ \t]+serve)?)"
    r"[ \t]+(?P<m>[^\s\-\\][^\s]{0,200})"
)


def _x_positional(text: str, n: int, acc: _Acc) -> None:
    m = _POSITIONAL_MODEL.search(text)
    if m:
        value = _clean_arg("model", m.group("m"))
        if value is not None:
            acc.arg("model", value, n, _PRIO_FLAG)


_ENV_PREFIXES = (
    "NCCL_",
    "CUDA_",
    "NVSHMEM_",
    "SGLANG_",
    "SGL_",
    "VLLM_",
    "TORCH_",
    "PYTORCH_",
    "TRTLLM_",
    "TLLM_",
    "FLASHINFER_",
    "DEEPEP_",
    "DEEP_EP_",
    "NVIDIA_",
    "HIP_",
    "ROCR_",
    "HSA_",
    "UCX_",
    "TRITON_",
)
_ENV = lazy(
    r"(?<![\w$])(?P<k>(?:"
    + "|".join(p[:-1] for p in _ENV_PREFIXES)
    + r")_[A-Z0-9_]{1,60})(?:=| set by environment to )"
    r"(?P<v>\"[^\"]{0,200}\"|'[^']{0,200}'|[^\s;\"')`]{0,200})"
)
# The same variables in YAML (docker-compose, k8s, slurm recipes): "  NCCL_DEBUG: INFO".
_ENV_YAML = lazy(
    r"[ \t]{0,40}-?[ \t]{0,4}(?P<k>(?:"
    + "|".join(p[:-1] for p in _ENV_PREFIXES)
    + r")_[A-Z0-9_]{1,60}):[ \t]{1,10}"
    r"(?P<v>\"[^\"]{0,200}\"|'[^']{0,200}'|[^\s\"']{1,200})[ \t]{0,40}"
)
# Error messages SUGGEST settings: NCCL's "(run with NCCL_DEBUG=INFO for details)",
# torch's "try setting PYTORCH_CUDA_ALLOC_CONF=..." and "consider passing
# CUDA_LAUNCH_BLOCKING=1", vLLM's "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1".
# Those are not the user's configuration.
_ADVICE = (
    "run with",
    "setting",
    "passing",
    "try",
    "consider",
    "set ",
    "recommend",
    "please",
    "fix",
)


def _x_env(text: str, n: int, acc: _Acc) -> None:
    found: list[re.Match[str]] = list(_ENV.finditer(text))
    yaml = _ENV_YAML.fullmatch(text)
    if yaml:
        found.append(yaml)
    for m in found:
        before = text[max(0, m.start() - 32) : m.start()].lower()
        if any(word in before for word in _ADVICE):
            continue
        raw = m.group("v").rstrip(",.")
        if raw.startswith(("<", "$")):
            continue
        name = m.group("k").lower()
        key = _arg_aliases().get(name, name)
        value = _clean_arg(key, raw)
        if value is not None:
            acc.arg(key, value, n, _PRIO_ENV)


# --------------------------------------------------------------------------- GPUs and archs

# Unambiguous product names: accepted bare ("on one RTX 4090", "2x H100").
_GPU_STRONG = (
    r"(?:RTX|GTX)[ ]?(?:PRO[ ])?(?:A?\d{3,4}[DM]?)(?:[ ]?(?:Ti|SUPER|Super))?"
    r"|(?:TITAN|Titan)[ ](?:Xp|X|V|RTX)"
    r"|G[BH]\d{2,3}"
    r"|[HAB](?:100|200|300|800)|L40S?|[VP]100S?"
    r"|MI\d{3}[AXP]?"
    r"|Radeon[ ](?:RX[ ]\d{3,4}|PRO[ ]W\d{4}|Pro[ ]W\d{4}|VII)"
    r"|Jetson(?:[ ](?:AGX|Orin|Xavier|Thor|Nano|NX|TX2)){1,3}"
    r"|Ascend[ ]?\d{3}[A-Z]?\d?"
    r"|DGX[ ]Spark"
)
# Short names that collide with other words (T4, A10, L4, H20): only with a vendor
# prefix or followed by "GPU".
_GPU_WEAK = r"[TL]4|A(?:2|10G?|16|30|40)|[HL]20|K80|P40?|M60"
_GPU_VENDOR = (
    r"(?:NVIDIA|Nvidia)[ ](?:GeForce[ ]|Quadro[ ])?|Tesla[ ]|GeForce[ ]|Quadro[ ]"
    r"|AMD[ ](?:Instinct[ ])?|Instinct[ ]"
)
_GPU_SUFFIX = (
    r"(?:[ -](?:\d{2,3}[ ]?GB?|SXM\d?|PCIe|PCIE|NVL\d{0,2}|HBM\d[e]?|Blackwell|Workstation|Server"
    r"|Max-Q|Edition|Laptop|Ada|Generation|OAM|XTX|XT|3e)(?![\w])){0,6}"
)
_GPU = lazy(
    r"(?<![\w/.-])(?P<name>(?:(?:" + _GPU_VENDOR + r")?(?:" + _GPU_STRONG + r")"
    r"|(?:" + _GPU_VENDOR + r")(?:" + _GPU_WEAK + r")"
    r"|(?:" + _GPU_WEAK + r")(?=[ ](?:GPU|gpu)))(?![\w])" + _GPU_SUFFIX + r")"
)


# sglang/vLLM fused-MoE tuning configs are named after torch.cuda.get_device_name()
# with spaces replaced: ".../configs/E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3,...json".
_DEVICE_NAME = lazy(r"device_name=(?P<name>[A-Za-z][A-Za-z0-9_-]{1,80}?)(?:[,.]|\.json|$)")


def _x_gpus(text: str, n: int, acc: _Acc) -> None:
    names = [m.group("name") for m in _GPU.finditer(text)]
    if "device_name=" in text:
        names.extend(m.group("name").replace("_", " ") for m in _DEVICE_NAME.finditer(text))
    for name in names:
        if name not in acc.gpus:
            acc.gpus[name] = Fact(name, n)


def _add_arch(acc: _Acc, value: str, n: int) -> None:
    if value not in acc.archs:
        acc.archs[value] = Fact(value, n)


def _cc_arch(major: str, minor: str, suffix: str = "") -> str:
    return f"sm_{int(major) * 10 + int(minor)}{suffix}"


_CC_DOTTED = lazy(r"[Cc]apability[:=]?[ ]{0,3}(?:of[ ])?(?P<maj>\d{1,2})\.(?P<min>\d)(?!\d)")
_CC_TUPLE = lazy(r"\((?P<maj>\d{1,2}),[ ]?(?P<min>\d)\)")
_SM = lazy(r"(?<![\w-])(?:sm_?|SM[ ]?)(?P<cc>\d{2,3})(?P<sfx>[af]?)(?![\w])")
_SM_DOTTED = lazy(r"(?<![\w-])SM[ ]?(?P<maj>\d{1,2})\.(?P<min>\d)(?!\d)")
_COMPUTE = lazy(r"(?<![\w])compute_(?P<cc>\d{2,3})(?P<sfx>[af]?)(?![\w])")
_GFX = lazy(r"(?<![\w])gfx(?P<id>\d{3,4}[a-z]?)(?![\w])")
# FlashInfer JIT cache: ~/.cache/flashinfer/<version>/<arch>/cached_ops/... (0.3+);
# the arch directory is the target SM, e.g. 120a.
_FI_CACHE = lazy(
    r"flashinfer/(?:(?P<ver>\d{1,3}\.\d{1,3}\.\d{1,3}(?:\.?(?:post|dev|rc)\d{1,12})?)/)?"
    r"(?P<arch>\d{2,3}[af]?)/"
)


def _x_archs(text: str, n: int, acc: _Acc) -> None:
    # "The current PyTorch install supports CUDA capabilities sm_50 sm_60 ..." is a
    # build list, not this GPU; the GPU's own arch is on the line before.
    if "capabilities" in text or "ARCH_LIST" in text:
        return
    if "apability" in text:
        for m in _CC_DOTTED.finditer(text):
            _add_arch(acc, _cc_arch(m.group("maj"), m.group("min")), n)
        for m in _CC_TUPLE.finditer(text):
            _add_arch(acc, _cc_arch(m.group("maj"), m.group("min")), n)
    for m in _SM.finditer(text):
        _add_arch(acc, f"sm_{int(m.group('cc'))}{m.group('sfx')}", n)
    if "SM" in text:
        for m in _SM_DOTTED.finditer(text):
            _add_arch(acc, _cc_arch(m.group("maj"), m.group("min")), n)
    if "compute_" in text:
        for m in _COMPUTE.finditer(text):
            _add_arch(acc, f"sm_{int(m.group('cc'))}{m.group('sfx')}", n)
    if "gfx" in text:
        for m in _GFX.finditer(text):
            _add_arch(acc, f"gfx{m.group('id')}", n)
    if "flashinfer/" in text:
        for m in _FI_CACHE.finditer(text):
            arch = m.group("arch")
            sfx = arch[-1] if arch[-1] in "af" else ""
            _add_arch(acc, f"sm_{int(arch[: len(arch) - len(sfx)])}{sfx}", n)
            if m.group("ver"):
                acc.version("flashinfer", m.group("ver"), n, _PRIO_NAMED)


# --------------------------------------------------------------------------- versions

# Spelling (lower-case, '_' == '-') -> canonical package key.  Longest first in the regex.
_PKG_ALIASES: dict[str, str] = {
    "torch": "torch",
    "pytorch": "torch",
    "cuda": "cuda",
    "cuda runtime": "cuda",
    "cuda driver": "driver",
    "nvidia driver": "driver",
    "driver": "driver",
    "flashinfer": "flashinfer",
    "flashinfer-python": "flashinfer",
    "sglang": "sglang",
    "sgl-kernel": "sgl_kernel",
    "vllm": "vllm",
    "vllm api server": "vllm",
    "tensorrt-llm": "tensorrt_llm",
    "trt-llm": "tensorrt_llm",
    "triton": "triton",
    "nccl": "nccl",
    "nvidia-nccl-cu11": "nccl",
    "nvidia-nccl-cu12": "nccl",
    "nvidia-nccl-cu13": "nccl",
    "deep-ep": "deepep",
    "deepep": "deepep",
    "nvshmem": "nvshmem",
    "nvidia-nvshmem-cu12": "nvshmem",
    "nvidia-nvshmem-cu13": "nvshmem",
    "cutlass": "cutlass",
    "nvidia-cutlass": "cutlass",
    "nvidia-cutlass-dsl": "cutlass_dsl",
    "transformers": "transformers",
    "python": "python",
}


def _alias_pattern(alias: str) -> str:
    # "deep-ep" also matches "deep_ep" (pip normalises both); a space is one space.
    return "".join("[-_]" if c == "-" else "[ ]" if c == " " else re.escape(c) for c in alias)


_VER = (
    r"(?P<ver>\d{1,4}(?:\.\d{1,8}){1,4}"
    r"(?:[-.]?(?:post|dev|rc|a|b)\d{0,12}){0,3}"
    r"(?:\+[A-Za-z0-9]{1,40}(?:\.[A-Za-z0-9]{1,40}){0,6})?)(?!\w|\.\d)"
)
_PKG_VERSION = lazy(
    r"(?<![\w.+-])(?P<pkg>(?i:"
    + "|".join(_alias_pattern(a) for a in sorted(_PKG_ALIASES, key=len, reverse=True))
    + r"))(?:\[[\w,-]{1,60}\])?"
    # At least one separator character: "python3.11/" is a path, read by _PY_PATH.
    r"(?P<sep>-|(?=[ \t:=])[ \t]{0,40}(?:(?i:version)[ \t]{0,4}(?:is[ \t]{1,4})?)?"
    r"(?:==|:|=)?[ \t]{0,40}v?)" + _VER
)
# A requirement or a suggestion names a version the user does NOT run:
# pip's "vllm 0.10.1 requires torch==2.7.1", "pip install vllm==0.10.2", "fixed in 0.6.4".
_NOT_INSTALLED = (
    "requir",
    "need",
    "install",
    "upgrade",
    "fixed in",
    "fix in",
    "update to",
    "instead of",
)

_NVCC = lazy(r"release[ ](?P<rel>\d{1,3}\.\d{1,3}),[ ]V(?P<ver>\d{1,3}(?:\.\d{1,6}){1,3})")
_VLLM_BANNER = lazy(r"LLM engine[ ]\(v(?P<ver>\d{1,4}(?:\.\d{1,8}){1,4}[\w.+]{0,40})\)")
_TORCH_CUDA = lazy(r"CUDA used to build PyTorch:[ ]{0,4}(?P<ver>\d{1,3}\.\d{1,3})")
_TORCH_LOCAL_CU = lazy(r"\+cu(?P<maj>\d{2})(?P<min>\d)$")
# torch's "The NVIDIA driver on your system is too old (found version 12080)": the
# CUDA version the driver supports, encoded as 1000*major + 10*minor.
_FOUND_VERSION = lazy(r"driver on your system is too old \(found version (?P<v>\d{4,6})\)")
# "python3.11/site-packages", and "python3.10: <assert>" from an interpreter's abort.
_PY_PATH = lazy(r"(?<![\w])python(?P<ver>3\.\d{1,2})(?![\w.])")


def _x_versions(text: str, n: int, acc: _Acc) -> None:
    for m in _PKG_VERSION.finditer(text):
        before = text[max(0, m.start() - 24) : m.start()].lower()
        if any(word in before for word in _NOT_INSTALLED):
            continue
        key = _PKG_ALIASES[m.group("pkg").lower().replace("_", "-")]
        ver = m.group("ver")
        if key == "cuda" and ("Driver Version" in text or "NVIDIA-SMI" in text):
            key = "cuda_driver"  # nvidia-smi: the newest CUDA the driver supports
        prio = _PRIO_PATH if m.group("sep") == "-" else _PRIO_NAMED
        acc.version(key, ver, n, prio)
        if key == "torch":
            cu = _TORCH_LOCAL_CU.search(ver)
            if cu:
                acc.version(
                    "torch_cuda", f"{int(cu.group('maj'))}.{cu.group('min')}", n, _PRIO_PATH
                )
    if "release" in text:
        m2 = _NVCC.search(text)
        if m2:
            acc.version("cuda", m2.group("ver"), n, _PRIO_TOOL)
    if "LLM engine" in text:
        m2 = _VLLM_BANNER.search(text)
        if m2:
            acc.version("vllm", m2.group("ver"), n, _PRIO_TOOL)
    if "CUDA used to build" in text:
        m2 = _TORCH_CUDA.search(text)
        if m2:
            acc.version("torch_cuda", m2.group("ver"), n, _PRIO_NAMED)
    if "found version" in text:
        m2 = _FOUND_VERSION.search(text)
        if m2:
            code = int(m2.group("v"))
            acc.version("cuda_driver", f"{code // 1000}.{code % 1000 // 10}", n, _PRIO_NAMED)
    if "python3." in text:
        m2 = _PY_PATH.search(text)
        if m2:
            acc.version("python", m2.group("ver"), n, _PRIO_PATH)


# --------------------------------------------------------------------------- readiness


def ready_phrases() -> tuple[str, ...]:
    """Phrases printed once a server can take requests (kb/vocab/ready.toml)."""
    from diagnose.vocab import vocabulary

    return vocabulary("ready").texts


def _x_ready(text: str, n: int, acc: _Acc) -> None:
    for phrase in ready_phrases():
        if phrase in text and phrase not in acc.ready:
            acc.ready[phrase] = Fact(phrase, n)


# --------------------------------------------------------------------------- memory

# Binary multiples for every unit.  torch prints GiB/MiB; sglang and vLLM divide by
# 1 << 30 and label the result "GB" (sglang utils.get_available_gpu_memory, vLLM's
# GiB_bytes), nvidia-smi's "MiB" is binary too.  Reading "GB" as 10**9 would be off
# by 7 % for every tool in scope.
_UNIT = {
    "": 1,
    "b": 1,
    "bytes": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}
_SIZE = r"(?P<num>\d{1,15}(?:\.\d{1,6})?)[ ]?(?P<unit>[KMGTkmgt]i?B|bytes|B|[KMGT])?(?![\w])"


def _to_bytes(num: str, unit: str | None, default_unit: str = "") -> str | None:
    mult = _UNIT.get((unit or default_unit).lower())
    if mult is None:
        return None
    # decimal (~2 ms to import) only for a size line; exact, so "1.1 GB" never rounds wrong.
    from decimal import Decimal, InvalidOperation

    try:
        return str(int((Decimal(num) * mult).to_integral_value()))
    except (InvalidOperation, ValueError):
        return None


def _size(pattern: str) -> LazyPattern:
    return lazy(pattern.replace("SIZE", _SIZE))


# (literal gate, regex with a SIZE or a count group, memory key or None = derive, default unit)
_MEM_SIZE_RULES: tuple[tuple[str, LazyPattern, str, str], ...] = (
    ("Tried to allocate", _size(r"Tried to allocate SIZE"), "requested", ""),
    ("total capacity", _size(r"total capacity of SIZE"), "total", ""),
    ("total capacity", _size(r"SIZE total capacity"), "total", ""),
    ("is free", _size(r"of which SIZE is free"), "free", ""),
    ("free;", _size(r"SIZE free;"), "free", ""),
    ("memory in use", _size(r"this process has SIZE memory in use"), "process_used", ""),
    ("allocated by PyTorch", _size(r"SIZE is allocated by PyTorch"), "torch_allocated", ""),
    ("already allocated", _size(r"SIZE already allocated"), "torch_allocated", ""),
    (
        "reserved by PyTorch but unallocated",
        _size(r"SIZE is reserved by PyTorch but unallocated"),
        "torch_reserved_unallocated",
        "",
    ),
    ("reserved in total", _size(r"SIZE reserved in total by PyTorch"), "torch_reserved", ""),
    # sglang model_runner / memory_pool: "avail mem=50.99 GB" is cudaMemGetInfo's free.
    ("avail mem=", _size(r"avail mem=SIZE"), "free", "GB"),
    ("available_gpu_mem=", _size(r"available_gpu_mem=SIZE"), "free", "GB"),
    ("K size:", _size(r"K size: SIZE"), "kv_k", "GB"),
    ("V size:", _size(r"V size: SIZE"), "kv_v", "GB"),
    # vLLM: "Loading model weights took 14.99 GB", "Model loading took 15.2 GiB and 5.3 s",
    # memory profiling "model weights take 14.99GiB ... reserved for KV Cache is 54.87GiB".
    ("weights took", _size(r"weights took SIZE"), "weights", "GB"),
    ("Model loading took", _size(r"Model loading took SIZE"), "weights", "GB"),
    ("weights take", _size(r"weights take SIZE"), "weights", "GB"),
    ("total_gpu_memory", _size(r"total_gpu_memory \(SIZE\)"), "total", "GB"),
    ("reserved for KV Cache", _size(r"reserved for KV Cache is SIZE"), "kv_cache", "GB"),
    ("Available KV cache memory", _size(r"Available KV cache memory: SIZE"), "kv_cache", "GB"),
    ("KV cache is needed", _size(r"\(SIZE KV cache is needed"), "kv_cache_needed", "GB"),
    ("available KV cache memory (", _size(r"available KV cache memory \(SIZE\)"), "kv_cache", "GB"),
    # XLA/JAX: "Out of memory while trying to allocate 2147483648 bytes."
    ("trying to allocate", _size(r"while trying to allocate SIZE"), "requested", ""),
    # llama.cpp: "allocating 1234.56 MiB on device 0: cudaMalloc failed: out of memory"
    ("cudaMalloc failed", _size(r"allocating SIZE on device"), "requested", ""),
    # ollama: host memory, not GPU memory
    ("more system memory", _size(r"more system memory \(SIZE\)"), "host_requested", ""),
    ("than is available", _size(r"than is available \(SIZE\)"), "host_available", ""),
)
_MEM_COUNT_RULES: tuple[tuple[str, LazyPattern, str], ...] = (
    ("#tokens:", lazy(r"KV Cache is allocated\. #tokens: (?P<num>\d{1,15})"), "kv_tokens"),
    ("max_total_num_tokens=", lazy(r"max_total_num_tokens=(?P<num>\d{1,15})"), "kv_tokens"),
    (
        "GPU KV cache size",
        lazy(r"GPU KV cache size: (?P<num>\d{1,3}(?:,\d{3}){0,5}|\d{1,15}) tokens"),
        "kv_tokens",
    ),
    ("stored in KV cache", lazy(r"stored in KV cache \((?P<num>\d{1,15})\)"), "kv_tokens"),
    ("GPU blocks", lazy(r"# GPU blocks: (?P<num>\d{1,15})"), "gpu_blocks"),
)
_MEM_USAGE = _size(r"mem usage=SIZE")
_SMI_MEM = lazy(r"(?P<used>\d{1,9})MiB[ ]{0,4}/[ ]{0,4}(?P<total>\d{1,9})MiB")
_MAX_SEQ = lazy(r"max seq len \((?P<num>\d{1,9})\)")
_GMU = lazy(r"gpu_memory_utilization \((?P<num>[01](?:\.\d{1,4})?)\)")


def _x_memory(text: str, n: int, acc: _Acc) -> None:
    for lit, rx, key, default in _MEM_SIZE_RULES:
        if lit in text:
            m = rx.search(text)
            if m:
                value = _to_bytes(m.group("num"), m.group("unit"), default)
                if value is not None:
                    acc.memory[key] = Fact(value, n)
    for lit, rx, key in _MEM_COUNT_RULES:
        if lit in text:
            m = rx.search(text)
            if m:
                acc.memory[key] = Fact(m.group("num").replace(",", ""), n)
    if "mem usage=" in text:
        m = _MEM_USAGE.search(text)
        if m:
            # sglang prints "mem usage" after weights and after CUDA-graph capture.
            if "Load weight end" in text:
                key = "weights"
            elif "graph" in text:
                key = "cuda_graph"
            else:
                key = "mem_usage"
            value = _to_bytes(m.group("num"), m.group("unit"), "GB")
            if value is not None:
                acc.memory[key] = Fact(value, n)
    if "MiB /" in text or "MiB/" in text:
        m = _SMI_MEM.search(text)
        if m:
            acc.memory["used"] = Fact(str(int(m.group("used")) << 20), n)
            acc.memory["total"] = Fact(str(int(m.group("total")) << 20), n)
    if "max seq len (" in text:
        m = _MAX_SEQ.search(text)
        if m:
            acc.arg("max_model_len", m.group("num"), n, _PRIO_DERIVED)
    if "gpu_memory_utilization (" in text:
        m = _GMU.search(text)
        if m:
            acc.arg("gpu_memory_utilization", m.group("num"), n, _PRIO_DERIVED)


# --------------------------------------------------------------------------- dispatch

_GPU_LITERALS = (
    "RTX", "GTX", "TITAN", "Titan", "GB1", "GB2", "GB3", "GH2", "H100", "H200", "H300",
    "H800", "A100", "A200", "A300", "A800", "B100", "B200", "B300", "B800", "L40", "V100",
    "P100", "MI1", "MI2", "MI3", "MI4", "Radeon", "Jetson", "Ascend",
    "T4", "L4", "A2", "A10", "A16", "A30", "A40", "H20", "L20", "K80", "P4", "M60",
    "DGX Spark", "device_name=",
)  # fmt: skip

_ARCH_LITERALS = (
    "apability",
    "sm_",
    "SM",
    "sm1",
    "sm7",
    "sm8",
    "sm9",
    "compute_",
    "gfx",
    "flashinfer/",
)
_VERSION_LITERALS = (
    "torch", "Torch", "TORCH", "PyTorch", "vllm", "vLLM", "VLLM", "sglang", "SGLang", "SGLANG",
    "sgl_kernel", "sgl-kernel", "flashinfer", "FlashInfer", "FLASHINFER", "Flashinfer",
    "TensorRT", "tensorrt", "TRT-LLM", "trt-llm", "triton", "Triton", "nccl", "NCCL",
    "deep_ep", "deep-ep", "DeepEP", "deepep", "DEEPEP", "nvshmem", "NVSHMEM", "cutlass",
    "CUTLASS", "Cutlass", "transformers", "Transformers", "python", "Python", "CUDA", "cuda",
    "Cuda", "Driver", "driver", "release", "LLM engine",
)  # fmt: skip
_MEMORY_LITERALS = (
    *sorted({lit for lit, _, _, _ in _MEM_SIZE_RULES} | {lit for lit, _, _ in _MEM_COUNT_RULES}),
    "mem usage=",
    "MiB /",
    "MiB/",
    "max seq len (",
    "gpu_memory_utilization (",
)

_Extractor = Callable[[str, int, _Acc], None]

# Each extractor with the literals that gate it.  A literal must occur in every line
# the extractor can take a fact from; tests check this on every fixture.
_Extractors = tuple[tuple[tuple[str, ...], _Extractor], ...]


def _extractors() -> _Extractors:
    """The extractor table for the readiness phrases and GPU names in force (kb data)."""
    return _extractors_for(ready_phrases(), kb_gpu_names())


def kb_gpu_names() -> tuple[str, ...]:
    """Product names of kb/gpus.toml as nvidia-smi and torch print them (and their aliases).

    The hand-written pattern above reads informal spellings ("2x H100", "RTX 5090"); these
    exact names make a GPU added to the kb recognised with no code change.  One-word
    aliases without a digit ("Thor") are left to the pattern: alone they are ordinary words.
    """
    from diagnose.kb import load_kb

    return _names_of(load_kb())


@lru_cache(maxsize=4)
def _names_of(kb: Any) -> tuple[str, ...]:
    names = {s for g in kb.gpus for s in (g.name, *g.aliases) if _distinctive(s.strip())}
    return tuple(sorted(names, key=lambda s: (-len(s), s)))


def _distinctive(name: str) -> bool:
    """A name that cannot be an ordinary word: several words, or a model number ("H20e")."""
    return " " in name or (len(name) >= 3 and any(c.isdigit() for c in name))


def _x_named_gpus(names: tuple[str, ...]) -> _Extractor:
    def extract(text: str, n: int, acc: _Acc) -> None:
        for name in names:
            at = text.find(name)
            if at < 0:
                continue
            end = at + len(name)
            if (end < len(text) and text[end].isalnum()) or (at and text[at - 1].isalnum()):
                continue  # "NVIDIA A10" inside "NVIDIA A10G"
            if not any(name in known for known in acc.gpus):  # the pattern read it already
                acc.gpus[name] = Fact(name, n)
            return  # the longest name that occurs: "RTX 4090 D" and not also "RTX 4090"

    return extract


@lru_cache(maxsize=4)
def _extractors_for(ready: tuple[str, ...], gpu_names: tuple[str, ...] = ()) -> _Extractors:
    named = ((gpu_names, _x_named_gpus(gpu_names)),) if gpu_names else ()
    return (*_FIXED_EXTRACTORS[:7], (ready, _x_ready), *named, *_FIXED_EXTRACTORS[7:])


_FIXED_EXTRACTORS: _Extractors = (
    (_REPR_OPENERS, _x_repr),
    (("--", "-tp", "-pp", "-dp"), _x_flags),
    (("vllm serve", "trtllm-serve"), _x_positional),
    (_ENV_PREFIXES, _x_env),
    (_GPU_LITERALS, _x_gpus),
    (_ARCH_LITERALS, _x_archs),
    (_VERSION_LITERALS, _x_versions),
    (_MEMORY_LITERALS, _x_memory),
    (('":',), _x_json),
)


def _minimal(literals: Iterable[str]) -> tuple[bytes, ...]:
    # A literal that contains another is implied by it; keep the shorter one only.
    uniq = sorted(set(literals), key=lambda s: (len(s), s))
    kept: list[str] = []
    for lit in uniq:
        if not any(k in lit for k in kept):
            kept.append(lit)
    return tuple(sorted(k.encode() for k in kept))


if TYPE_CHECKING:
    CONTEXT_LITERALS: tuple[bytes, ...]
    """Case-sensitive substrings one of which every fact-bearing line contains (UTF-8 bytes)."""


def __getattr__(name: str) -> Any:
    """Compute :data:`CONTEXT_LITERALS` (and ``READY_PHRASES``) on use (PEP 562).

    Only big-file scans and streams need it, and deduplicating ~150 literals is
    quadratic (~0.6 ms, paid by every CLI start when it ran at import).  Both follow the
    readiness vocabulary in force (kb data, ``DIAGNOSE_KB_PATH``), so neither is frozen.
    """
    if name == "READY_PHRASES":
        return ready_phrases()
    if name != "CONTEXT_LITERALS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _context_literals(ready_phrases(), kb_gpu_names())


@lru_cache(maxsize=4)
def _context_literals(ready: tuple[str, ...], gpus: tuple[str, ...]) -> tuple[bytes, ...]:
    return _minimal(lit for lits, _ in _extractors_for(ready, gpus) for lit in lits)


def _python_gate(text: str, table: _Extractors) -> list[int]:
    return [i for i, (lits, _) in enumerate(table) if any(lit in text for lit in lits)]


#: The RE2 gate of each extractor table once built (``None`` where RE2 is missing).
_GATE: dict[_Extractors, Callable[[str], list[int] | None] | None] = {}


def _re2_gate(table: _Extractors) -> Callable[[str], list[int] | None] | None:
    """The RE2 gate of ``table``, built on first call and kept for the process."""
    if table not in _GATE:
        _GATE[table] = _build_re2_gate(table)
    return _GATE[table]


def _build_re2_gate(table: _Extractors) -> Callable[[str], list[int] | None] | None:
    """One RE2 multi-pattern pass per line: which extractors' literals occur.

    A Python ``any(lit in text ...)`` over ~150 literals costs ~15 us a line; an
    RE2 set answers for all extractors in one linear DFA pass (~1.5 us; see
    bench/context_speed.py).  google-re2 is a dependency; imported lazily so
    importing this module stays cheap, and the Python gate covers its absence.
    """
    try:
        import re2
    except ImportError:  # pragma: no cover - re2 is a declared dependency
        return None
    gate = re2.Set.SearchSet()
    for lits, _ in table:
        gate.Add("|".join(re.escape(lit) for lit in lits))
    gate.Compile()
    match: Callable[[str], list[int] | None] = gate.Match
    return match


#: Lines gated in Python before the RE2 set is built: a pasted trace is done before
#: importing RE2 and compiling the set (~3 ms) would pay off.  Once built (a long log,
#: or an earlier log in a serving process) the set gates every line.
PYTHON_GATE_LINES = 64


def extract_context(lines: Iterable[LogLine]) -> LogContext:
    """Read every line once and return the log-wide facts; never raises, linear time."""
    acc = _Acc()
    table = _extractors()
    gate = _GATE.get(table)
    for seen, line in enumerate(lines):
        if seen == PYTHON_GATE_LINES and gate is None:
            gate = _re2_gate(table)
        text = line.text
        if not isinstance(text, str) or not text:
            continue
        if len(text) > _MAX_SCAN:
            text = text[:_MAX_SCAN]
        if gate is None:
            hits: list[int] | None = _python_gate(text, table)
        else:
            try:
                hits = gate(text)
            except UnicodeError:  # lone surrogates from a surrogateescape decode
                hits = _python_gate(text, table)
        for i in sorted(hits or ()):
            table[i][1](text, line.number, acc)
    return acc.freeze()
