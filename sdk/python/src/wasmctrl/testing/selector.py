"""Kubernetes label selectors in their string form (``app=nginx,tier in (web,api),!canary``), as
the host parses and matches them.

A port of ``wasmctrl-core``'s ``selector.rs``, rule for rule and message for message, so the
harness accepts and refuses the selectors the host does (its tests mirror the Rust ones).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def quote(text: str) -> str:
    """A string as Rust's ``{:?}`` and Go's ``%q`` print it (JSON's escapes)."""
    return json.dumps(text, ensure_ascii=False)


class ParseError(ValueError):
    """A selector string that does not parse."""

    def __init__(self, selector: str, reason: str) -> None:
        super().__init__(f"invalid label selector {quote(selector)}: {reason}")
        self.selector = selector
        self.reason = reason


class Op(enum.Enum):
    """A requirement's operator."""

    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclass(frozen=True)
class Requirement:
    """One term of a selector: a key, an operator and (for ``in``/``notin``) values."""

    op: Op
    key: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        value = labels.get(self.key)
        value = value if isinstance(value, str) else None
        match self.op:
            case Op.IN:
                return value is not None and value in self.values
            case Op.NOT_IN:
                return value is None or value not in self.values
            case Op.EXISTS:
                return value is not None
            case Op.DOES_NOT_EXIST:
                return value is None

    def __str__(self) -> str:
        match self.op:
            case Op.IN if len(self.values) == 1:
                return f"{self.key}={self.values[0]}"
            case Op.IN:
                return f"{self.key} in ({','.join(self.values)})"
            case Op.NOT_IN if len(self.values) == 1:
                return f"{self.key}!={self.values[0]}"
            case Op.NOT_IN:
                return f"{self.key} notin ({','.join(self.values)})"
            case Op.EXISTS:
                return self.key
            case _:
                return f"!{self.key}"


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, selector: str) -> LabelSelector:
        """Parses the string form; ``""`` selects everything. Raises :class:`ParseError`."""
        requirements = []
        try:
            for term in _split_terms(selector):
                term = term.strip()
                if not term:
                    raise ValueError("empty requirement")
                requirements.append(_parse_term(term))
        except ValueError as e:
            raise ParseError(selector, str(e)) from None
        return cls(tuple(requirements))

    def is_empty(self) -> bool:
        """True when it has no requirements."""
        return not self.requirements

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        """Whether ``labels`` (a ``metadata.labels`` object, or ``None``: no labels) satisfy
        every requirement."""
        return all(r.matches(labels or {}) for r in self.requirements)

    def disjoint(self, other: LabelSelector) -> bool:
        """Whether no labels at all can satisfy both selectors (``app=a`` and ``app=b``, ``x``
        and ``!x``): requirements on different keys never conflict, so it is decided key by
        key."""
        every = self.requirements + other.requirements
        return any(_conflict([r for r in every if r.key == key]) for key in {r.key for r in every})

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _conflict(on_key: list[Requirement]) -> bool:
    """Whether requirements on one key exclude every value."""
    must_exist = any(r.op in (Op.IN, Op.EXISTS) for r in on_key)
    if must_exist and any(r.op is Op.DOES_NOT_EXIST for r in on_key):
        return True
    allowed: list[str] | None = None
    for r in on_key:
        if r.op is Op.IN:
            allowed = list(r.values) if allowed is None else [v for v in allowed if v in r.values]
    if allowed is None:
        return False
    for r in on_key:
        if r.op is Op.NOT_IN:
            allowed = [v for v in allowed if v not in r.values]
    return not allowed


def _split_terms(selector: str) -> list[str]:
    """Splits on commas that are not inside a parenthesised value set."""
    if not selector.strip():
        return []
    depth, start, terms = 0, 0, []
    for i, c in enumerate(selector):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
        if depth not in (0, 1):
            raise ValueError("unbalanced parentheses")
    if depth != 0:
        raise ValueError("unbalanced parentheses")
    terms.append(selector[start:])
    return terms


def _parse_term(term: str) -> Requirement:
    if term.startswith("!"):
        return Requirement(Op.DOES_NOT_EXIST, _label_key(term[1:].strip()))
    for text, op in ((" notin ", Op.NOT_IN), (" in ", Op.IN)):
        if text in term:
            key, _, values = term.partition(text)
            values = values.strip()
            if not (values.startswith("(") and values.endswith(")")):
                raise ValueError(f"`{text}` needs a parenthesised set, got {quote(values)}")
            inner = values[1:-1]
            parsed = tuple(_label_value(v.strip()) for v in inner.split(","))
            return Requirement(op, _label_key(key.strip()), parsed)
    if "!=" in term:
        key, _, value = term.partition("!=")
        return Requirement(Op.NOT_IN, _label_key(key.strip()), (_label_value(value.strip()),))
    if "=" in term:
        key, _, value = term.partition("==") if "==" in term else term.partition("=")
        return Requirement(Op.IN, _label_key(key.strip()), (_label_value(value.strip()),))
    return Requirement(Op.EXISTS, _label_key(term))


def _label_key(key: str) -> str:
    """``[prefix/]name``: prefix a DNS subdomain, name 1-63 alphanumerics, ``-``, ``_``, ``.``."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-.")
        if not prefix or len(prefix) > 253 or not set(prefix) <= allowed:
            raise ValueError(f"invalid label key prefix in {quote(key)}")
    if not name or len(name) > 63 or not is_label_chars(name):
        raise ValueError(f"invalid label key {quote(key)}")
    return key


def _label_value(value: str) -> str:
    if len(value) > 63 or (value and not is_label_chars(value)):
        raise ValueError(f"invalid label value {quote(value)}")
    return value


def _alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


def is_label_chars(text: str) -> bool:
    """Alphanumerics, ``-``, ``_`` and ``.``, starting and ending with an alphanumeric."""
    return bool(text) and _alnum(text[0]) and _alnum(text[-1]) and all(_alnum(c) or c in "-_." for c in text)
