"""Rule engine: scopes, signal kinds, facts, tiers, ranking, failure containment, the prefilter."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from diagnose.context import Fact, LogContext
from diagnose.errors import RuleFileError
from diagnose.kb import ArchFacts
from diagnose.literals import regex_literals
from diagnose.model import Frame, KernelFacts, LogLine, Region
from diagnose.rules import Document, RuleSet, match_rules, run_rules
from diagnose.rules.parse import parse_rule
from diagnose.rules.prefilter import Prefilter
from diagnose.tomlsource import TomlSource

SM120 = ArchFacts(
    capability="12.0", arch="sm_120", name="Blackwell", smem_per_sm=102400,
    smem_per_block_optin=101376, smem_reserved_per_block=1024, smem_default_per_block=49152,
    max_threads_per_sm=1536, registers_per_sm=65536, max_registers_per_thread=255,
)  # fmt: skip


class FakeKb:
    """Hardware facts for one arch; ``arch_for_gpu`` knows one product spelling."""

    version = "test"

    def cause(self, cause_id: str) -> str:
        return cause_id

    def arch(self, arch_id: str) -> ArchFacts | None:
        return SM120 if arch_id.lower().startswith("sm_120") else None

    def arch_for_gpu(self, name: str) -> ArchFacts | None:
        return SM120 if "RTX PRO 6000" in name else None


class BrokenKb(FakeKb):
    """A knowledge base whose arch lookup is buggy: a rule using it must fail alone."""

    def arch(self, arch_id: str) -> ArchFacts | None:
        raise RuntimeError("arch table corrupted")

    def arch_for_gpu(self, name: str) -> ArchFacts | None:
        raise RuntimeError("arch table corrupted")


EXAMPLES = """
[[examples]]
name = "m"
expect = "match"
log = "x"

