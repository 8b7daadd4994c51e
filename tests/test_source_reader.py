"""Source reader tests: FlashInfer-shaped C++ written here (our own tiles, names and layout,
in the forms the real functions take), the verifier's use of it, throw-site context, bounds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from diagnose.kb import load_kb
from diagnose.verify import source_reader as sr
from diagnose.verify.model import verify_model
from diagnose.verify.spec import GemmSpec

needs_ts = pytest.mark.skipif(
    not sr.tree_sitter_available(),
    reason="tree-sitter / tree-sitter-cpp not installed (extra 'verify')",
)

# A newer-style heuristic: FAST_BUILD lists by path, a full static array, then a grouped
# prune in a remove_if predicate (fall-through cases, `true`, a local condition, default).
HEURISTIC_NEW = """\
namespace acme::kernels {
std::vector<CutlassGemmConfig> get_candidate_configs_sm90(CandidateConfigTypeParam const cfg) {
  return {CutlassGemmConfig{CutlassTileConfigSM90::CtaShape64x64x128B}};
}

std::vector<CutlassGemmConfig> get_candidate_configs_sm120(
    CutlassGemmConfig::CandidateConfigTypeParam const cfg) {
  std::vector<CutlassGemmConfig> out;
#ifdef FAST_BUILD
  if (cfg & CutlassGemmConfig::GROUPED_GEMM) {
    out = {CutlassGemmConfig{CutlassTileConfigSM120::CtaShape128x64x64B, MainloopScheduleType::AUTO,
                             EpilogueScheduleType::AUTO, ClusterShape::ClusterShape_1x1x1}};
  } else {
    out = {CutlassGemmConfig{CutlassTileConfigSM120::CtaShape256x128x64B, MainloopScheduleType::AUTO,
                             EpilogueScheduleType::AUTO, ClusterShape::ClusterShape_1x1x1}};
  }
#else
  // every tile; bad ones are caught by the workspace probe
  static constexpr CutlassTileConfigSM120 every[] = {
      CutlassTileConfigSM120::CtaShape128x64x64B,  CutlassTileConfigSM120::CtaShape128x32x128B,
      CutlassTileConfigSM120::CtaShape256x128x64B, CutlassTileConfigSM120::CtaShape128x128x128B,
      CutlassTileConfigSM120::CtaShape128x128x256B, CutlassTileConfigSM120::CtaShape128x64x128B,
  };
  for (auto t : every) {
    out.push_back(CutlassGemmConfig{t, MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                                    ClusterShape::ClusterShape_1x1x1});
  }
#endif
  if (cfg & CutlassGemmConfig::GROUPED_GEMM) {
    bool const mixed_fp8_in = cfg & CutlassGemmConfig::FP8FP4_MIXED;
    auto drop = [mixed_fp8_in](CutlassGemmConfig const& c) {
      switch (c.tile_config_sm120) {
        case CutlassTileConfigSM120::CtaShape128x128x256B:
          return true;
        case CutlassTileConfigSM120::CtaShape128x64x64B:
        case CutlassTileConfigSM120::CtaShape256x128x64B:
          return mixed_fp8_in;
        case CutlassTileConfigSM120::CtaShape128x32x128B:
          return false;
        default:
          return false;
      }
    };
    out.erase(std::remove_if(out.begin(), out.end(), drop), out.end());
  }
  return out;
}
}  // namespace acme::kernels
"""

# An older-style heuristic: early returns per path, push_back under an FP4 check, no prune.
HEURISTIC_OLD = """\
std::vector<CutlassGemmConfig> get_candidate_configs_sm120(CandidateConfigTypeParam const config) {
#ifndef FAST_BUILD
  if (config & CutlassGemmConfig::GROUPED_GEMM) {
    std::vector<CutlassGemmConfig> v;
    if ((config & CutlassGemmConfig::FP4_ONLY) != 0) {
      v.push_back(CutlassGemmConfig{CutlassTileConfigSM120::CtaShape128x64x128B,
                                    MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                                    ClusterShape::ClusterShape_1x1x1});
      v.push_back(CutlassGemmConfig{CutlassTileConfigSM120::CtaShape128x128x64B,
                                    MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                                    ClusterShape::ClusterShape_1x1x1});
      return v;
    }
    TLLM_THROW("grouped SM120 wants fp4");
  } else {
    return {CutlassGemmConfig{CutlassTileConfigSM120::CtaShape128x128x256B,
                              MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                              ClusterShape::ClusterShape_1x1x1}};
  }
#else
  return {CutlassGemmConfig{CutlassTileConfigSM120::CtaShape128x64x128B,
                            MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                            ClusterShape::ClusterShape_1x1x1}};
#endif
}
"""

# The shape predicate as an `if constexpr` chain with a trailing return, plus the dispatch.
DISPATCH = """\
namespace acme::kernels {
template <typename CtaShape, typename ClusterShape, typename DataType>
constexpr bool are_tile_shapes_supported_sm120() {
  using namespace cute;
  if constexpr (cute::size<0>(ClusterShape{}) * cute::size<1>(ClusterShape{}) != 1) {
    return false;
  }
  constexpr int m = cute::get<0>(CtaShape{});
  constexpr int n = cute::get<1>(CtaShape{});
  constexpr int k = cute::get<2>(CtaShape{});
  if constexpr (m == 128 && (n == 64 || n == 128) && k == 128) {
    return true;
  } else if constexpr (m == 256 && n == 128 && k == 128) {
    return true;
  }
  return m == 128 && n % 64 == 0 && k == 256;
}

template <typename T>
void dispatch_tiles(GemmConfig cfg) {
#define SHAPE_CASE(SMVERSION, M, N, K) \\
  case CutlassTileConfigSM##SMVERSION::CtaShape##M##x##N##x##K##B: { run<M, N, K>(); break; }
  if (cfg.sm_version == 90) {
    switch (cfg.tile_config_sm90) {
      SHAPE_CASE(90, 128, 32, 128)
    }
  } else if (cfg.sm_version == 120) {
    switch (cfg.tile_config_sm120) {
      SHAPE_CASE(120, 128, 64, 64)
      SHAPE_CASE(120, 128, 64, 128)
      SHAPE_CASE(120, 256, 128, 64)
      SHAPE_CASE(120, 128, 128, 128)
      SHAPE_CASE(120, 128, 32, 128)
    }
  }
#undef SHAPE_CASE
}
}  // namespace acme::kernels
"""

KERNELS = "data/csrc/acme/kernels"


def write_tree(root: Path, heuristic: str = HEURISTIC_NEW, dispatch: str | None = DISPATCH) -> Path:
    """A package-shaped tree (``data/csrc/...``) holding our fixture sources."""
    (root / KERNELS / "moe").mkdir(parents=True)
    (root / KERNELS / sr.HEURISTIC_FILE).write_text(heuristic)
    if dispatch is not None:
        (root / KERNELS / "moe" / sr.DISPATCH_FILE).write_text(dispatch)
    (root / "_build_meta.py").write_text('__version__ = "9.8.7"\n')
    return root


@pytest.fixture
def tree(tmp_path: Path) -> sr.SourceTree:
    found = sr.find_tree({sr.ENV_VAR: str(write_tree(tmp_path / "fi"))})
    assert found is not None
    return found


@pytest.fixture
def no_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide any real flashinfer so only the fixtures (or nothing) are read."""
    monkeypatch.setattr(sr, "_package_dir", lambda: None)
    monkeypatch.delenv(sr.ENV_VAR, raising=False)


