"""Tests for :func:`diagnose.frames.names.parse_name` on synthetic names in real spellings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.frames.names import parse_name
from diagnose.model import TemplateArg

# A TensorRT-LLM style kernel name cut by the logger's fixed width (our own spelling).
CUT_MOE = (
    "void tensorrt_llm::kernels::cutlass_kernels_oss::"
    "dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized<cutlass::arch::Sm120, "
    "__nv_fp4_e2m1, __nv_fp4_e2m1, __nv_bf..."
)


def test_mission_truncated_kernel_name() -> None:
    p = parse_name(CUT_MOE)
    assert p.qualified == (
        "tensorrt_llm::kernels::cutlass_kernels_oss::"
        "dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized"
    )
    assert p.truncated
    assert p.return_type == "void"
    assert [a.text for a in p.template_args] == [
        "cutlass::arch::Sm120",
        "__nv_fp4_e2m1",
        "__nv_fp4_e2m1",
        "__nv_bf",
    ]
    assert p.template_args[0].name == "cutlass::arch::Sm120"
    assert [a.truncated for a in p.template_args] == [False, False, False, True]
    assert p.params is None


def test_template_arg_tree() -> None:
    p = parse_name("void ns::f<cute::tuple<cute::C<128>, cute::C<256>>, int>(int, char const*)")
    tup = p.template_args[0]
    assert tup.name == "cute::tuple"
    assert [a.name for a in tup.args] == ["cute::C", "cute::C"]
    assert tup.args[0].args == (TemplateArg(text="128"),)
    assert p.template_args[1].name == "int"
    assert p.params == ("int", "char const*")
    assert p.scope == ("ns",) and p.name == "f"


@pytest.mark.parametrize(
    ("text", "qualified", "return_type", "params"),
    [
        ("(anonymous namespace)::load(int)", "(anonymous namespace)::load", "", ("int",)),
        ("bool operator< <int>(Box<int> const&, Box<int> const&)", "operator<", "bool", None),
        ("mylib::Grid::operator()(long) const", "mylib::Grid::operator()", "", ("long",)),
        ("mylib::Ptr<Node>::operator->() const", "mylib::Ptr::operator->", "", ()),
        ("mylib::Big::operator<<=(int)", "mylib::Big::operator<<=", "", ("int",)),
        ("mylib::Wrap::operator char const*() const", "mylib::Wrap::operator char const*", "", ()),
        ("mylib::Alloc::operator new[](unsigned long)", "mylib::Alloc::operator new[]", "", None),
        ("run(int)::{lambda(int)#1}::operator()(int) const", None, "", ("int",)),
        ("mylib::{unnamed type#1}::reset()", "mylib::{unnamed type#1}::reset", "", ()),
        ("mylib::Text::str[abi:cxx11]() const", "mylib::Text::str", "", ()),
        ("int (anonymous namespace)::twice<2>(int)", "(anonymous namespace)::twice", "int", None),
        ("mylib::Holder<(mylib::Mode)1, 3ul>::get()", "mylib::Holder::get", "", ()),
        ("void mylib::call<void (*)(int)>(void (*)(int))", "mylib::call", "void", None),
        ("void mylib::bind<std::function<void (int)> >(int)", "mylib::bind", "void", ("int",)),
        ("mylib::Cmp<(2>1)>::ok()", "mylib::Cmp::ok", "", ()),
        ("mylib::Nest<mylib::Nest<int>>::go()", "mylib::Nest::go", "", ()),
        ("mylib::log(char const*, ...)", "mylib::log", "", ("char const*", "...")),
        ("float const (&mylib::row(int)) [4]", None, None, None),
    ],
)
def test_shapes(
    text: str, qualified: str | None, return_type: str | None, params: tuple[str, ...] | None
) -> None:
    p = parse_name(text)
    if qualified is not None:
        assert p.qualified == qualified
    if return_type is not None:
        assert p.return_type == return_type
    if params is not None:
        assert p.params == params
    assert not p.truncated


def test_operator_less_template_args() -> None:
    p = parse_name("bool operator< <int>(Box<int> const&, Box<int> const&)")
    assert [a.text for a in p.template_args] == ["int"]
    assert p.params == ("Box<int> const&", "Box<int> const&")


def test_local_entity_keeps_function_scope() -> None:
    p = parse_name("run(mylib::Span<long>) const::{lambda()#2}::operator()() const")
    assert p.scope == ("run(mylib::Span) const", "{lambda()#2}")
    assert p.name == "operator()"
    assert p.qualifiers == ("const",)
    assert p.params == ()


def test_qualifiers_and_clones() -> None:
    p = parse_name("mylib::Q::take() && noexcept [clone .isra.0] [clone .cold]")
    assert p.qualifiers == ("&&", "noexcept")
    assert p.clones == (".isra.0", ".cold")
    assert p.qualified == "mylib::Q::take"


def test_llvm_spellings() -> None:
    p = parse_name("mylib::outer()::'lambda'(int)::operator()(int) const (.isra.0.cold)")
    assert p.name == "operator()"
    assert p.params == ("int",)
    assert p.clones == (".isra.0.cold",)
    assert (
        parse_name("void mylib::f<mylib::A<mylib::B<int>>>()").template_args[0].name == "mylib::A"
    )


def test_bare_dot_suffix() -> None:
    p = parse_name("pack_rows.constprop.0")
    assert p.qualified == "pack_rows"
    assert p.clones == (".constprop.0",)


@pytest.mark.parametrize(
    ("text", "special", "qualified"),
    [
        ("vtable for mylib::Shape", "vtable for", "mylib::Shape"),
        ("typeinfo name for mylib::Shape", "typeinfo name for", "mylib::Shape"),
        ("guard variable for mylib::table()::cache", "guard variable for", None),
        ("non-virtual thunk to mylib::Circle::~Circle()", "non-virtual thunk to", None),
        (
            "covariant return thunk to mylib::Circle::clone() const",
            "covariant return thunk to",
            None,
        ),
        ("construction vtable for mylib::A-in-mylib::B", "construction vtable for", None),
        ("typeinfo for int (*)(char)", "typeinfo for", "int (*)(char)"),
    ],
)
def test_special_prefixes(text: str, special: str, qualified: str | None) -> None:
    p = parse_name(text)
    assert p.special == special
    if qualified is not None:
        assert p.qualified == qualified


def test_msvc_spellings() -> None:
    p = parse_name("static bool `anonymous namespace'::Walker::visit()")
    assert p.qualified == "(anonymous namespace)::Walker::visit"
    assert p.return_type == "bool"
    assert "static" in p.qualifiers
    t = parse_name("[thunk]:mylib::Obj::Query`adjustor{8}' (int const&, void**)")
    assert t.params == ("int const&", "void**")
    assert t.special == "[thunk]"


@pytest.mark.parametrize(
    ("text", "qualified", "params"),
    [
        ("mylib::kernels::launch<int, floa...", "mylib::kernels::launch", None),
        ("mylib::kernels::launch<int, float>(int, cha…", "mylib::kernels::launch", ("int", "cha")),
        ("mylib::kernels:", "mylib::kernels", None),
        ("mylib::kernels::", "mylib::kernels", None),
        ("void mylib::ker", "mylib::ker", None),
        ("mylib::Outer<mylib::Inner<int, (mylib::E)2", "mylib::Outer", None),
    ],
)
def test_truncation(text: str, qualified: str, params: tuple[str, ...] | None) -> None:
    p = parse_name(text)
    assert p.qualified == qualified
    assert p.params == params
    assert p.truncated == (text != "void mylib::ker")


def test_varargs_is_not_truncation() -> None:
    assert not parse_name("mylib::log(char const*, ...)").truncated


def test_nested_cut_marks_every_open_level() -> None:
    p = parse_name("void mylib::k<mylib::Outer<mylib::Inner<12, 3")
    outer = p.template_args[0]
    assert outer.truncated and outer.args[-1].truncated
    assert outer.args[-1].args[-1].text == "3" and outer.args[-1].args[-1].truncated


def test_cached_and_bounded() -> None:
    assert parse_name("mylib::a()") is parse_name("mylib::a()")
    huge = "mylib::f<" * 20_000
    p = parse_name(huge)
    assert p.truncated


def test_never_raises_on_odd_input() -> None:
    for text in ["", "   ", "<", ">", ")(", "::", "operator", "{lambda(", "[clone", "`", "'"]:
        parse_name(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab:<>()[]{},. &*'`#~…-0123456789")), max_size=80))
def test_property_never_raises_on_bracket_soup(text: str) -> None:
    p = parse_name(text)
    assert isinstance(p.qualified, str)


_REAL_LOOKING = [
    "void mylib::gemm<mylib::arch::Sm90, mylib::half_t, cute::tuple<cute::C<64>, cute::C<64>>>"
    "(mylib::Params const&, int) const [clone .cold]",
    "std::_Function_handler<void (int), run()::{lambda(int)#1}>::_M_invoke(std::_Any_data const&,"
    " int&&)",
    "bool operator< <long>(mylib::Box<long> const&, mylib::Box<long> const&)",
    "guard variable for mylib::table[abi:cxx11]()::cache",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_REAL_LOOKING), st.integers(min_value=0, max_value=200), st.booleans())
def test_property_random_truncations(name: str, cut: int, marker: bool) -> None:
    text = name[: min(cut, len(name))] + ("..." if marker else "")
    p = parse_name(text)
    if marker and cut < len(name):
        assert p.truncated
    full = parse_name(name)
    # Whatever survived of the name is a prefix of the full parse's components.
    got = [*p.scope, p.name]
    want = [*full.scope, full.name]
    same_head = p.return_type == full.return_type and p.special == full.special
    if same_head and got and len(got) <= len(want):
        assert got[:-1] == want[: len(got) - 1]
        assert want[len(got) - 1].startswith(got[-1])


# --- peer data: real symbols and Socorro's cases (skipped without ../shared) ---------------


@pytest.fixture(scope="module")
def shared() -> Path:
    root = Path(__file__).resolve().parents[1].parent / "shared"
    if not root.is_dir():
        pytest.skip("../shared is absent")
    return root


def test_peer_real_symbols_against_oracle(shared: Path) -> None:
    demangle = pytest.importorskip("demangle")
    path = shared / "peer" / "real-symbols-pytorch" / "symbols.jsonl"
    if not path.exists():
        pytest.skip("real-symbols-pytorch is absent")
    style = demangle.style("gnu", itanium={"expand_std_abbreviations": False})
    scored = right = 0
    for line in path.read_text().splitlines()[:1500]:
        rec = json.loads(line)
        text = rec.get("cxa") or rec.get("gnu")
        try:
            sig = demangle.signature(rec["mangled"], style=style)
        except Exception:
            continue
        if not text or sig.demangled != text:
            continue
        p = parse_name(text)
        scored += 1
        right += p.return_type == (sig.return_type or "") and p.params == sig.parameters
    assert scored > 1000
    assert right / scored > 0.97


def test_peer_socorro_drop_prefix(shared: Path) -> None:
    path = shared / "peer" / "socorro-siggen" / "expected.json"
    if not path.exists():
        pytest.skip("socorro-siggen is absent")
    cases = json.loads(path.read_text())["drop_prefix_and_return_type"]["cases"]
    storage = {"static", "virtual"}
    right = 0
    for case in cases:
        fn, expected = case["function"], case["expected"]
        p = parse_name(fn)
        dropped = " ".join([*(q for q in p.qualifiers if q in storage), p.return_type]).strip()
        right += fn.endswith(expected) and dropped == fn[: len(fn) - len(expected)].strip()
    assert right / len(cases) > 0.9


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_property_never_raises_on_any_text(text: str) -> None:
    p = parse_name(text)
    assert p.text == text


def test_varargs_only_parameter_list_is_a_parameter_list() -> None:
    # TensorRT-LLM prints its throw helper as `throwRuntimeError(...)`.
    parsed = parse_name("tensorrt_llm::common::throwRuntimeError(...)")
    assert parsed.qualified == "tensorrt_llm::common::throwRuntimeError"
    assert parsed.params == ("...",)
    assert not parsed.truncated


@pytest.mark.parametrize(
    "special",
    [
        "vtable for", "VTT for", "construction vtable for", "typeinfo name for", "typeinfo fn for",
        "typeinfo for", "guard variable for", "non-virtual thunk to", "virtual thunk to",
        "covariant return thunk to", "TLS init function for", "TLS wrapper function for",
        "reference temporary #3 for", "transaction clone for", "non-transaction clone for",
        "hidden alias for", "java Class for",
    ],
)  # fmt: skip
def test_special_name_heads_cover_every_special(special: str) -> None:
    from diagnose.frames import names

    text = f"{special} ns::Widget"
    assert names._SPECIAL.match(text) is not None
    assert text.startswith(names._SPECIAL_HEADS)
    assert parse_name(text).qualified == "ns::Widget"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="vtableVTforgudcinsTLShjr #0-:123pwx", min_size=1, max_size=40))
def test_special_and_leading_heads_never_hide_a_match(text: str) -> None:
    from diagnose.frames import names

    if names._SPECIAL.match(text):
        assert text.startswith(names._SPECIAL_HEADS), text
    if names._LEADING_WORDS.match(text):
        assert text.startswith(names._LEADING_HEADS), text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab:<>()[]{}, `'-lambd0opert\n", max_size=40))
def test_plain_tokenizer_agrees_without_operator(text: str) -> None:
    from diagnose.frames import names

    if "operator" in text:
        return
    full = [(m.lastgroup, m.span()) for m in names._TOKEN.finditer(text)]
    plain = [(m.lastgroup, m.span()) for m in names._PLAIN_TOKEN.finditer(text)]
    assert full == plain


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="constvlaigedhruf &*_1 2:", max_size=30))
def test_argument_pattern_heads_never_hide_a_match(text: str) -> None:
    from diagnose.frames import names

    if names._ARG_LEAD.match(text):
        assert text.startswith(names._ARG_LEAD_HEADS), text
    if names._BUILTIN_MULTI.match(text):
        assert text.startswith(names._BUILTIN_HEADS), text
