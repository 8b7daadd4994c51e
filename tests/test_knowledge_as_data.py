"""New knowledge is data: a wording, a readiness phrase and a GPU take effect with no code change.

Each is added in a temporary folder (a rules directory, and a kb folder named by
``DIAGNOSE_KB_PATH``) and seen to change the diagnosis of the same log.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kb_fixtures import WIDGET_RULE, ZETA_GPU

from diagnose import diagnose_text
from diagnose.errors import RuleFileError
from diagnose.vocab import ENV_VAR, vocabulary

READY = """\
name = "ready"
description = "readiness of the widget server"
match = "literal"
attributes = ["serving", "engine"]

[[entries]]
text = "Widget server accepting connections"
examples = ["2026-01-01 10:00:00 Widget server accepting connections on :9000"]
serving = true
"""


CRASH = """\
2026-01-01 09:59:00 using GPU 0: NVIDIA Zeta 9000
Traceback (most recent call last):
  File "/srv/widget/main.py", line 12, in <module>
    run()
RuntimeError: widget scheduler gave up on quota 7
"""

SURVIVED = CRASH + "2026-01-01 10:00:00 Widget server accepting connections on :9000\n"


@pytest.fixture()
def folders(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "rules"
    (rules / "config-error").mkdir(parents=True)
    (rules / "config-error" / "widget-quota-gave-up.toml").write_text(WIDGET_RULE)
    kb = tmp_path / "kb"
    (kb / "vocab").mkdir(parents=True)
    (kb / "vocab" / "ready.toml").write_text(READY)
    (kb / "gpus.toml").write_text(ZETA_GPU)
    return rules, kb


def test_without_the_new_data_none_of_it_is_known(folders: tuple[Path, Path]) -> None:
    d = diagnose_text(SURVIVED)
    assert d.cause == "unknown" and d.fatal is True
    assert "NVIDIA Zeta 9000" not in [g["value"] for g in d.context["gpus"]]


def test_a_new_wording_readiness_phrase_and_gpu_each_take_effect(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    rules, kb = folders
    monkeypatch.setenv(ENV_VAR, str(kb))
    crash = diagnose_text(CRASH, rule_dirs=[rules])
    assert crash.cause == "config-error" and crash.fatal is True  # the new wording
    assert "NVIDIA Zeta 9000" in [g["value"] for g in crash.context["gpus"]]  # the new GPU
    survived = diagnose_text(SURVIVED, rule_dirs=[rules])
    assert survived.cause == "config-error" and survived.fatal is False  # the new phrase
    assert survived.server_ready


def test_a_broken_vocabulary_fails_naming_file_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "vocab").mkdir()
    # The entry's text no longer occurs in its example line.
    broken = READY.replace('text = "Widget server accepting connections"', 'text = "Widget up"')
    (tmp_path / "vocab" / "ready.toml").write_text(broken)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(RuleFileError) as err:
        vocabulary("ready")
    assert err.value.path.endswith("ready.toml")
    assert err.value.field == "entries[0].examples[0]"
    assert err.value.line is not None


def _pattern_entry_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, example: str
) -> RuleFileError:
    """Load a one-entry pattern vocabulary and return the error it fails with."""
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "caught.toml").write_text(
        'name = "caught"\ndescription = "d"\nmatch = "pattern"\n\n[[entries]]\n'
        f"text = '{text}'\nexamples = [\"{example}\"]\n"
    )
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(RuleFileError) as err:
        vocabulary("caught")
    return err.value


def test_a_global_flag_in_a_pattern_entry_fails_at_load_not_on_the_first_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Entries are joined into one alternation, where Python rejects "(?i)" after the start.
    err = _pattern_entry_error(
        tmp_path, monkeypatch, "(?i)served on after an error", "Served on after an error"
    )
    assert err.field == "entries[0].text" and "ignore_case" in str(err)


def test_a_pattern_whose_prefilter_is_blank_fails_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two opening words in one alternation leave the prefilter " ": every line would hold it.
    err = _pattern_entry_error(
        tmp_path,
        monkeypatch,
        r"^(?:Unsupported|Invalid) [\w .-]{1,60}(?:configuration|setting):",
        "Unsupported widget configuration: x=1",
    )
    assert err.field == "entries[0].text" and "blank space" in str(err)


def test_a_pattern_entry_in_a_basic_string_with_backslash_b_fails_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In "..." the TOML escape \b is a backspace: the entry would never match anything.
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "caught.toml").write_text(
        'name = "caught"\ndescription = "d"\nmatch = "pattern"\n\n[[entries]]\n'
        'text = "\\bserved on"\nexamples = ["served on after an error"]\n'
    )
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(RuleFileError) as err:
        vocabulary("caught")
    assert err.value.field == "entries[0].text" and "backspace" in str(err.value)


@pytest.mark.parametrize(
    "name", ["ready", "carried-on", "caught", "engine-dead", "gave-up", "request-failed"]
)
def test_every_shipped_vocabulary_loads_with_its_examples(name: str) -> None:
    vocab = vocabulary(name)
    assert vocab.terms
    for term in vocab.terms:
        assert all(vocab.search(example) is not None for example in term.examples)
