"""Rule loader: valid rules load; every broken rule file fails naming file, 1-based line, field."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.errors import RuleFileError
from diagnose.rules import check_rules, load_rules
from diagnose.rules.examples import run_examples
from diagnose.rules.loader import ENV_VAR, rule_files
from diagnose.rules.schema import ContextSignal, NumericSignal, RegexSignal, TextSignal
from diagnose.tomlsource import load_toml

ROOT = Path(__file__).resolve().parents[1]


class FakeKb:
    """Just enough knowledge base for cause checks (the real one is tested elsewhere)."""

    version = "test"
    causes = frozenset({"smem-overflow", "cuda-oom", "tactic-skipped", "unknown"})

    def cause(self, cause_id: str) -> str:
        if cause_id not in self.causes:
            raise KeyError(cause_id)
        return cause_id


KB = FakeKb()

# A valid rule; tests break one thing at a time.  Line 1 is `id`, line 13 the regex signal,
# line 15 `none`, line 17 the first [[examples]], line 25 the second.
GOOD = """\
id = "cuda-oom/widget-alloc"
cause = "cuda-oom"
title = "Widget allocator ran out of device memory"
severity = "fatal"
confidence = 0.6
references = ["example-org/widget#12"]
summary = "Widget asked for {wanted:size}."
fallback = "Widget ran out of device memory."

[match]
any = [
  { text = "widget alloc failed" },
  { regex = 'widget: need (?P<wanted>\\d+) bytes', extract = { wanted = "bytes" } },
]
none = [ { text = "widget retry ok" } ]

[[examples]]
name = "plain"
expect = "match"
facts = { wanted = 4096 }
log = '''
widget: need 4096 bytes
'''

[[examples]]
name = "retried"
expect = "no-match"
log = '''
widget alloc failed, widget retry ok
'''
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load_error(tmp_path: Path, text: str, rel: str = "cuda-oom/widget-alloc.toml") -> RuleFileError:
    write(tmp_path, rel, text)
    with pytest.raises(RuleFileError) as info:
        load_rules([tmp_path], kb=KB, include_default=False)
    return info.value


def test_good_rule_loads(tmp_path: Path) -> None:
    write(tmp_path, "cuda-oom/widget-alloc.toml", GOOD)
    rules = load_rules([tmp_path], kb=KB, include_default=False)
    rule = rules.get("cuda-oom/widget-alloc")
    assert rule is not None and len(rules) == 1
    assert isinstance(rule.any[0], TextSignal)
    assert isinstance(rule.any[1], RegexSignal) and rule.any[1].extract == (("wanted", "bytes"),)
    assert rule.facts == {"wanted"}
    assert [e.expect for e in rule.examples] == ["match", "no-match"]
    assert rule.examples[0].line == 17


def test_bad_toml_names_line(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace('severity = "fatal"', "severity = fatal"))
    assert err.line == 4 and "invalid TOML" in err.message


def test_unknown_top_level_field(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace("confidence = 0.6", "confidence = 0.6\nconfidnce = 1"))
    assert (err.line, err.field) == (6, "confidnce")
    assert "unknown field" in err.message


def test_unknown_signal_key_in_multiline_array(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace('extract = { wanted = "bytes" } },', "units = 1 },"))
    assert (err.line, err.field) == (13, "match.any[1].units")


def test_wrong_type(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace("confidence = 0.6", 'confidence = "high"'))
    assert (err.line, err.field) == (5, "confidence")
    assert "expected an integer or a number" in err.message


def test_bad_regex_located_on_its_line(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace("(?P<wanted>\\d+) bytes", "(?P<wanted>\\d+ bytes"))
    assert (err.line, err.field) == (13, "match.any[1].regex")
    assert "invalid RE2 regex" in err.message and "missing )" in err.message


@pytest.mark.parametrize("pattern", ["(a)\\1", "foo(?=bar)", "(?<!x)widget"])
def test_regex_re2_refuses_says_why(tmp_path: Path, pattern: str) -> None:
    text = GOOD.replace('{ text = "widget retry ok" }', f"{{ regex = '{pattern}' }}")
    err = load_error(tmp_path, text)
    assert (err.line, err.field) == (15, "match.none[0].regex")
    assert "RE2 has no backreferences or lookaround" in err.message


