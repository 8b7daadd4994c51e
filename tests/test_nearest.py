"""The nearest known case: named as likely only when close to one cause and clear of others."""

from __future__ import annotations

from pathlib import Path

from diagnose import diagnose_text
from diagnose.nearest import MIN_LEAD, MIN_SCORE, nearest

LIBRARY = (
    ("frobnicator exploded: flux capacitor <N> overheated", "cuda-oom", "cuda-oom/frob:one"),
    ("widget pool drained while dispatching tokens", "a2a-buffer-oom", "a2a/widget:one"),
)


def test_a_close_match_to_one_cause_is_likely() -> None:
    found = nearest("RuntimeError: frobnicator exploded: flux capacitor 9 overheated", LIBRARY)
    assert found is not None
    assert found.cause == "cuda-oom" and found.resembles == "cuda-oom/frob:one"
    assert found.score >= MIN_SCORE and found.lead >= MIN_LEAD


def test_a_distant_or_ambiguous_match_is_not_named() -> None:
    assert nearest("RuntimeError: the quux refused the bar", LIBRARY) is None
    twins = (*LIBRARY, ("frobnicator exploded: flux capacitor <N> overheated", "nccl-error", "n:1"))
    assert nearest("frobnicator exploded: flux capacitor 9 overheated", twins) is None
    assert nearest("", LIBRARY) is None


def test_a_message_of_generic_words_names_nothing() -> None:
    """A bare exception name is a word subset of every example that has it (token-set score
    100): it must say something of its own first (held-out rounds 66 and 69)."""
    library = (
        ("AssertionError: fp8 moe needs sm_90 or newer, got sm_120", "arch-unsupported", "a:1"),
        ("RuntimeError: CUDA error: invalid argument in custom allreduce", "nccl-error", "n:1"),
        *LIBRARY,
    )
    assert nearest("AssertionError", library) is None
    assert nearest("RuntimeError: CUDA error: invalid argument", library) is None
    found = nearest("AssertionError: fp8 moe needs sm_90 or newer, got sm_121", library)
    assert found is not None and found.cause == "arch-unsupported"


RULE = """\
id = "cuda-oom/frobnicator-overheated"
cause = "cuda-oom"
title = "The frobnicator overheated"
severity = "fatal"
confidence = 0.8
references = ["example-org/frob#3"]
summary = "It overheated."

[match]
any = [ { regex = 'frobnicator exploded: flux capacitor \\d+ overheated$' } ]

[[examples]]
name = "plain"
expect = "match"
log = '''
RuntimeError: frobnicator exploded: flux capacitor 7 overheated
'''

[[examples]]
name = "cool"
expect = "no-match"
log = '''
frobnicator fine: flux capacitor 7 cool
'''
"""

LOG = """\
Traceback (most recent call last):
  File "/srv/app/run.py", line 4, in <module>
    frob.run()
RuntimeError: frobnicator exploded: flux capacitor 12 overheated (third time today)
"""


def test_an_unmatched_fatal_error_gets_the_likely_cause_with_its_evidence(tmp_path: Path) -> None:
    folder = tmp_path / "rules" / "cuda-oom"
    folder.mkdir(parents=True)
    (folder / "frobnicator-overheated.toml").write_text(RULE)
    d = diagnose_text(LOG, rule_dirs=[tmp_path / "rules"])
    assert d.primary is None  # no rule matched: the regex wants the line to end there
    assert d.cause == "cuda-oom" and d.tier == "likely" and d.fatal is True
    assert d.likely is not None and d.likely.resembles == "cuda-oom/frobnicator-overheated:plain"
    assert "No rule matches this error" in d.summary
    assert d.to_dict()["likely"]["cause"] == "cuda-oom"
    assert d.fixes  # the likely cause's fixes


def test_a_survived_error_is_never_given_a_likely_cause(tmp_path: Path) -> None:
    folder = tmp_path / "rules" / "cuda-oom"
    folder.mkdir(parents=True)
    (folder / "frobnicator-overheated.toml").write_text(RULE)
    survived = LOG + "INFO 01-01 00:00:01 continuing with the next batch\n"
    d = diagnose_text(
        survived + "The server is fired up and ready to roll!\n", rule_dirs=[tmp_path / "rules"]
    )
    assert d.likely is None and d.cause == "unknown"