# ------------------------------------------------------------------------------- locating


def test_env_tree_is_indexed_with_its_version(tree: sr.SourceTree) -> None:
    assert tree.version == "9.8.7"
    assert tree.label == f"FlashInfer 9.8.7 (${sr.ENV_VAR})"
    path = tree.find(sr.HEURISTIC_FILE)
    assert path is not None and path.parts[-2:] == ("kernels", sr.HEURISTIC_FILE)
    assert tree.find("missing.h") is None
    assert tree.find("") is None and tree.find("../") is None


def test_find_prefers_the_longest_matching_path_tail(tmp_path: Path) -> None:
    for sub in ("a/common", "b/common", "b/other"):
        (tmp_path / "csrc" / sub).mkdir(parents=True)
        (tmp_path / "csrc" / sub / "util.h").write_text("// x\n")
    tree = sr.find_tree({sr.ENV_VAR: str(tmp_path)})
    assert tree is not None
    hit = tree.find("/build/pkg/b/common/util.h")
    assert hit is not None and hit.parts[-3:] == ("b", "common", "util.h")
    assert tree.find("C:\\src\\a\\common\\util.h") == tmp_path / "csrc/a/common/util.h"


def test_env_var_that_is_not_a_directory_finds_nothing(tmp_path: Path) -> None:
    assert sr.find_tree({sr.ENV_VAR: str(tmp_path / "nope")}) is None


