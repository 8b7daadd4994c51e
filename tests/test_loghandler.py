"""Tests for diagnose.loghandler.DiagnoseHandler: a service diagnosing its own crash output."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from diagnose.loghandler import DiagnoseHandler
from diagnose.report import Diagnosis


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("crashkb-test-service")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    yield log
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()


def _step() -> None:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_logged_exception_is_diagnosed_at_once(logger: logging.Logger) -> None:
    got: list[Diagnosis] = []
    logger.addHandler(DiagnoseHandler(got.append))
    for i in range(5):
        logger.info("decode batch %d: 12 running requests", i)
    try:
        _step()
    except RuntimeError:
        logger.exception("scheduler loop failed")
    assert len(got) == 1  # no flush needed: a record with a traceback is complete
    (region,) = [r for r in got[0].crashes if r.kind == "python-traceback"]
    assert "illegal memory access" in region.message
    assert got[0].source == "<logging>"


def test_error_line_completes_on_flush(logger: logging.Logger) -> None:
    got: list[Diagnosis] = []
    handler = DiagnoseHandler(got.append)
    logger.addHandler(handler)
    logger.error("NCCL error: unhandled system error, NCCL version 2.99.1")
    assert got == []
    handler.flush()
    assert len(got) == 1


def test_callback_that_logs_does_not_loop(logger: logging.Logger) -> None:
    got: list[Diagnosis] = []

    def report(d: Diagnosis) -> None:
        got.append(d)
        logger.error("crash diagnosed: RuntimeError %s", d.cause)  # would re-trigger

    handler = DiagnoseHandler(report)
    logger.addHandler(handler)
    try:
        _step()
    except RuntimeError:
        logger.exception("failed")
    handler.flush()
    assert len(got) == 1


def test_callback_error_goes_to_handle_error(logger: logging.Logger) -> None:
    errors: list[logging.LogRecord] = []

    class Recording(DiagnoseHandler):
        def handleError(self, record: logging.LogRecord) -> None:  # the logging API name
            errors.append(record)

    def broken(_: Diagnosis) -> None:
        raise ValueError("alert service down")

    logger.addHandler(Recording(broken))
    try:
        _step()
    except RuntimeError:
        logger.exception("failed")
    assert len(errors) == 1
    logger.info("the service keeps logging")


def test_level_filters_records(logger: logging.Logger) -> None:
    got: list[Diagnosis] = []
    handler = DiagnoseHandler(got.append, level=logging.CRITICAL)
    logger.addHandler(handler)
    try:
        _step()
    except RuntimeError:
        logger.exception("failed")
    handler.flush()
    assert got == []
