"""Fact conversion: sizes to bytes, ints in decimal or hex (ptxas prints hex)."""

from __future__ import annotations

from diagnose.rules.units import convert


def test_int_reads_decimal_and_hex() -> None:
    assert convert("101376", "int") == 101376
    assert convert("0x4020", "int") == 0x4020
    assert convert("0128", "int") == 128
    assert convert("1_024", "int") == 1024
    assert convert("twelve", "int") is None


def test_sizes_and_floats() -> None:
    assert convert("2.00 GiB", "bytes") == 2 * 1024**3
    assert convert("0.85", "float") == 0.85
