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
import functools
import enum
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
    return _Decoder(unknown).value(cls, data, path)


def encode(value: Any) -> Any:
    """``value`` as JSON data: dataclasses become objects keyed by :func:`json_name`, their
    ``None`` fields left out (Kubernetes' ``omitempty`` for optional fields); enums become
    their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            json_name(f): encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    return value


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


class _Decoder:
    """One decoding: the policy for unknown keys, and a method per shape of type."""

    def __init__(self, unknown: Unknown) -> None:
        self.unknown = unknown

    def value(self, cls: Any, data: Any, path: str) -> Any:
        if cls is Any or cls is object:
            return data
        origin = typing.get_origin(cls)
        if origin in (typing.Union, types.UnionType):
            return self.union(typing.get_args(cls), data, path)
        if origin is typing.Literal:
            return self.literal(typing.get_args(cls), data, path)
        if origin in (list, list) or cls is list:
            return self.array(typing.get_args(cls), data, path)
        if origin in (dict, dict) or cls is dict:
            return self.object(typing.get_args(cls), data, path)
        if dataclasses.is_dataclass(cls):
            return self.dataclass(cls, data, path)
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            return self.enum(cls, data, path)
        return self.scalar(cls, data, path)

    def scalar(self, cls: Any, data: Any, path: str) -> Any:
        # bool is an int in Python, never in JSON: checked first, and refused as a number.
        if cls is bool and isinstance(data, bool):
            return data
        if cls is int and isinstance(data, int) and not isinstance(data, bool):
            return data
        if cls is float and isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        if cls is str and isinstance(data, str):
            return data
        if cls is type(None) and data is None:
            return None
        if cls not in (bool, int, float, str, type(None)):
            raise TypeError(f"wasmctrl.codec cannot decode into {cls!r}")
        expected = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
        raise DecodeError(path, f"expected {expected.get(cls, 'null')}, got {describe(data)}")

    def union(self, options: tuple[Any, ...], data: Any, path: str) -> Any:
        if data is None and type(None) in options:
            return None
        failures: list[DecodeError] = []
        for option in options:
            if option is type(None):
                continue
            try:
                return self.value(option, data, path)
            except DecodeError as e:
                failures.append(e)
        if len(failures) == 1:
            raise failures[0]
        raise DecodeError(path, f"{describe(data)} fits none of the allowed types")

    def literal(self, allowed: tuple[Any, ...], data: Any, path: str) -> Any:
        if data in allowed and type(data) in {type(a) for a in allowed}:
            return data
        choices = ", ".join(repr(a) for a in allowed)
        raise DecodeError(path, f"expected one of {choices}, got {describe(data)}")

    def array(self, args: tuple[Any, ...], data: Any, path: str) -> list[Any]:
        if not isinstance(data, list):
            raise DecodeError(path, f"expected an array, got {describe(data)}")
        item = args[0] if args else Any
        return [self.value(item, element, _join(path, i)) for i, element in enumerate(data)]

    def object(self, args: tuple[Any, ...], data: Any, path: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise DecodeError(path, f"expected an object, got {describe(data)}")
        item = args[1] if len(args) == 2 else Any
        return {key: self.value(item, element, _join(path, key)) for key, element in data.items()}

    def enum(self, cls: type[enum.Enum], data: Any, path: str) -> enum.Enum:
        for member in cls:
            if member.value == data and type(member.value) is type(data):
                return member
        choices = ", ".join(repr(m.value) for m in cls)
        raise DecodeError(path, f"expected one of {choices}, got {describe(data)}")

    def dataclass(self, cls: Any, data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise DecodeError(path, f"expected an object, got {describe(data)}")
        hints, by_key = _shape(cls)
        if self.unknown is Unknown.REJECT:
            for key in data:
                if key not in by_key:
                    known = ", ".join(by_key) or "none"
                    raise DecodeError(path, f"unknown field {key!r} (known: {known})")
        values: dict[str, Any] = {}
        for key, f in by_key.items():
            if key in data:
                values[f.name] = self.value(hints[f.name], data[key], _join(path, key))
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DecodeError(path, f"missing field {key!r}")
        return cls(**values)


@functools.cache
def _shape(cls: Any) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """A dataclass's field types and its fields by JSON name, worked out once per class:
    ``typing.get_type_hints`` evaluates every annotation, the dearest part of a decode."""
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return hints, {json_name(f): f for f in fields}


def prepare(namespace: dict[str, Any]) -> None:
    """Works out the shape of every dataclass in ``namespace`` (a module's ``vars()``) ahead of
    time. The guest does this for the plugin's module when the component is built, so the
    shapes are part of the interpreter's snapshot and no call pays for them again (each call
    starts from the snapshot, in a fresh instance)."""
    for value in list(namespace.values()):
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            try:
                _shape(value)
            except (NameError, TypeError):
                continue  # an annotation that only resolves later: worked out at first use
