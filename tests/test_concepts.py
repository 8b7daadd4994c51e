"""Concept vocabularies: strict loading, expansion into rules, and new knowledge as data only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kb_fixtures import ZETA_GPU

from diagnose.errors import RuleFileError
from diagnose.kb import load_kb
from diagnose.rules import load_rules
from diagnose.rules.examples import run_examples

KB_DIR = Path(__file__).resolve().parents[1] / "kb"

GOOD = """\
name = "widget"
description = "a widget model"
patterns = ['widget-\\d+']
examples = ["widget-7"]
non_examples = ["gadget-7"]
"""


def _kb_with(tmp_path: Path, name: str, text: str) -> Path:
    root = tmp_path / "kb"
    shutil.copytree(KB_DIR, root)
    (root / "concepts" / f"{name}.toml").write_text(text)
    return root


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        (GOOD.replace("widget-\\d+", "widget-("), "patterns[0]"),
        (GOOD.replace("widget-\\d+", "widget-(\\d+)"), "patterns[0]"),
        # a basic string: "\\b" is a backspace, not a word boundary
        (GOOD.replace("['widget-\\d+']", '["\\bwidget-7"]'), "patterns[0]"),
        (GOOD.replace('"widget-7"]', '"widget-x"]'), "examples[0]"),
        (GOOD.replace('"gadget-7"', '"a widget-9 here"'), "non_examples[0]"),
        (GOOD.replace('name = "widget"', 'name = "gadget"'), "name"),
        (GOOD.replace('description = "a widget model"\n', ""), None),
        (GOOD + "colour = 'red'\n", "colour"),
    ],
)
def test_a_broken_concept_fails_at_load_naming_file_line_and_field(
    tmp_path: Path, broken: str, field: str | None
) -> None:
    root = _kb_with(tmp_path, "widget", broken)
    with pytest.raises(RuleFileError) as err:
        load_kb(root=root)
    assert err.value.path.endswith("widget.toml")
    assert err.value.field == field
    if field is not None:
        assert err.value.line is not None


def test_every_shipped_concept_checks_its_own_examples() -> None:
    kb = load_kb()
    names = {c.name for c in kb.concepts}
    assert {"arch", "unsupported", "shape"} <= names
    for concept in kb.concepts:
        assert concept.examples and concept.non_examples


ARCH_RULE = """\
id = "arch-unsupported/widget-refuses-arch"
cause = "arch-unsupported"
title = "Widget refuses the GPU"
severity = "fatal"
confidence = 0.6
references = ["example-org/widget#1"]
summary = "Widget refused it."

[match]
any = [ { regex = '(?i)widget kernel {{unsupported}} [^\\n]{0,20}{{arch}}' } ]

[[examples]]
name = "new-gpu"
expect = "match"
log = '''
RuntimeError: widget kernel not supported on Zeta 9000
'''

[[examples]]
name = "other-words"
expect = "no-match"
log = '''
RuntimeError: widget kernel not supported on this planet
'''
"""


def test_a_new_gpu_in_kb_data_reaches_every_rule_that_says_arch(tmp_path: Path) -> None:
    rules_dir = tmp_path / "rules" / "arch-unsupported"
    rules_dir.mkdir(parents=True)
    (rules_dir / "widget-refuses-arch.toml").write_text(ARCH_RULE)
    extra = tmp_path / "extra-kb"
    extra.mkdir()
    (extra / "gpus.toml").write_text(ZETA_GPU)
    kb = load_kb([extra])
    rules = load_rules([tmp_path / "rules"], kb=kb, include_default=False)
    results = run_examples(rules, kb)
    assert [r.verdict for r in results] == ["ok", "ok"]
    # Without the product in the kb, the same rule does not know it is a GPU.
    plain = load_rules([tmp_path / "rules"], kb=load_kb(), include_default=False)
    assert [r.verdict for r in run_examples(plain, load_kb())] == ["missed", "ok"]


def test_an_unknown_concept_fails_the_rule_at_load(tmp_path: Path) -> None:
    rules_dir = tmp_path / "rules" / "arch-unsupported"
    rules_dir.mkdir(parents=True)
    broken = ARCH_RULE.replace("{{arch}}", "{{archh}}")
    (rules_dir / "widget-refuses-arch.toml").write_text(broken)
    with pytest.raises(RuleFileError) as err:
        load_rules([tmp_path / "rules"], include_default=False)
    assert err.value.field == "match.any[0].regex"
    assert "archh" in str(err.value)