def test_walk_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "csrc").mkdir()
    for i in range(30):
        (tmp_path / "csrc" / f"f{i}.h").write_text("")
    monkeypatch.setattr(sr, "MAX_ENTRIES", 10)
    tree = sr.find_tree({sr.ENV_VAR: str(tmp_path)})
    assert tree is not None and tree.truncated
    assert sum(len(v) for v in tree.files.values()) == 10


def test_installed_package_is_located_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = write_tree(tmp_path / "flashinfer")
    monkeypatch.delenv(sr.ENV_VAR, raising=False)
    monkeypatch.setattr(sr, "_package_dir", lambda: pkg)
    monkeypatch.setattr(sr, "_installed_version", lambda: "")
    tree = sr.find_tree()
    assert tree is not None and tree.origin == "installed" and tree.version == "9.8.7"


# ------------------------------------------------------------------------------- throw sites


def test_source_context_shows_the_lines_around_the_throw(tree: sr.SourceTree) -> None:
    rows = DISPATCH.splitlines()
    target = next(i for i, r in enumerate(rows, 1) if "SHAPE_CASE(120, 256" in r)
    ctx = sr.source_context(f"moe/{sr.DISPATCH_FILE}", target, radius=2, tree=tree)
    assert ctx is not None and ctx.line == target
    assert [n for n, _ in ctx.lines] == list(range(target - 2, target + 3))
    assert dict(ctx.lines)[target] == rows[target - 1]
    assert ctx.to_dict()["lines"][2] == [target, rows[target - 1]]


def test_source_context_bounds(tree: sr.SourceTree, tmp_path: Path) -> None:
    n_rows = len(DISPATCH.splitlines())
    assert sr.source_context(sr.DISPATCH_FILE, n_rows + 1, tree=tree) is None
    assert sr.source_context(sr.DISPATCH_FILE, 0, tree=tree) is None
    assert sr.source_context("not_there.h", 3, tree=tree) is None
    first = sr.source_context(sr.DISPATCH_FILE, 1, radius=500, tree=tree)
    assert first is not None and first.lines[0][0] == 1
    assert len(first.lines) == min(n_rows, sr.MAX_RADIUS + 1)
    long = tmp_path / "wide" / "csrc"
    long.mkdir(parents=True)
    (long / "wide.h").write_text("x" * 5000 + "\n")
    wide = sr.find_tree({sr.ENV_VAR: str(tmp_path / "wide")})
    ctx = sr.source_context("wide.h", 1, tree=wide)
    assert ctx is not None and len(ctx.lines[0][1]) == sr.MAX_LINE_CHARS


def test_oversized_files_are_not_read(tree: sr.SourceTree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sr, "MAX_FILE_BYTES", 100)
    assert sr.source_context(sr.DISPATCH_FILE, 3, tree=tree) is None
    assert sr.read_tiles(tree) is None


# ------------------------------------------------------------------------------- tiles


@needs_ts
def test_candidates_by_build_and_path(tree: sr.SourceTree) -> None:
    src = sr.read_tiles(tree)
    assert src is not None and src.version == "9.8.7"

    def names(cs: tuple[sr.Candidate, ...]) -> list[str]:
        return [c.name for c in cs]

    assert names(src.offered(grouped=True, fast_build=True)) == ["CtaShape128x64x64B"]
    assert names(src.offered(grouped=False, fast_build=True)) == ["CtaShape256x128x64B"]
    full = names(src.offered(grouped=True, fast_build=False))
    assert full == [
        "CtaShape128x64x64B",
        "CtaShape128x32x128B",
        "CtaShape256x128x64B",
        "CtaShape128x128x128B",
        "CtaShape128x128x256B",
        "CtaShape128x64x128B",
    ]
    assert names(src.offered(grouped=False, fast_build=False)) == full
    # the sm90 function's enumerator is not an SM120 candidate
    assert all(c.line > 4 for c in src.candidates)


@needs_ts
def test_prune_switch_follows_fall_through_and_resolves_the_condition(
    tree: sr.SourceTree,
) -> None:
    src = sr.read_tiles(tree)
    assert src is not None
    whens = {x.name: x.when for x in src.exclusions}
    assert whens == {
        "CtaShape128x128x256B": "always",
        "CtaShape128x64x64B": "mixed_fp8_in = cfg & CutlassGemmConfig::FP8FP4_MIXED",
        "CtaShape256x128x64B": "mixed_fp8_in = cfg & CutlassGemmConfig::FP8FP4_MIXED",
    }
    assert all(x.grouped is True for x in src.exclusions)


