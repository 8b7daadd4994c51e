"""Tests for the knowledge base: completeness of kb/, GPU facts, strict validation, name lookup."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.errors import RuleFileError
from diagnose.kb import KnowledgeBase, load_kb, mask_signature
from diagnose.tomlsource import load_toml

TAXONOMY = (
    "smem-overflow",
    "tactic-skipped",
    "arch-unsupported",
    "a2a-buffer-oom",
    "a2a-buffer-config",
    "cuda-oom",
    "kv-cache-oom",
    "illegal-memory-access",
    "nccl-timeout",
    "nccl-error",
    "cublas-error",
    "cuda-version-mismatch",
    "jit-build-failure",
    # taxonomy v2 (../shared/corpus/README.md, December 2026)
    "abi-mismatch",
    "dependency-mismatch",
    "host-oom",
    "gpu-hardware-fault",
    "gpu-unavailable",
    "shape-unsupported",
    "workspace-overflow",
    "cuda-graph-capture",
    "config-error",
    "model-load-error",
    "unknown",
)
REF_ID = re.compile(r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#\d+$")
KB_DIR = Path(__file__).resolve().parents[1] / "kb"


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="module")
def shared() -> Path:
    path = Path(__file__).resolve().parents[1].parent / "shared"
    if not (path / "corpus" / "dev").is_dir():
        pytest.skip("../shared corpus not available")
    return path


# --------------------------------------------------------------------------- causes


@pytest.mark.parametrize("cause_id", TAXONOMY)
def test_every_taxonomy_cause_is_complete(kb: KnowledgeBase, cause_id: str) -> None:
    cause = kb.cause(cause_id)
    assert cause.title and cause.summary and len(cause.why) > 100
    assert cause.summary.count(". ") == 0, "summary should be one sentence"
    assert cause.fixes and all(f.title and f.detail for f in cause.fixes)
    assert cause.references and all(REF_ID.match(r.id) for r in cause.references)
    assert all(r.cause == cause_id for r in cause.references)
    assert cause.verify and cause.evidence_to_collect
    assert Path(cause.path).stem == cause_id


def test_fatality_defaults(kb: KnowledgeBase) -> None:
    assert not kb.cause("tactic-skipped").fatal_by_default
    assert not kb.cause("unknown").fatal_by_default
    assert kb.cause("smem-overflow").fatal_by_default


def test_fixes_carry_concrete_settings(kb: KnowledgeBase) -> None:
    def settings(cause_id: str) -> str:
        return " ".join(" ".join(f.flags + f.env + f.config) for f in kb.cause(cause_id).fixes)

    assert "--mem-fraction-static" in settings("cuda-oom")
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in settings("cuda-oom")
    assert "gpu_memory_utilization" in settings("kv-cache-oom")
    assert "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK" in settings("a2a-buffer-config")
    assert "NVSHMEM_SYMMETRIC_SIZE" in settings("a2a-buffer-oom")
    assert "NCCL_DEBUG=INFO" in settings("nccl-timeout")
    assert "TORCH_CUDA_ARCH_LIST" in settings("arch-unsupported")


def test_signatures_are_masked_and_short(kb: KnowledgeBase) -> None:
    for cause in kb.causes:
        for ref in cause.references:
            assert len(ref.signature) <= 160
            assert mask_signature(ref.signature) == ref.signature


def test_unknown_cause_raises_keyerror(kb: KnowledgeBase) -> None:
    with pytest.raises(KeyError, match="no-such-cause"):
        kb.cause("no-such-cause")


def test_version_is_calver_plus_content_hash(kb: KnowledgeBase) -> None:
    assert re.fullmatch(r"\d{4}\.\d{2}\.\d{2}\+[0-9a-f]{12}", kb.version)
    assert load_kb() is kb  # the default knowledge base is cached


def test_version_hash_follows_content(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    _write(extra / "causes" / "my-cause.toml", _cause_text("my-cause"))
    first = load_kb([extra]).version
    _write(extra / "causes" / "my-cause.toml", _cause_text("my-cause", title="Other title"))
    assert load_kb([extra]).version != first
    assert first.split("+")[0] == load_kb().version.split("+")[0]


def test_extra_dir_adds_a_cause(tmp_path: Path) -> None:
    _write(tmp_path / "causes" / "my-cause.toml", _cause_text("my-cause"))
    kb = load_kb([tmp_path])
    assert kb.cause("my-cause").references[0].id == "example/project#12"
    assert len(kb.causes) == len(load_kb().causes) + 1


def test_similarity_ranks_the_matching_reference_first(kb: KnowledgeBase) -> None:
    line = (
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
        "Required: 98304, Hardware limit: 65536. Reducing block sizes may help."
    )
    ref, score = kb.nearest_references(line)[0]
    assert ref.cause == "smem-overflow" and score > 0.9
    assert kb.nearest_references("INFO: Uvicorn running on http://0.0.0.0:30000") == []


def test_mask_signature() -> None:
    text = "deep_ep.cpp:1025 at 0x7f3a2b with /opt/x/y.so, sm_120a e4m3 1x2x1 Required: 102400."
    assert mask_signature(text) == (
        "deep_ep.cpp:<N> at <ADDR> with <PATH>, sm_120a e4m3 1x2x1 Required: <N>."
    )
    assert mask_signature(mask_signature(text)) == mask_signature(text)


# --------------------------------------------------------------------------- GPU facts


def test_gpu_table_covers_every_capability(kb: KnowledgeBase) -> None:
    wanted = ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0"]
    for cap in [*wanted, "12.0", "12.1", "10.1"]:
        arch = kb.arch_for_capability(cap)
        assert arch is not None, cap
        assert arch.source("smem") and arch.source("registers") and arch.source("products")
    assert kb.arch_for_capability("10.1") is kb.arch_for_capability("11.0")


@pytest.mark.parametrize(
    ("arch_id", "per_sm", "optin"),
    [
        # Spot checks against gpu-facts.md §1.1 (libcu++ arch_traits, CUTLASS constants).
        ("sm_70", 98304, 98304),
        ("sm_75", 65536, 65536),
        ("sm_80", 167936, 166912),
        ("sm_86", 102400, 101376),
        ("sm_89", 102400, 101376),
        ("sm_90", 233472, 232448),
        ("sm_100", 233472, 232448),
        ("sm_110", 233472, 232448),
        ("sm_120", 102400, 101376),
        ("sm_121", 102400, 101376),
    ],
)
def test_shared_memory_facts(kb: KnowledgeBase, arch_id: str, per_sm: int, optin: int) -> None:
    arch = kb.arch(arch_id)
    assert arch is not None
    assert (arch.smem_per_sm, arch.smem_per_block_optin) == (per_sm, optin)
    assert arch.smem_per_sm - arch.smem_per_block_optin == arch.smem_reserved_per_block
    assert arch.registers_per_sm == 65536 and arch.smem_default_per_block == 49152


def test_sm120_opt_in_is_99_kib(kb: KnowledgeBase) -> None:
    arch = kb.arch_for_capability("12.0")
    assert arch is not None and arch.smem_per_block_optin == 99 * 1024 == 101376
    assert arch.max_threads_per_sm == 1536


@pytest.mark.parametrize(
    ("spelling", "arch"),
    [
        ("sm_120a", "sm_120"),
        ("SM121", "sm_121"),
        ("compute_90", "sm_90"),
        ("sm_101", "sm_110"),
        ("120", "sm_120"),
        ("sm_61", None),
        ("nonsense", None),
    ],
)
def test_arch_lookup(kb: KnowledgeBase, spelling: str, arch: str | None) -> None:
    found = kb.arch(spelling)
    assert (found.arch if found else None) == arch


@pytest.mark.parametrize(
    ("name", "arch"),
    [
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_120"),
        ("RTX PRO 6000", "sm_120"),
        ("2x RTX PRO 6000 Blackwell Max-Q", "sm_120"),
        ("rtx 5090", "sm_120"),
        ("NVIDIA GeForce RTX 5060", "sm_120"),
        ("RTX 50-series (5080/5090)", "sm_120"),
        ("GB10", "sm_121"),
        ("NVIDIA GB10", "sm_121"),
        ("DGX Spark GB10", "sm_121"),
        ("H200", "sm_90"),
        ("H200 (p5en.48xlarge)", "sm_90"),
        ("NVIDIA H100 80GB HBM3", "sm_90"),
        ("H20 141GB (H20-3e)", "sm_90"),
        ("NVIDIA_H20-3e", "sm_90"),
        ("H800", "sm_90"),
        ("NVIDIA GeForce RTX 4090", "sm_89"),
        ("RTX4090", "sm_89"),
        ("2x L4", "sm_89"),
        ("NVIDIA L40S", "sm_89"),
        ("RTX 6000 Ada", "sm_89"),
        ("NVIDIA A10", "sm_86"),
        ("RTX A6000 48GB", "sm_86"),
        ("RTX 3090 24G", "sm_86"),
        ("NVIDIA 3080 with 16GB of memory", "sm_86"),
        ("A100 80GB", "sm_80"),
        ("NVIDIA A100-SXM4-40GB", "sm_80"),
        ("Jetson AGX Orin", "sm_87"),
        ("Tesla T4", "sm_75"),
        ("RTX 2080 Ti 22G", "sm_75"),
        ("Quadro RTX 6000", "sm_75"),
        ("8x Tesla V100S", "sm_70"),
        ("B200", "sm_100"),
        ("GB200 / GB300", "sm_100"),  # two GPUs named: the first one wins
        ("NVIDIA GB300", "sm_103"),
        ("RTX PRO 6000 Blakwell", "sm_120"),  # typo in a word, not in the model number
        ("sm_120", "sm_120"),
        # Unknown, ambiguous or not NVIDIA: no guess.
        ("RTX 6000", None),  # Quadro (7.5), Ada (8.9) or RTX PRO (12.0)?
        ("Titan Xp", None),
        ("AMD Instinct MI300", None),
        ("Ascend A3 NPU", None),
        ("Google Colab GPU", None),
        ("", None),
    ],
)
def test_arch_for_gpu(kb: KnowledgeBase, name: str, arch: str | None) -> None:
    found = kb.arch_for_gpu(name)
    assert (found.arch if found else None) == arch


def test_model_numbers_never_blur(kb: KnowledgeBase) -> None:
    pairs = [("A10", "A100"), ("L4", "L40"), ("H20", "H200"), ("B200", "GB200")]
    for short, long in pairs:
        a, b = kb.gpu_for_name(short), kb.gpu_for_name(long)
        assert a is not None and b is not None and a.name != b.name


def test_corpus_gpu_labels_resolve_to_their_arch(kb: KnowledgeBase, shared: Path) -> None:
    """Every labelled GPU whose arch is in our table resolves to that arch."""
    checked = 0
    for label in sorted((shared / "corpus" / "dev").glob("*.toml")):
        data = load_toml(label).data
        gpu, arch = data.get("gpu", ""), data.get("arch", "")
        if not gpu or kb.arch(arch) is None:
            continue
        found = kb.arch_for_gpu(gpu)
        assert found is not None and found.arch == arch, (label.name, gpu, arch)
        checked += 1
    assert checked >= 20


# --------------------------------------------------------------------------- validation


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _cause_text(cause_id: str, title: str = "A test cause", extra: str = "") -> str:
    return f'''id = "{cause_id}"
title = "{title}"
summary = "One sentence."
why = "Because."
fatal_by_default = true
verify = ["rerun"]
evidence_to_collect = ["the log"]
{extra}
[[fixes]]
title = "Do the thing"
detail = "Details."
flags = ["--some-flag 1"]

[[references]]
id = "example/project#12"
url = "https://github.com/example/project/issues/12"
title = "An example thread"
signature = "Something failed at <PATH>:<N>"
'''


def _error(tmp_path: Path, name: str, text: str) -> RuleFileError:
    _write(tmp_path / "causes" / name, text)
    with pytest.raises(RuleFileError) as info:
        load_kb([tmp_path])
    return info.value


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_unknown_field_names_file_line_field(tmp_path: Path) -> None:
    text = _cause_text("my-cause", extra='severity = "high"\n')
    err = _error(tmp_path, "my-cause.toml", text)
    assert err.path.endswith("my-cause.toml") and err.field == "severity"
    assert err.line == _line_of(text, "severity") == 8
    assert f"my-cause.toml:{err.line}: field 'severity'" in str(err)


def test_wrong_type_is_reported_at_its_line(tmp_path: Path) -> None:
    text = _cause_text("my-cause").replace("fatal_by_default = true", 'fatal_by_default = "yes"')
    err = _error(tmp_path, "my-cause.toml", text)
    assert (err.field, err.line) == ("fatal_by_default", 5)
    assert "true or false" in err.message


def test_missing_field_in_array_entry_points_at_its_table(tmp_path: Path) -> None:
    text = _cause_text("my-cause").replace('detail = "Details."\n', "")
    err = _error(tmp_path, "my-cause.toml", text)
    assert err.field == "fixes[0].detail"
    assert err.line == _line_of(text, "[[fixes]]")


def test_id_must_match_file_stem(tmp_path: Path) -> None:
    err = _error(tmp_path, "other-name.toml", _cause_text("my-cause"))
    assert (err.field, err.line) == ("id", 1)
    assert "other-name" in err.message


def test_duplicate_cause_id_is_rejected(tmp_path: Path) -> None:
    err = _error(tmp_path, "cuda-oom.toml", _cause_text("cuda-oom"))
    assert err.field == "id" and "duplicate" in err.message


def test_malformed_reference_id_and_unmasked_signature(tmp_path: Path) -> None:
    text = _cause_text("my-cause").replace('"example/project#12"', '"example/project 12"')
    err = _error(tmp_path / "a", "my-cause.toml", text)
    assert (err.field, err.line) == ("references[0].id", _line_of(text, "project 12"))
    text = _cause_text("my-cause").replace("<PATH>:<N>", "/opt/x.py:12")
    err = _error(tmp_path / "b", "my-cause.toml", text)
    assert err.field == "references[0].signature" and "<PATH>:<N>" in err.message


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    err = _error(tmp_path, "my-cause.toml", 'id = "my-cause"\ntitle = \n')
    assert err.line == 2 and "invalid TOML" in err.message


def test_broken_gpu_entry_names_file_line_field(tmp_path: Path) -> None:
    text = '[[gpu]]\nname = "NVIDIA Imaginary 9000"\ncapability = "42.0"\nmemory_gb = [8]\n'
    text += 'source = "https://example.com"\nmemory_source = "https://example.com"\n'
    _write(tmp_path / "gpus.toml", text)
    with pytest.raises(RuleFileError) as info:
        load_kb([tmp_path])
    assert info.value.path.endswith("gpus.toml")
    assert (info.value.field, info.value.line) == ("gpu[0].capability", 3)


def test_duplicate_gpu_spelling_is_rejected(tmp_path: Path) -> None:
    text = '[[gpu]]\nname = "NVIDIA H200 NVL"\ncapability = "9.0"\nmemory_gb = [141]\n'
    text += 'source = "https://example.com"\nmemory_source = "https://example.com"\n'
    _write(tmp_path / "gpus.toml", text)
    with pytest.raises(RuleFileError, match="already defined") as info:
        load_kb([tmp_path])
    assert info.value.line == 2


def test_arch_entry_needs_a_source_per_fact(tmp_path: Path) -> None:
    url = "https://example.com/facts"
    text = "\n".join(
        [
            "[[arch]]",
            'capability = "6.1"',
            'arch = "sm_61"',
            'name = "Pascal"',
            *(
                f"{key} = {value}"
                for key, value in [
                    ("smem_per_sm", 98304),
                    ("smem_per_block_optin", 49152),
                    ("smem_reserved_per_block", 0),
                    ("smem_default_per_block", 49152),
                    ("max_threads_per_sm", 2048),
                    ("registers_per_sm", 65536),
                    ("max_registers_per_thread", 255),
                ]
            ),
            "fp8_mma = false",
            "fp4_mma = false",
            *(f'source_{fact} = "{url}"' for fact in ("smem", "threads", "products")),
        ]
    )
    _write(tmp_path / "gpus.toml", text)
    with pytest.raises(RuleFileError) as info:
        load_kb([tmp_path])
    assert (info.value.field, info.value.line) == ("arch[0].source_registers", 1)
    assert load_kb([tmp_path / "none"]).arch("sm_61") is None


def test_import_is_cheap() -> None:
    """Importing the module must not parse data or import rapidfuzz."""
    import subprocess

    code = "import sys, diagnose.kb; print('rapidfuzz' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "False"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0xX1aF/\\~.:-_ <>()\t\n\u00a0\x1cCG9", max_size=40))
def test_mask_signature_prechecks_change_nothing(text: str) -> None:
    from diagnose import kb

    # The plain form: every pattern always applied, whitespace collapsed by a regex.
    plain = kb._HEX.sub("<ADDR>", text)
    plain = kb._PATH.sub("<PATH>", plain)
    plain = kb._NUMBER.sub("<N>", plain)
    assert kb.mask_signature(text) == re.sub(r"\s+", " ", plain).strip()