def test_duplicate_id_across_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write(first, "cuda-oom/widget-alloc.toml", GOOD)
    dup = write(second, "cuda-oom/widget-alloc.toml", GOOD)
    with pytest.raises(RuleFileError) as info:
        load_rules([first, second], kb=KB, include_default=False)
    assert info.value.path == str(dup) and info.value.line == 1
    assert "duplicate id 'cuda-oom/widget-alloc'" in info.value.message


def test_alias_colliding_with_id(tmp_path: Path) -> None:
    write(tmp_path, "cuda-oom/widget-alloc.toml", GOOD)
    other = GOOD.replace("widget-alloc", "widget-alloc2").replace(
        'title = "', 'aliases = ["cuda-oom/widget-alloc"]\ntitle = "'
    )
    err = load_error(tmp_path, other, "cuda-oom/widget-alloc2.toml")
    assert (err.line, err.field) == (3, "aliases")


def test_id_must_equal_path(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD, "cuda-oom/widget.toml")
    assert (err.line, err.field) == (1, "id")
    assert "must equal the file path 'cuda-oom/widget'" in err.message


def test_unknown_cause(tmp_path: Path) -> None:
    text = GOOD.replace("cuda-oom", "gpu-gremlins")
    err = load_error(tmp_path, text, "gpu-gremlins/widget-alloc.toml")
    assert (err.line, err.field) == (2, "cause") and "unknown cause" in err.message


def test_placeholder_must_be_a_declared_fact(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace("{wanted:size}", "{needed}"))
    assert (err.line, err.field) == (7, "summary")
    assert "'{needed}' is not a declared fact (wanted)" in err.message


def test_needs_a_no_match_example(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace('expect = "no-match"', 'expect = "match"'))
    assert err.field == "examples" and "at least one 'no-match' example" in err.message


def test_todo_example_needs_reason(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace('expect = "no-match"', 'expect = "todo-no-match"'))
    assert (err.line, err.field) == (25, "examples[1]")


def test_example_fact_must_be_declared(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace("facts = { wanted = 4096 }", "facts = { got = 1 }"))
    assert (err.line, err.field) == (20, "examples[0].facts")


def test_missing_required_field_points_at_its_table(tmp_path: Path) -> None:
    err = load_error(tmp_path, GOOD.replace('name = "retried"\n', ""))
    assert (err.line, err.field) == (25, "examples[1].name") and "missing" in err.message


def test_numeric_operands_are_checked(tmp_path: Path) -> None:
    unknown_fact = GOOD.replace(
        "none = [", 'confirm = [ { numeric = "wanted > spare" } ]\nnone = ['
    )
    err = load_error(tmp_path, unknown_fact)
    assert (err.line, err.field) == (15, "match.confirm[0].numeric") and "'spare'" in err.message
    unknown_arch = GOOD.replace(
        "none = [", 'confirm = [ { numeric = "wanted > arch.smem_galore" } ]\nnone = ['
    )
    err = load_error(tmp_path, unknown_arch)
    assert "unknown hardware fact 'arch.smem_galore'" in err.message
    assert "smem_per_block_optin" in err.message


def test_signal_with_two_kinds(tmp_path: Path) -> None:
    err = load_error(
        tmp_path, GOOD.replace('{ text = "widget retry ok" }', '{ text = "a", regex = "b" }')
    )
    assert (err.line, err.field) == (15, "match.none[0]")
    assert "exactly one of" in err.message


def test_context_and_numeric_signals_parse(tmp_path: Path) -> None:
    text = GOOD.replace(
        "none = [",
        'optional = [ { context = "ep_size", op = ">=", value = 2 } ]\n'
        'confirm = [ { numeric = "wanted >= arch.smem_per_block_optin" } ]\nnone = [',
    )
    write(tmp_path, "cuda-oom/widget-alloc.toml", text)
    rule = load_rules([tmp_path], kb=KB, include_default=False).rules[0]
    assert isinstance(rule.optional[0], ContextSignal) and rule.optional[0].value == 2
    numeric = rule.confirm[0]
    assert isinstance(numeric, NumericSignal) and numeric.uses_hardware
    assert {"ep_size", "arch", "gpu", "arch.smem_per_block_optin"} <= rule.facts