@needs_ts
def test_shape_predicate_is_evaluated_per_tile(tree: sr.SourceTree) -> None:
    src = sr.read_tiles(tree)
    assert src is not None and src.supported is not None
    for ok in [(128, 64, 128), (128, 128, 128), (256, 128, 128), (128, 64, 256), (128, 256, 256)]:
        assert ok in src.supported, ok
    for bad in [(128, 32, 128), (128, 32, 256), (256, 128, 256), (128, 128, 512), (64, 64, 128)]:
        assert bad not in src.supported, bad
    assert not src.undecided


@needs_ts
def test_dispatch_cases_are_the_sm120_ones(tree: sr.SourceTree) -> None:
    src = sr.read_tiles(tree)
    assert src is not None
    assert src.dispatch == frozenset(
        {
            "CtaShape128x64x64B",
            "CtaShape128x64x128B",
            "CtaShape256x128x64B",
            "CtaShape128x128x128B",
            "CtaShape128x32x128B",
        }
    )


@needs_ts
def test_pickable_joins_prune_dispatch_and_predicate(tree: sr.SourceTree) -> None:
    src = sr.read_tiles(tree)
    assert src is not None
    fp4 = {p.name: p for p in src.pickable(bits_a=4, grouped=True, fast_build=False)}
    assert fp4["CtaShape128x64x64B"] == sr.Pickable("CtaShape128x64x64B", (128, 64, 128))
    assert fp4["CtaShape128x128x256B"].dropped == "pruned always"
    # 128x32x128B has a dispatch case but the predicate rejects 128x32x256 elements
    assert "rejects 128x32x256" in fp4["CtaShape128x32x128B"].dropped
    assert (
        fp4["CtaShape128x128x128B"].tile == (128, 128, 256)
        and not fp4["CtaShape128x128x128B"].dropped
    )
    fp8 = {p.name: p for p in src.pickable(bits_a=8, grouped=True, fast_build=False)}
    assert fp8["CtaShape128x64x64B"].dropped == "pruned when mixed_fp8_in"
    assert fp8["CtaShape128x128x128B"].tile == (128, 128, 128)
    assert not fp8["CtaShape128x128x128B"].dropped
    assert fp8["CtaShape128x32x128B"].dropped.endswith("rejects 128x32x128")
    # the dense path has no prune, dispatch or predicate applied
    dense = src.pickable(bits_a=4, grouped=False, fast_build=False)
    assert [p.dropped for p in dense] == [""] * 6


@needs_ts
def test_dispatch_case_missing_drops_the_tile(tmp_path: Path) -> None:
    narrow = DISPATCH.replace("      SHAPE_CASE(120, 128, 64, 128)\n", "")
    tree = sr.find_tree({sr.ENV_VAR: str(write_tree(tmp_path / "fi", dispatch=narrow))})
    assert tree is not None
    src = sr.read_tiles(tree)
    assert src is not None
    picks = {p.name: p.dropped for p in src.pickable(bits_a=8, grouped=True, fast_build=False)}
    assert picks["CtaShape128x64x128B"] == "no grouped dispatch case"


@needs_ts
def test_older_layout_with_early_returns(tmp_path: Path) -> None:
    tree = sr.find_tree({sr.ENV_VAR: str(write_tree(tmp_path / "fi", HEURISTIC_OLD, None))})
    assert tree is not None
    src = sr.read_tiles(tree)
    assert src is not None and src.supported is None and src.dispatch is None
    full_grouped = [c.name for c in src.offered(grouped=True, fast_build=False)]
    assert full_grouped == ["CtaShape128x64x128B", "CtaShape128x128x64B"]
    assert [c.name for c in src.offered(grouped=False, fast_build=False)] == [
        "CtaShape128x128x256B"
    ]
    assert [c.name for c in src.offered(grouped=True, fast_build=True)] == ["CtaShape128x64x128B"]
    assert not src.exclusions


@needs_ts
def test_missing_function_or_garbage_reads_nothing(tmp_path: Path) -> None:
    garbage = "int main() { return 0; }\n#ifdef X\n{{{{ CutlassTileConfigSM120::CtaShape1x1x1B"
    tree = sr.find_tree({sr.ENV_VAR: str(write_tree(tmp_path / "fi", garbage, "\x00\xff"))})
    assert tree is not None
    assert sr.read_tiles(tree) is None


# ------------------------------------------------------------------------------- the verifier


def grouped_spec(**kw: object) -> GemmSpec:
    base: dict[str, object] = {
        "cause": "smem-overflow",
        "arch": "sm_120",
        "family": "cutlass-grouped-blockscaled",
        "dtype_a": "fp4_e2m1",
        "dtype_b": "fp4_e2m1",
        "dtype_d": "bf16",
        "tile": (128, 64, 128),
        "framework": "flashinfer",
    }
    base.update(kw)
    return GemmSpec(**base)  # type: ignore[arg-type]


