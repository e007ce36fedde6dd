"""Logging through the host: records go to the host's ``log`` import, which tags them with the
plugin's name and the key being reconciled and puts them in the host's own log pipeline; under
:class:`wasmctrl.testing.Harness` they are captured for ``Harness.logs()``.

Two ways in, both forwarded::

    from wasmctrl import log
    log.info("scaled", replicas=3, name="web")     # fields as key=value

    import logging
    logging.getLogger(__name__).info("scaled", extra={"replicas": 3})

Field values are written with ``str()``; a field whose value is ``None`` is left out, as
``tracing`` leaves out an ``Option`` that is ``None``. There is no filtering here: the host
filters, and every byte of the plugin runs in every call.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Callable, Iterator

from . import _json


class Level(enum.IntEnum):
    """A log record's level, as the contract has them."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


#: Where records go: level, message and fields.
Sink = Callable[[Level, str, list[tuple[str, str]]], None]

_sink: Sink | None = None


@contextlib.contextmanager
def forwarding(sink: Sink) -> Iterator[None]:
    """Sends every record to ``sink`` while the block runs (the guest around each call, the
    harness around each reconcile). Without a sink records are dropped, as ``tracing`` drops
    events nobody subscribes to."""
    global _sink
    previous, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = previous


def field_text(value: object) -> str:
    """A field value as the host receives it: strings as they are, ``True`` as ``true`` and
    containers as JSON (as Rust's ``Display`` writes them), anything else with ``str()``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        try:
            return _json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def record(level: Level, message: str, fields: dict[str, object]) -> None:
    """Sends one record to the current sink."""
    if _sink is None:
        return
    pairs = [(key, field_text(value)) for key, value in fields.items() if value is not None]
    _sink(level, message, pairs)


def trace(message: str, **fields: object) -> None:
    """Very detailed."""
    record(Level.TRACE, message, fields)


def debug(message: str, **fields: object) -> None:
    """For debugging."""
    record(Level.DEBUG, message, fields)


def info(message: str, **fields: object) -> None:
    """Normal operation."""
    record(Level.INFO, message, fields)


def warn(message: str, **fields: object) -> None:
    """Something is off."""
    record(Level.WARN, message, fields)


def error(message: str, **fields: object) -> None:
    """Something failed."""
    record(Level.ERROR, message, fields)


#: What every ``logging.LogRecord`` has: anything else on one came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def level_of(levelno: int) -> Level:
    """The contract's level for a ``logging`` level number."""
    if levelno >= logging.ERROR:
        return Level.ERROR
    if levelno >= logging.WARNING:
        return Level.WARN
    if levelno >= logging.INFO:
        return Level.INFO
    if levelno >= logging.DEBUG:
        return Level.DEBUG
    return Level.TRACE


class HostHandler(logging.Handler):
    """A ``logging`` handler that forwards records to the host: the formatted message, and the
    ``extra`` fields. The guest installs it on the root logger (:func:`install`), so a plugin's
    ``logging`` calls, and its libraries', reach the host's log."""

    def emit(self, rec: logging.LogRecord) -> None:
        fields = {k: v for k, v in vars(rec).items() if k not in _STANDARD}
        if rec.exc_info:
            fields["exception"] = logging.Formatter().formatException(rec.exc_info)
        record(level_of(rec.levelno), rec.getMessage(), fields)


def installed() -> HostHandler | None:
    """The :class:`HostHandler` on the root logger, if there is one."""
    return next((h for h in logging.getLogger().handlers if isinstance(h, HostHandler)), None)


def install() -> HostHandler:
    """Puts a :class:`HostHandler` on the root logger (once: installing again returns the one
    there) and lets every level through (the host filters). Returns it, for :func:`uninstall`."""
    root = logging.getLogger()
    root.setLevel(logging.NOTSET)
    handler = installed()
    if handler is None:
        handler = HostHandler()
        root.addHandler(handler)
    return handler


def uninstall(handler: HostHandler) -> None:
    """Takes a handler :func:`install` put on the root logger off it again."""
    logging.getLogger().removeHandler(handler)


@contextlib.contextmanager
def capturing(sink: Sink) -> Iterator[None]:
    """:func:`forwarding` plus the stdlib ``logging``, for the block only: the harness's way,
    which leaves the test runner's own logging set up as it found it."""
    root = logging.getLogger()
    level, present = root.level, installed()
    handler = install()
    try:
        with forwarding(sink):
            yield
    finally:
        if present is None:
            uninstall(handler)
        root.setLevel(level)
