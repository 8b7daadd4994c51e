"""Advice for the engine in the log: its flags only, never the failed part, never a guessed GPU."""

from __future__ import annotations

import pytest

from diagnose import diagnose_text
from diagnose.advice import UNKNOWN_CAPABILITY, Catalogue, catalogues, engines_in, tailor
from diagnose.kb import Fix, load_kb

KB = load_kb()
ENGINES = sorted(catalogues())


def _owned_by(item: str, engine: str | None, is_env: bool) -> set[str]:
    cats = catalogues()
    if is_env:
        name = item.split("=", 1)[0]
        return {c.engine for c in cats.values() if any(name.startswith(p) for p in c.env_prefixes)}
    return {c.engine for c in cats.values() if item.split()[0] in c.flags}


def test_every_flag_the_kb_recommends_belongs_to_some_engine() -> None:
    orphans = [
        (cause.id, flag)
        for cause in KB.causes
        for fix in cause.fixes
        for flag in fix.flags
        if not _owned_by(flag, None, False)
    ]
    assert orphans == []


@pytest.mark.parametrize("engine", [*ENGINES, None])
@pytest.mark.parametrize("cause_id", [c.id for c in KB.causes])
def test_every_recommended_flag_belongs_to_the_engine_in_the_log(
    cause_id: str, engine: str | None
) -> None:
    stacks = frozenset({engine} if engine else ())
    fixes = KB.cause(cause_id).fixes
    result = tailor(fixes, stacks, stacks)
    for fix in result.fixes:
        for flag in fix.flags:
            owners = _owned_by(flag, engine, False)
            assert engine in owners, (cause_id, engine, flag)
        for env in fix.env:
            owners = _owned_by(env, engine, True)
            assert not owners or engine in owners, (cause_id, engine, env)
    if engine is None:
        had_engine_flags = any(fix.flags for fix in fixes)
        assert bool(result.note) == had_engine_flags or not had_engine_flags


VLLM_OOM = """\
INFO 05-02 11:20:01 [core.py:61] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/q3-32b'
(EngineCore_DP0 pid=812) ERROR 05-02 11:20:31 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.
"""


def test_a_vllm_oom_is_told_vllm_flags_only() -> None:
    d = diagnose_text(VLLM_OOM)
    assert d.cause == "cuda-oom"
    flags = [f for fix in d.fixes for f in fix.flags]
    assert any(f.startswith("--gpu-memory-utilization") for f in flags)
    sglang_only = catalogues()["sglang"].flags - catalogues()["vllm"].flags
    assert not [f for f in flags if f.split()[0] in sglang_only]


SGLANG_TRITON_SMEM = """\
[2026-03-01 10:00:00] server_args=ServerArgs(model_path='/models/m', attention_backend='triton', tp_size=1)
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/layers/attention/triton_ops/extend_attention.py", line 402, in extend_attention_fwd
    _fwd_kernel[grid](
triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 114688, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.
"""


def test_the_failed_backend_is_never_recommended() -> None:
    d = diagnose_text(SGLANG_TRITON_SMEM)
    assert d.cause == "smem-overflow"
    flags = [f for fix in d.fixes for f in fix.flags]
    assert "--attention-backend triton" not in flags
    assert "--moe-runner-backend triton" not in flags


NO_GPU_NAMED = """\
Traceback (most recent call last):
  File "/srv/app/run.py", line 9, in <module>
    y = model(x)
RuntimeError: CUDA error: no kernel image is available for execution on the device
"""


def test_no_gpu_is_assumed_and_the_one_shown_is_used() -> None:
    d = diagnose_text(NO_GPU_NAMED)
    assert d.cause == "arch-unsupported"
    env = [e for fix in d.fixes for e in fix.env]
    arch_list = [e for e in env if e.startswith("TORCH_CUDA_ARCH_LIST=")]
    assert arch_list == [f"TORCH_CUDA_ARCH_LIST={UNKNOWN_CAPABILITY}"]
    shown = "INFO GPU 0: NVIDIA GeForce RTX 3090 (compute capability 8.6)\n" + NO_GPU_NAMED
    env = [e for fix in diagnose_text(shown).fixes for e in fix.env]
    assert "TORCH_CUDA_ARCH_LIST=8.6" in env


def test_an_unknown_engine_gets_neutral_advice_and_says_so() -> None:
    log = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    d = diagnose_text(log)
    assert d.cause == "cuda-oom"
    engine_flags = set().union(*(c.flags for c in catalogues().values()))
    assert not [f for fix in d.fixes for f in fix.flags if f.split()[0] in engine_flags]
    assert any("does not show which serving engine" in n for n in d.notes)


def test_an_embedded_engine_is_not_the_logs_engine() -> None:
    assert engines_in({"sglang", "vllm", "tensorrt-llm", "flashinfer"}) == ["sglang"]
    assert engines_in({"vllm", "tensorrt-llm"}) == ["vllm"]
    assert engines_in({"pytorch", "nccl"}) == []


def test_a_flag_newer_than_the_logs_release_is_left_out() -> None:
    cats = {
        "widget": Catalogue(
            "widget", frozenset({"--new-knob", "--old-knob"}), since={"--new-knob": "2.0"}
        )
    }
    fix = Fix("Turn a knob", "", flags=("--new-knob 1", "--old-knob 1"))
    stacks = frozenset({"widget"})
    old = tailor([fix], stacks, stacks, versions={"widget": "1.4"}, known=cats)
    assert old.fixes[0].flags == ("--old-knob 1",)
    new = tailor([fix], stacks, stacks, versions={"widget": "2.1"}, known=cats)
    assert new.fixes[0].flags == ("--new-knob 1", "--old-knob 1")


def test_a_keyword_setting_counts_as_its_engines_flag() -> None:
    fix = Fix("Give the KV cache more", "", config=("gpu_memory_utilization=0.95",))
    sglang = frozenset({"sglang"})
    assert tailor([fix], sglang, sglang).fixes == ()
    vllm = frozenset({"vllm"})
    assert tailor([fix], vllm, vllm).fixes[0].config == ("gpu_memory_utilization=0.95",)


def test_every_rule_specific_fix_names_a_rule_of_its_cause() -> None:
    from diagnose.rules import load_rules

    rules = {rule.id: rule.cause for rule in load_rules()}
    wrong = [
        (cause.id, fix.title, rule_id)
        for cause in KB.causes
        for fix in cause.fixes
        for rule_id in fix.for_rules
        if rules.get(rule_id) != cause.id
    ]
    assert wrong == []


def test_a_rule_specific_fix_comes_first_for_its_rule_and_never_for_another() -> None:
    duplicate = diagnose_text(
        "host:1:2 [1] init.cc:904 NCCL WARN Duplicate GPU detected : rank 3 and rank 1 "
        "both on CUDA device 1a000\n"
    )
    assert duplicate.primary is not None
    assert duplicate.primary.rule_id == "nccl-error/duplicate-gpu-ranks"
    assert duplicate.fixes[0].title == "Give each rank its own GPU"
    shm = diagnose_text(
        "host:1:2 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x "
        "(size 9637888)\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n"
    )
    assert shm.cause == "nccl-error"
    assert "Give each rank its own GPU" not in [f.title for f in shm.fixes]