@needs_ts
def test_verdict_names_the_tiles_this_version_can_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_installed: None
) -> None:
    monkeypatch.setenv(sr.ENV_VAR, str(write_tree(tmp_path / "fi")))
    v = verify_model(grouped_spec(framework_version="9.8.6"), load_kb(), "model")
    assert v.tile_source == "FlashInfer 9.8.7 ($CRASHKB_FLASHINFER_SRC)"
    # usable for FP4: 128x64x64B, 256x128x64B, 128x128x128B, 128x64x128B (the rest dropped)
    assert [t.name for t in v.tiles] == [
        "CtaShape128x64x64B",
        "CtaShape256x128x64B",
        "CtaShape128x128x128B",
        "CtaShape128x64x128B",
    ]
    note = next(n for n in v.notes if "can pick for grouped (MoE) GEMMs on sm_120" in n)
    for t in v.tiles:
        assert f"{t.name} ({'fits' if t.fits else 'over'})" in note
    assert "never: CtaShape128x32x128B (" in note and "CtaShape128x128x256B (pruned always)" in note
    assert any("log's FlashInfer is 9.8.6" in n for n in v.notes)
    assert v.to_dict()["tile_source"] == v.tile_source


@needs_ts
def test_dense_path_uses_the_fast_build_list_when_the_jit_module_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_installed: None
) -> None:
    root = write_tree(tmp_path / "fi")
    (root / "jit" / "gemm").mkdir(parents=True)
    (root / "jit" / "gemm" / "core.py").write_text(
        "def gen_gemm_sm120_module_cutlass_fp4():\n    return spec(flags=['-DFAST_BUILD'])\n"
        "\ndef gen_other():\n    return spec(flags=[])\n"
    )
    monkeypatch.setenv(sr.ENV_VAR, str(root))
    spec = grouped_spec(family="cutlass-dense-blockscaled", tile=(256, 128, 128))
    v = verify_model(spec, load_kb(), "model")
    assert [t.name for t in v.tiles] == ["CtaShape256x128x64B"]


def test_without_sources_the_kb_table_is_used(no_installed: None) -> None:
    v = verify_model(grouped_spec(), load_kb(), "model")
    assert v.tile_source == "kb table" and v.tiles
    expected = (
        "FlashInfer not found: tiles from the kb table."
        if sr.tree_sitter_available()
        else "tree-sitter is not installed (extra 'verify'): tiles from the kb table."
    )
    assert expected in v.notes


def test_without_tree_sitter_the_kb_table_is_used(
    tree: sr.SourceTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sr.ENV_VAR, str(tree.root))
    monkeypatch.setattr(sr, "_parser", lambda: None)
    v = verify_model(grouped_spec(), load_kb(), "model")
    assert v.tile_source == "kb table"
    assert any(n.startswith("tree-sitter is not installed") for n in v.notes)


def test_trtllm_logs_keep_the_kb_table(
    tree: sr.SourceTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sr.ENV_VAR, str(tree.root))
    v = verify_model(grouped_spec(framework="tensorrt_llm"), load_kb(), "model")
    assert v.tile_source == "kb table"


def test_throw_site_context_lands_in_the_verification(
    tree: sr.SourceTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sr.ENV_VAR, str(tree.root))
    spec = grouped_spec(throw_site=(sr.DISPATCH_FILE, 20), arch="sm_999")
    v = verify_model(spec, load_kb(), "model")  # even when the arch cannot be modelled
    assert v.source_line == 20 and v.source_file.endswith(sr.DISPATCH_FILE)
    assert dict(v.source_lines)[20] == DISPATCH.splitlines()[19]
    ctx = v.to_dict()["source_context"]
    assert ctx["line"] == 20 and len(ctx["lines"]) == 13
    assert any(n.startswith(f"{sr.DISPATCH_FILE}:20 read from FlashInfer 9.8.7") for n in v.notes)
    assert v.notes[-1].startswith("Cannot model")


@needs_ts
def test_installed_flashinfer_if_any_parses() -> None:
    """Against the real wheel when one is installed: the reader must still find its tiles."""
    if importlib.util.find_spec("flashinfer") is None:
        pytest.skip("flashinfer is not installed")
    tree = sr.find_tree({})
    assert tree is not None
    src = sr.read_tiles(tree)
    assert src is not None and src.candidates and src.supported
