"""Typed views of JSON: :func:`decode` checks JSON data against a dataclass and builds it,
:func:`encode` turns a dataclass back into JSON data.

Plugins keep Kubernetes objects as plain ``dict``s (see the README), but the parts they reason
about (a spec, a status, the operator's settings) read better as dataclasses, and a value of the
wrong type should fail where it enters with its path named, as serde fails a Rust plugin,
rather than deep in the reconcile as an ``AttributeError``. The SDK decodes settings with it;
plugins may decode their spec and status the same way.

Field names follow Kubernetes: the dataclass field ``root_disk`` is the JSON key ``rootDisk``
(give ``field(metadata={"json": "other"})`` to name it otherwise). Supported types: ``str``,
``int``, ``float``, ``bool``, ``None``, ``Any``/``object``, ``list[T]``, ``dict[str, T]``,
``T | None`` and other unions, ``Literal[...]``, enums (by value) and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, TypeVar, overload

T = TypeVar("T")


class DecodeError(ValueError):
    """JSON data that does not fit the type: ``path`` is where (``spec.resource.cpu``), and
    ``reason`` what is wrong there."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


class Unknown(enum.Enum):
    """What :func:`decode` does with object keys the dataclass has no field for."""

    #: Leave them out: Kubernetes objects carry fields a plugin does not model.
    IGNORE = "ignore"
    #: Refuse them: for operator settings, where an unknown key is a typo.
    REJECT = "reject"


def json_name(f: dataclasses.Field[Any]) -> str:
    """The JSON key of a dataclass field: its ``json`` metadata, else its name in camelCase."""
    named = f.metadata.get("json")
    if isinstance(named, str):
        return named
    head, *rest = f.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@overload
def decode(cls: type[T], data: Any, *, unknown: Unknown = ..., path: str = ...) -> T: ...


@overload
def decode(cls: Any, data: Any, *, unknown: Unknown = ..., path: str = ...) -> Any: ...


def decode(cls: Any, data: Any, *, unknown: Unknown = Unknown.IGNORE, path: str = "") -> Any:
    """``data`` (parsed JSON) as ``cls`` (a class, or a type such as ``Status | None``),
    checked all the way down; :class:`DecodeError` names the first place it does not fit."""
    try:
        return _decoder(cls, unknown)(data)
    except _Misfit as misfit:
        for key in reversed(misfit.keys):
            path = _join(path, key)
        raise DecodeError(path, misfit.reason) from None


def encode(value: Any) -> Any:
    """``value`` as JSON data: dataclasses become objects keyed by :func:`json_name`, their
    ``None`` fields left out (Kubernetes' ``omitempty`` for optional fields); enums become
    their values."""
    kind: Any = type(value)
    if kind in _PLAIN:
        return value
    keys = _keys(kind)
    if keys is not None:
        encoded = {}
        for name, key in keys:
            item = getattr(value, name)
            if item is not None:
                encoded[key] = encode(item)
        return encoded
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    return value


#: Types :func:`encode` returns as they are (exactly these: a subclass may be an enum).
_PLAIN = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _keys(kind: Any) -> tuple[tuple[str, str], ...] | None:
    """A dataclass's fields as (attribute, JSON key) pairs, worked out once per class; ``None``
    for any other class."""
    if not dataclasses.is_dataclass(kind):
        return None
    return tuple((f.name, json_name(f)) for f in dataclasses.fields(kind))


def describe(data: Any) -> str:
    """How an error message shows a JSON value that did not fit: its type and, for scalars,
    the value."""
    if data is None:
        return "null"
    if isinstance(data, bool):
        return f"boolean {str(data).lower()}"
    if isinstance(data, (int, float)):
        return f"number {data}"
    if isinstance(data, str):
        return f"string {data!r}"
    if isinstance(data, list):
        return "an array"
    return "an object"


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Misfit(Exception):
    """A value that does not fit, on its way out of the decoders: ``keys`` is where, relative
    to the value being decoded, innermost first (each container adds its own on the way out),
    so that no path is built unless a value fails."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.keys: list[str | int] = []

    def at(self, key: str | int) -> _Misfit:
        self.keys.append(key)
        return self


#: A compiled decoder: the JSON data as the type it was compiled for, or :class:`_Misfit`.
Decoder = typing.Callable[[Any], Any]


def _decoder(cls: Any, unknown: Unknown) -> Decoder:
    """The decoder of ``cls``: compiled once per type and policy (types that cannot be hashed,
    rare, are compiled each time)."""
    try:
        hash(cls)
    except TypeError:
        return _compile(cls, unknown)
    return _compiled(cls, unknown)


@functools.cache
def _compiled(cls: Any, unknown: Unknown) -> Decoder:
    return _compile(cls, unknown)


def _compile(cls: Any, unknown: Unknown) -> Decoder:
    """A function decoding JSON data as ``cls``: the type's shape is looked at here, once, not
    at every value (a decoder per value's type, as serde derives one per Rust type)."""
    if cls is Any or cls is object:
        return _anything
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(cls), unknown)
    if origin is typing.Literal:
        return _literal(typing.get_args(cls))
    if origin is list or cls is list:
        args = typing.get_args(cls)
        return _array(args[0] if args else Any, unknown)
    if origin is dict or cls is dict:
        args = typing.get_args(cls)
        return _object(args[1] if len(args) == 2 else Any, unknown)
    if dataclasses.is_dataclass(cls):
        return _dataclass(cls, unknown)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return _enum(cls)
    return _scalar(cls)


