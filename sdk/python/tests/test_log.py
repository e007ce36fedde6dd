"""Logging through the host (wasmctrl.log): records and their fields as the host's log import
receives them, from wasmctrl.log and from the stdlib logging."""

from __future__ import annotations

import logging

from wasmctrl import log
from wasmctrl.log import Level


def capture() -> tuple[list[tuple[Level, str, list[tuple[str, str]]]], log.Sink]:
    seen: list[tuple[Level, str, list[tuple[str, str]]]] = []
    return seen, lambda level, message, fields: seen.append((level, message, fields))


def test_records_reach_the_sink_with_their_fields_as_written() -> None:
    seen, sink = capture()
    with log.forwarding(sink):
        log.info("scaled", replicas=3, name="web", ready=True, spec={"a": [1]}, generation=None)
        log.warn("2 of 3 ready")
    assert seen == [
        (Level.INFO, "scaled", [("replicas", "3"), ("name", "web"), ("ready", "true"), ("spec", '{"a":[1]}')]),
        (Level.WARN, "2 of 3 ready", []),
    ]


def test_without_a_sink_records_are_dropped() -> None:
    seen, sink = capture()
    log.error("nobody listens")
    with log.forwarding(sink):
        pass
    log.error("still nobody")
    assert seen == []


def test_the_stdlib_logging_is_forwarded_with_its_extra_fields() -> None:
    seen, sink = capture()
    root = logging.getLogger()
    level = root.level
    with log.capturing(sink):
        logger = logging.getLogger("plugin.module")
        logger.debug("%d of %d ready", 2, 3, extra={"key": "ns/a"})
        logger.log(5, "very detailed")
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed")
    assert seen[0] == (Level.DEBUG, "2 of 3 ready", [("key", "ns/a")])
    assert seen[1][:2] == (Level.TRACE, "very detailed")
    level_, message, fields = seen[2]
    assert (level_, message) == (Level.ERROR, "failed")
    assert fields[0][0] == "exception" and "ValueError: boom" in fields[0][1]
    assert root.level == level, "the test runner's logging is left as it was"
    assert not any(isinstance(h, log.HostHandler) for h in root.handlers)


def test_the_handler_is_installed_once() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        first = log.install()
        assert log.install() is first
        assert [h for h in root.handlers if isinstance(h, log.HostHandler)] == [first]
        assert root.level == logging.NOTSET, "every level reaches the host, which filters"
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
