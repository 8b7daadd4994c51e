"""A rule's wording is error vocabulary: a new rule file alone makes its line a crash region."""

from __future__ import annotations

from pathlib import Path

from kb_fixtures import WIDGET_RULE

from diagnose import diagnose_text
from diagnose.model import LogLine
from diagnose.regions import find_regions
from diagnose.rules import load_rules
from diagnose.rules.wording import RuleWording

# Another failure first, so that the log has a region and region rules read only regions.
LOG = """\
Traceback (most recent call last):
  File "/srv/app/warmup.py", line 3, in <module>
    warm()
ValueError: warm-up prompt list is empty
INFO 03-01 10:00:00 retrying without warm-up
widget scheduler gave up on quota 7
"""


def _rules_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "rules" / "config-error"
    folder.mkdir(parents=True)
    (folder / "widget-quota-gave-up.toml").write_text(WIDGET_RULE)
    return tmp_path / "rules"


def test_a_new_rule_file_alone_makes_its_wording_a_crash_region(tmp_path: Path) -> None:
    without = diagnose_text(LOG)
    assert without.cause == "unknown"
    assert all(r.message_line != 6 for r in without.crashes)
    found = diagnose_text(LOG, rule_dirs=[_rules_dir(tmp_path)])
    assert found.primary is not None
    assert found.primary.rule_id == "config-error/widget-quota-gave-up"
    assert found.primary.fact("quota") == 7
    assert any(r.message_line == 6 for r in found.crashes)


def _wording(tmp_path: Path) -> RuleWording:
    return RuleWording(list(load_rules([_rules_dir(tmp_path)], include_default=False)))


def test_wording_answers_per_line_and_only_where_a_signal_fires(tmp_path: Path) -> None:
    wording = _wording(tmp_path)
    texts = [
        "widget scheduler gave up on quota 12",
        "widget scheduler gave up on quota later",  # the literal, but the regex does not match
        "unrelated line",
    ]
    assert wording.lines(texts) == [True, False, False]
    assert wording.lines([]) == []


def test_a_flood_of_one_line_is_answered_in_one_pass(tmp_path: Path) -> None:
    wording = _wording(tmp_path)
    texts = ["widget scheduler gave up on quota 3"] * 50_000 + ["done"]
    flags = wording.lines(texts)
    assert flags.count(True) == 50_000 and flags[-1] is False


def test_prose_and_indented_lines_stay_what_they_were(tmp_path: Path) -> None:
    wording = _wording(tmp_path).lines
    prose = [LogLine(1, "I think the widget scheduler gave up on quota 7 because of me?")]
    assert find_regions(prose, wording) == []
    indented = [LogLine(1, "    widget scheduler gave up on quota 7")]
    assert find_regions(indented, wording) == []
    plain = [LogLine(1, "widget scheduler gave up on quota 7")]
    assert [r.message_line for r in find_regions(plain, wording)] == [1]


def test_info_rules_and_second_all_signals_are_not_wording(tmp_path: Path) -> None:
    folder = tmp_path / "rules" / "config-error"
    folder.mkdir(parents=True)
    info = WIDGET_RULE.replace('severity = "fatal"', 'severity = "info"')
    (folder / "widget-quota-gave-up.toml").write_text(info)
    # The same wording as the second of two `all` signals: context, not the failure's words.
    both = WIDGET_RULE.replace("widget-quota-gave-up", "widget-quota-in-pool").replace(
        "any = [", 'all = [ { text = "pool=blue" }, '
    )
    (folder / "widget-quota-in-pool.toml").write_text(both)
    wording = RuleWording(list(load_rules([tmp_path / "rules"], include_default=False)))
    assert wording.lines(["widget scheduler gave up on quota 7", "pool=blue"]) == [False, False]