def test_check_rules_reports_every_broken_file(tmp_path: Path) -> None:
    write(tmp_path, "cuda-oom/widget-alloc.toml", GOOD)
    write(tmp_path, "cuda-oom/one.toml", GOOD.replace("widget-alloc", "one").replace("0.6", "7"))
    write(
        tmp_path,
        "cuda-oom/two.toml",
        GOOD.replace("widget-alloc", "two").replace("[match]", "[mtch]"),
    )
    rules, errors, _ = check_rules([tmp_path], kb=KB, include_default=False)
    assert [r.id for r in rules] == ["cuda-oom/widget-alloc"]
    assert sorted((Path(e.path).name, e.line, e.field) for e in errors) == [
        ("one.toml", 5, "confidence"),
        ("two.toml", 10, "mtch"),
    ]


def test_underscore_files_and_env_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user"
    write(user, "cuda-oom/widget-alloc.toml", GOOD)
    write(user, "_template.toml", "not = [valid")
    write(user, "_drafts/cuda-oom/x.toml", "not = [valid")
    assert [p.name for p in rule_files(user)] == ["widget-alloc.toml"]
    monkeypatch.setenv(ENV_VAR, str(user))
    rules = load_rules(kb=KB, include_default=False)
    assert [r.id for r in rules] == ["cuda-oom/widget-alloc"]


def test_template_is_a_valid_rule(tmp_path: Path) -> None:
    """The copy-me template must itself load once placed at the path its id names."""
    text = (ROOT / "rules" / "_template.toml").read_text()
    rule_id = load_toml(ROOT / "rules" / "_template.toml").data["id"]
    write(tmp_path, f"{rule_id}.toml", text)
    rules = load_rules([tmp_path], kb=KB, include_default=False)
    assert rules.get(rule_id) is not None
    results = run_examples(rules, KB)
    assert results and all(r.verdict == "ok" for r in results), [r.explain() for r in results]


def test_shipped_rules_load_with_the_real_kb() -> None:
    rules = load_rules(include_default=True)
    ids = {r.id for r in rules}
    assert {
        "smem-overflow/triton-out-of-resources",
        "cuda-oom/torch-out-of-memory",
        "tactic-skipped/autotuner-skipped-tactic",
    } <= ids
    for rule in rules:
        assert rule.path.endswith(f"{rule.id}.toml")


# --- diagnose-kb ---------------------------------------------------------------------------


def test_kb_cli_lint_test_and_docs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from diagnose.kbcli import app

    runner = CliRunner()
    good = write(tmp_path / "good", "cuda-oom/widget-alloc.toml", GOOD).parents[1]
    result = runner.invoke(app, ["lint", "--only", str(good)])
    assert result.exit_code == 0 and "1 rules OK" in result.output
    result = runner.invoke(app, ["test", "--only", str(good)])
    assert result.exit_code == 0 and "2 examples: 2 ok" in result.output
    assert "cuda-oom/widget-alloc" in runner.invoke(app, ["docs", "--only", str(good)]).output

    bad = write(tmp_path / "bad", "cuda-oom/widget-alloc.toml", GOOD.replace("0.6", '"x"'))
    result = runner.invoke(app, ["lint", "--only", str(bad.parents[1])])
    assert result.exit_code == 2 and f"{bad}:5: field 'confidence'" in result.output

    wrong = GOOD.replace("widget: need 4096 bytes", "widget: needs 4096 bytes")
    missed = write(tmp_path / "missed", "cuda-oom/widget-alloc.toml", wrong).parents[1]
    result = runner.invoke(app, ["test", "--only", str(missed)])
    assert result.exit_code == 1 and "missed: cuda-oom/widget-alloc:plain" in result.output


def test_regex_in_a_basic_string_with_backslash_b_fails_at_load(tmp_path: Path) -> None:
    # "\bwidget" in a TOML basic string is a backspace before "widget": a regex that never
    # matches, silently. It must fail where it was written instead.
    text = GOOD.replace('{ text = "widget retry ok" }', '{ regex = "\\bwidget retry" }')
    err = load_error(tmp_path, text)
    assert (err.line, err.field) == (15, "match.none[0].regex")
    assert "backspace" in err.message and "literal string" in err.message