[[examples]]
name = "n"
expect = "no-match"
log = "y"
"""


def rule_text(rule_id: str, match: str, **top: Any) -> str:
    """A complete rule file around a ``[match]`` body (examples are not run here)."""
    fields = {"severity": "fatal", "confidence": 0.6, "summary": "matched", **top}
    head = "\n".join(
        f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in fields.items()
    )
    cause = rule_id.split("/")[0]
    return (
        f'id = "{rule_id}"\ncause = "{cause}"\ntitle = "t {rule_id}"\n'
        f'references = ["o/r#1"]\n{head}\n\n[match]\n{match}\n{EXAMPLES}'
    )


def build(*texts: str) -> RuleSet:
    rules = []
    for text in texts:
        data = tomllib.loads(text)
        src = TomlSource(f"{data['id']}.toml", text, data)
        rules.append(parse_rule(src, data["id"], lambda c: True))
    return RuleSet.build(rules)


def region(kind: str, texts: Sequence[tuple[int, str]], frames: Sequence[Frame] = ()) -> Region:
    body = tuple(LogLine(n, t) for n, t in texts)
    return Region(kind, (body[0].number, body[-1].number), body[-1].text, body[-1].number,
                  body, tuple(frames))  # fmt: skip


def doc_of(texts: Sequence[str], regions: Sequence[Region] = (), context: Any = None) -> Document:
    return Document.from_lines(list(texts), tuple(regions), context)


# --- scopes -------------------------------------------------------------------------------


def test_region_scope_gives_one_finding_per_matching_region() -> None:
    rules = build(rule_text("cuda-oom/a", "all = [ { text = 'boom' } ]"))
    lines = ["start", "boom one", "calm", "boom two"]
    regs = [region("error-line", [(2, "boom one")]), region("error-line", [(3, "calm")]),
            region("error-line", [(4, "boom two")])]  # fmt: skip
    findings = match_rules(rules, doc_of(lines, regs))
    assert [f.region_index for f in findings] == [0, 2]
    assert [e.line for e in findings[1].evidence] == [4]


def test_no_region_means_whole_log() -> None:
    rules = build(rule_text("cuda-oom/a", "all = [ { text = 'boom' } ]"))
    (finding,) = match_rules(rules, doc_of(["x", "boom"]))
    assert finding.region_index is None and finding.evidence[0].line == 2


def test_log_scope_sees_lines_outside_regions() -> None:
    rules = build(rule_text("tactic-skipped/a", "scope = 'log'\nall = [ { text = 'skip' } ]"))
    regs = [region("error-line", [(3, "crash")])]
    (finding,) = match_rules(rules, doc_of(["skip 1", "skip 2", "crash"], regs))
    assert finding.region_index is None and [e.line for e in finding.evidence] == [1, 2]


# --- gating -------------------------------------------------------------------------------


def test_all_any_none() -> None:
    rules = build(rule_text(
        "cuda-oom/a",
        "all = [ { text = 'oom' } ]\nany = [ { text = 'gpu' }, { text = 'cuda' } ]\n"
        "none = [ { text = 'caught' } ]",
    ))  # fmt: skip
    assert match_rules(rules, doc_of(["oom on cuda"]))
    assert not match_rules(rules, doc_of(["oom on cpu"]))  # no `any`
    assert not match_rules(rules, doc_of(["cuda ok"]))  # no `all`
    assert not match_rules(rules, doc_of(["oom on cuda", "caught"]))  # `none` fired


def test_text_case_option() -> None:
    rules = build(
        rule_text("cuda-oom/a", "all = [ { text = 'Out Of Memory' } ]"),
        rule_text("cuda-oom/b", "all = [ { text = 'Out Of Memory', ignore_case = true } ]"),
    )
    assert [f.rule_id for f in match_rules(rules, doc_of(["OUT OF MEMORY"]))] == ["cuda-oom/b"]


def test_regex_facts_units_and_summary() -> None:
    rules = build(rule_text(
        "cuda-oom/a",
        "all = [ { regex = 'need (?P<want>[0-9.]+ ?[GM]iB), have (?P<have>\\d+)', "
        "extract = { want = 'bytes', have = 'int' } } ]",
        summary="wanted {want:size}, had {have}",
    ))  # fmt: skip
    (finding,) = match_rules(rules, doc_of(["alloc: need 1.50 GiB, have 7"]))
    assert finding.facts == (("want", 1610612736), ("have", 7))
    assert finding.summary == "wanted 1.50 GiB, had 7"


def test_missing_fact_uses_fallback() -> None:
    rules = build(rule_text(
        "cuda-oom/a",
        "all = [ { text = 'oom' } ]\noptional = [ { regex = 'size=(?P<n>\\d+)' } ]",
        summary="size {n}", fallback="no size printed",
    ))  # fmt: skip
    assert match_rules(rules, doc_of(["oom size=3"]))[0].summary == "size 3"
    assert match_rules(rules, doc_of(["oom"]))[0].summary == "no size printed"


def test_frame_glob_and_kernel_predicates() -> None:
    kernel = KernelFacts(arch="sm_120", dtypes=("fp4_e2m1",), tile=(128, 256, 64))
    gemm = "cutlass::gemm::kernel::GemmUniversal"
    frames = [
        Frame(5, "cpp", function="other::thing"),
        Frame(6, "cpp", function=gemm, symbol="GemmUniversal<...>", kernel=kernel),
    ]
    regs = [region("cpp-backtrace", [(5, "#0 a"), (6, "#1 b")], frames)]
    doc = doc_of(["", "", "", "", "#0 a", "#1 b"], regs)
    hit = "frame = 'cutlass::*', arch = 'sm_12*', dtype = 'fp4*', tile_m = 128, tile_n = '>= 256'"
    rules = build(rule_text("smem-overflow/a", f"all = [ {{ {hit} }} ]"))
    (finding,) = match_rules(rules, doc)
    assert finding.fact("tile") == (128, 256, 64) and finding.fact("arch") == "sm_120"
    assert finding.evidence[0].line == 6
    for miss in ("frame = 'cutlass::*', tile_k = '> 64'", "frame = 'cutlass::*', arch = 'sm_9*'",
                 "frame = 'gemm*'", "frame = '*Gemm*', on = 'module'"):  # fmt: skip
        assert not match_rules(build(rule_text("smem-overflow/a", f"all = [ {{ {miss} }} ]")), doc)


def test_region_kind() -> None:
    rules = build(
        rule_text("cuda-oom/a", "all = [ { text = 'x' }, { region_kind = 'cuda-error' } ]")
    )
    regs = [region("python-traceback", [(1, "x")]), region("cuda-error", [(2, "x")])]
    assert [f.region_index for f in match_rules(rules, doc_of(["x", "x"], regs))] == [1]


def context(**args: str) -> LogContext:
    return LogContext(
        server_args={k: Fact(v, 1) for k, v in args.items()},
        gpus=(Fact("NVIDIA RTX PRO 6000 Blackwell Server Edition", 2),),
        versions={"torch": Fact("2.9.1+cu130", 3)},
    )


@pytest.mark.parametrize(
    ("signal", "expected"),
    [
        ("context = 'ep_size', op = '>=', value = 2", True),
        ("context = 'ep_size', op = '>', value = 8", False),
        ("context = 'moe_a2a_backend', op = '==', value = 'DeepEP'", True),
        ("context = 'gpu', op = 'glob', value = '*rtx pro 6000*'", True),
        ("context = 'version.torch', op = '>=', value = '2.10'", False),
        ("context = 'version.torch', op = '>=', value = '2.9'", True),
        ("context = 'ready', op = 'absent'", True),
        ("context = 'ready'", False),
        ("context = 'tp_size'", False),
    ],
)
def test_context_signals(signal: str, expected: bool) -> None:
    rules = build(rule_text("cuda-oom/a", f"all = [ {{ text = 'oom' }}, {{ {signal} }} ]"))
    doc = doc_of(["oom"], context=context(ep_size="8", moe_a2a_backend="deepep"))
    assert bool(match_rules(rules, doc)) is expected


def test_context_fact_and_evidence() -> None:
    rules = build(
        rule_text(
            "cuda-oom/a", "all = [ { text = 'oom' } ]\noptional = [ { context = 'ep_size' } ]"
        )
    )
    (finding,) = match_rules(rules, doc_of(["oom"], context=context(ep_size="4")))
    assert finding.fact("ep_size") == "4"
    assert [(e.line, e.text) for e in finding.evidence] == [(1, "oom"), (1, "ep_size = 4")]


# --- numeric checks and tiers ---------------------------------------------------------------

SMEM = (
    "all = [ { regex = 'needs (?P<need>\\d+) bytes', extract = { need = 'int' } } ]\n"
    "confirm = [ { numeric = 'need > arch.smem_per_block_optin' } ]"
)


def test_hardware_tier_when_kb_numbers_agree() -> None:
    rules = build(rule_text("smem-overflow/a", SMEM, confidence=0.6))
    (finding,) = match_rules(
        rules, doc_of(["kernel needs 102400 bytes"], context=context()), FakeKb()
    )
    assert finding.tier == "hardware" and finding.confidence == pytest.approx(0.8)
    assert finding.fact("arch") == "sm_120" and finding.fact("arch.smem_per_block_optin") == 101376
    assert any("102400 > 101376 on sm_120 is true" in n for n in finding.notes)


def test_contradicting_numbers_lower_confidence() -> None:
    rules = build(rule_text("smem-overflow/a", SMEM, confidence=0.6))
    (finding,) = match_rules(
        rules, doc_of(["kernel needs 65536 bytes"], context=context()), FakeKb()
    )
    assert finding.tier == "pattern" and finding.confidence == pytest.approx(0.3)
    assert any(n.startswith("check failed") for n in finding.notes)


def test_unknown_arch_leaves_pattern_tier() -> None:
    rules = build(rule_text("smem-overflow/a", SMEM, confidence=0.6))
    (finding,) = match_rules(rules, doc_of(["kernel needs 102400 bytes"]), FakeKb())
    assert finding.tier == "pattern" and finding.confidence == pytest.approx(0.6)


def test_gating_numeric_uses_arch_fact_from_frames() -> None:
    text = (
        "all = [ { frame = '*' }, { regex = 'needs (?P<need>\\d+)', extract = { need = 'int' } },"
        " { numeric = 'need > arch.smem_per_block_optin' } ]"
    )
    frames = [Frame(1, "cpp", function="k", kernel=KernelFacts(arch="sm_120a"))]
    doc = doc_of(["needs 200000"], [region("cpp-backtrace", [(1, "needs 200000")], frames)])
    (finding,) = match_rules(build(rule_text("smem-overflow/a", text)), doc, FakeKb())
    assert finding.tier == "hardware"
    small = doc_of(["needs 2000"], [region("cpp-backtrace", [(1, "needs 2000")], frames)])
    assert not match_rules(build(rule_text("smem-overflow/a", text)), small, FakeKb())


def test_fuzzy_score_is_evidence() -> None:
    rules = build(rule_text(
        "cuda-oom/a", "all = [ { fuzzy = 'failed to initialize grouped gemm', min_score = 85 } ]",
        confidence=0.8,
    ))  # fmt: skip
    (finding,) = match_rules(rules, doc_of(["ok", "Error: Failed to initialise grouped GEMM (7)"]))
    ((field, score),) = finding.scores
    assert field == "match.all[0]" and 85 <= score < 100
    assert finding.confidence == pytest.approx(0.8 * score / 100, abs=1e-3)
    assert not match_rules(rules, doc_of(["grouped gemm finished"]))


# --- ranking and failure containment ------------------------------------------------------


def test_ranking_confidence_then_fatal() -> None:
    rules = build(
        rule_text(
            "tactic-skipped/w", "all = [ { text = 'x' } ]", severity="warning", confidence=0.9
        ),
        rule_text("cuda-oom/f", "all = [ { text = 'x' } ]", confidence=0.9),
        rule_text("cuda-oom/low", "all = [ { text = 'x' } ]", confidence=0.5),
    )
    ids = [f.rule_id for f in match_rules(rules, doc_of(["x"]))]
    assert ids == ["cuda-oom/f", "tactic-skipped/w", "cuda-oom/low"]


def test_rule_that_raises_becomes_a_note() -> None:
    rules = build(
        rule_text("smem-overflow/a", SMEM),
        rule_text("cuda-oom/b", "all = [ { text = 'needs' } ]"),
    )
    run = run_rules(rules, doc_of(["kernel needs 102400 bytes"], context=context()), BrokenKb())
    assert [f.rule_id for f in run.findings] == ["cuda-oom/b"]
    assert run.notes == ("rule smem-overflow/a failed: RuntimeError: arch table corrupted",)


def test_finding_to_dict_is_json_ready() -> None:
    import json

    rules = build(rule_text("smem-overflow/a", SMEM))
    (finding,) = match_rules(
        rules, doc_of(["kernel needs 102400 bytes"], context=context()), FakeKb()
    )
    data = json.loads(json.dumps(finding.to_dict()))
    assert data["rule_id"] == "smem-overflow/a" and data["tier"] == "hardware"
    assert data["facts"]["need"] == 102400 and data["evidence"][0]["line"] == 1


# --- prefilter ----------------------------------------------------------------------------


def test_prefilter_skips_rules_whose_literal_is_absent() -> None:
    rules = build(
        rule_text("cuda-oom/a", "all = [ { text = 'alpha' } ]"),
        rule_text("cuda-oom/b", "all = [ { regex = 'beta\\d+' } ]"),
        rule_text("cuda-oom/c", "all = [ { fuzzy = 'gamma ray burst', min_score = 90 } ]"),
    )
    assert run_rules(rules, doc_of(["nothing here"])).evaluated == 1  # only the fuzzy rule
    assert run_rules(rules, doc_of(["BETA7"])).evaluated == 2


def test_prefilter_falls_back_when_re2_set_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    import diagnose.rules.prefilter as pf

    monkeypatch.setattr(pf, "_compile_set", lambda literals: None)
    prefilter = Prefilter([frozenset({"abc"}), None, frozenset({"xyz", "q"})])
    pad = "." * pf.SMALL_TEXT  # past the size where the RE2 set is used
    assert prefilter.candidates([pad + "ABC.."]) == [0, 1]
    assert prefilter.candidates([pad + "q"]) == [1, 2]


def test_prefilter_small_and_large_texts_agree() -> None:
    import diagnose.rules.prefilter as pf

    prefilter = Prefilter(
        [frozenset({"abc"}), None, frozenset({"xyz", "q"}), frozenset({"cuda error"})]
    )
    for text in ["..ABC..", "q", "CUDA Error: x", "none", "xyz abc"]:
        small = prefilter.candidates([text])
        large = prefilter.candidates(["." * pf.SMALL_TEXT, text])
        assert small == large
    assert prefilter._set is not None  # the large texts went through the RE2 set


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        ("OutOfResources: out of resource", {"outofresources: out of resource"}),
        ("(?i)cuda (?:runtime )?error", {"cuda "}),
        ("abc|de+f", {"abc", "de"}),
        ("x(y)?z", {"x"}),
        ("ab{0,3}cd", {"cd"}),
        ("\\x41bc", {"bc"}),
        ("[abc]+", None),
        ("a|\\d+", None),
        ("\\Qliteral\\E", None),
        # A group the match cannot skip guards it (rules name what they extract this way).
        ("(?P<detail>NCCL WARN .{0,40}(?:NVLS|multicast))", {"nccl warn "}),
        ("(?P<a>(?:Misaligned|Out-of-range) Shared Address)", {" shared address"}),
        ("(?i:Cuda)[ _]?(?:error|failure)", {"cuda"}),
        ("(?:ab|cd)+\\d", {"ab", "cd"}),
        ("(?:ab|cd)+z", {"z"}),  # one alternative beats two
        ("(?:ab|cd)?[xy]", None),
        ("(?=abc)x", {"x"}),
        ("(?:a|)[xy]", None),
    ],
)
def test_regex_literals(pattern: str, literals: set[str] | None) -> None:
    assert regex_literals(pattern) == (None if literals is None else frozenset(literals))


# Fragments chosen to stress the literal extractor: quantifiers, groups, classes,
# alternation, escapes, inline flags and characters whose case folding is unusual.
_FRAGMENTS = ["ab", "Sh", "ſ", "K", "k", "ß", "é", "\\.", ".", "[a-c]", "[^x]", "(?:ab|cd)",
              "(q)", "x?", "y*", "z+", "{2}", "{0,2}", "\\d", "\\w+", "|", "(?i)", " ", "\\x41",
              "\\pL", "^", "$", "\\b", "s", "S", "1", "(?P<n>k|é)", "(?i:Sh)", "(?:(q)|ab)",
              "(?:s)+", "(?:K){0,2}", "(?:|z)", "(?s:.)"]  # fmt: skip
_TEXT = st.text(alphabet="abcdqxyzSsſKkßéA1 .|", max_size=12)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=6)))


def _compiles(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options=options)
    except re2.error:
        return None


@settings(max_examples=400, deadline=None)
@given(patterns(), st.lists(_TEXT, min_size=1, max_size=4))
def test_regex_literals_never_miss_a_match(pattern: str, pieces: list[str]) -> None:
    compiled = _compiles(pattern)
    assume(compiled is not None)
    literals = regex_literals(pattern)
    text = "".join(pieces)
    if literals is not None and compiled.search(text):
        assert any(lit in text.casefold() for lit in literals), (pattern, text, literals)


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        # RE2 reads "(?i)" as a flag setting, not an atom: a quantifier after it applies to
        # the character before it (found by the property test above).
        ("K(?i){0,2}", None),
        ("K(?i)?z", frozenset({"z"})),
        ("K(?i)+", frozenset({"k"})),
        ("ab(?i)c", frozenset({"abc"})),
        ("(?:ab|cd)(?i){0,2}", None),
        ("(?:ab|cd)(?i)+", frozenset({"ab", "cd"})),
    ],
)
def test_a_quantifier_after_a_flag_setting_applies_to_the_atom_before(
    pattern: str, literals: frozenset[str] | None
) -> None:
    assert regex_literals(pattern) == literals


def _signal(kind: str, body: str) -> str:
    quoted = "'" + body + "'"
    if kind == "text":
        return f"{{ text = {quoted} }}"
    if kind == "itext":
        return f"{{ text = {quoted}, ignore_case = true }}"
    return f"{{ regex = {quoted} }}"


@st.composite
def rule_bodies(draw: st.DrawFn) -> str:
    def signals(min_size: int) -> str:
        items = draw(st.lists(
            st.tuples(st.sampled_from(["text", "itext", "regex"]), patterns()),
            min_size=min_size, max_size=3,
        ))  # fmt: skip
        return ", ".join(_signal(k, b) for k, b in items if "'" not in b)

    body = f"all = [ {signals(0)} ]\nany = [ {signals(0)} ]\nnone = [ {signals(0)} ]"
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule_bodies(), min_size=1, max_size=4), st.lists(_TEXT, min_size=1, max_size=5))
def test_prefilter_never_hides_a_match(bodies: list[str], lines: list[str]) -> None:
    """The same findings come out with and without the prefilter, for any rules and log."""
    texts = [rule_text(f"cuda-oom/r{i}", body) for i, body in enumerate(bodies)]
    try:
        rules = build(*texts)
    except RuleFileError:
        assume(False)
        raise  # pragma: no cover - assume(False) already stopped this example
    doc = doc_of(lines)
    with_filter = run_rules(rules, doc)
    without = run_rules(rules, doc, prefilter=False)
    assert with_filter.findings == without.findings
    assert with_filter.evaluated <= without.evaluated


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab*?", max_size=6), st.text(alphabet="abAB", max_size=8))
def test_glob_agrees_with_fnmatch(pattern: str, value: str) -> None:
    import fnmatch

    from diagnose.globs import Glob

    assert Glob.compile(pattern).matches(value) == fnmatch.fnmatchcase(value, pattern)
    folded = fnmatch.fnmatchcase(value.casefold(), pattern.casefold())
    assert Glob.compile(pattern, ignore_case=True).matches(value) == folded