def _anything(data: Any) -> Any:
    return data


#: Per JSON scalar: what the message says was expected, whether a value fits, and the value
#: decoded. bool is an int in Python, never in JSON: refused as a number.
_SCALARS: dict[Any, tuple[str, typing.Callable[[Any], bool], Decoder]] = {
    bool: ("a boolean", lambda data: isinstance(data, bool), _anything),
    int: ("an integer", lambda data: isinstance(data, int) and not isinstance(data, bool), _anything),
    float: ("a number", lambda data: isinstance(data, (int, float)) and not isinstance(data, bool), float),
    str: ("a string", lambda data: isinstance(data, str), _anything),
    type(None): ("null", lambda data: data is None, _anything),
}


def _scalar(cls: Any) -> Decoder:
    if cls not in _SCALARS:

        def unsupported(data: Any) -> Any:
            raise TypeError(f"wasmctrl.codec cannot decode into {cls!r}")

        return unsupported
    expected, fits, value = _SCALARS[cls]

    def scalar(data: Any) -> Any:
        if fits(data):
            return value(data)
        raise _Misfit(f"expected {expected}, got {describe(data)}")

    return scalar


def _union(options: tuple[Any, ...], unknown: Unknown) -> Decoder:
    nullable = type(None) in options
    decoders = [_decoder(o, unknown) for o in options if o is not type(None)]

    def union(data: Any) -> Any:
        if data is None and nullable:
            return None
        failures: list[_Misfit] = []
        for decoder in decoders:
            try:
                return decoder(data)
            except _Misfit as e:
                failures.append(e)
        if len(failures) == 1:
            raise failures[0]
        raise _Misfit(f"{describe(data)} fits none of the allowed types")

    return union


def _literal(allowed: tuple[Any, ...]) -> Decoder:
    types_allowed = {type(a) for a in allowed}
    choices = ", ".join(repr(a) for a in allowed)

    def literal(data: Any) -> Any:
        if data in allowed and type(data) in types_allowed:
            return data
        raise _Misfit(f"expected one of {choices}, got {describe(data)}")

    return literal


def _array(item: Any, unknown: Unknown) -> Decoder:
    element = _decoder(item, unknown)

    def array(data: Any) -> list[Any]:
        if not isinstance(data, list):
            raise _Misfit(f"expected an array, got {describe(data)}")
        decoded = []
        for i, value in enumerate(data):
            try:
                decoded.append(element(value))
            except _Misfit as e:
                raise e.at(i) from None
        return decoded

    return array


def _object(item: Any, unknown: Unknown) -> Decoder:
    element = _decoder(item, unknown)

    def object_(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise _Misfit(f"expected an object, got {describe(data)}")
        decoded = {}
        for key, value in data.items():
            try:
                decoded[key] = element(value)
            except _Misfit as e:
                raise e.at(key) from None
        return decoded

    return object_


def _enum(cls: type[enum.Enum]) -> Decoder:
    choices = ", ".join(repr(m.value) for m in cls)

    def enum_(data: Any) -> Any:
        for member in cls:
            if member.value == data and type(member.value) is type(data):
                return member
        raise _Misfit(f"expected one of {choices}, got {describe(data)}")

    return enum_


def _dataclass(cls: Any, unknown: Unknown) -> Decoder:
    # Its fields' decoders are compiled at its first value, not with it: a dataclass may
    # contain itself (a tree), and compiling them here would never end.
    plan: list[Plan] = []

    def dataclass(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Misfit(f"expected an object, got {describe(data)}")
        if not plan:
            plan.append(_plan(cls, unknown))
        fields, known = plan[0]
        if unknown is Unknown.REJECT:
            for key in data:
                if key not in known:
                    raise _Misfit(f"unknown field {key!r} (known: {', '.join(known) or 'none'})")
        values: dict[str, Any] = {}
        for key, name, decoder, required in fields:
            if key in data:
                try:
                    values[name] = decoder(data[key])
                except _Misfit as e:
                    raise e.at(key) from None
            elif required:
                raise _Misfit(f"missing field {key!r}")
        return cls(**values)

    return dataclass


#: How a dataclass decodes: per field, its JSON key, attribute, decoder and whether it must be
#: given; and its JSON keys.
Plan = tuple[tuple[tuple[str, str, Decoder, bool], ...], tuple[str, ...]]


@functools.cache
def _plan(cls: Any, unknown: Unknown) -> Plan:
    hints, by_key = _shape(cls)
    fields = tuple(
        (
            key,
            f.name,
            _decoder(hints[f.name], unknown),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for key, f in by_key.items()
    )
    return fields, tuple(by_key)


@functools.cache
def _shape(cls: Any) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """A dataclass's field types and its fields by JSON name, worked out once per class:
    ``typing.get_type_hints`` evaluates every annotation, the dearest part of a decode."""
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return hints, {json_name(f): f for f in fields}


def prepare(namespace: dict[str, Any]) -> None:
    """Works out the shape, encoder and decoder of every dataclass in ``namespace`` (a module's
    ``vars()``) ahead of time. The guest does this for the plugin's module when the component is built, so the
    shapes are part of the interpreter's snapshot and no call pays for them again (each call
    starts from the snapshot, in a fresh instance)."""
    for value in list(namespace.values()):
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            try:
                _shape(value)
                _keys(value)
                _plan(value, Unknown.IGNORE)
            except (NameError, TypeError):
                continue  # an annotation that only resolves later: worked out at first use
