"""Typed views of JSON (wasmctrl.codec) and settings parsing (wasmctrl.settings): what the Rust
SDK gets from serde, with the path of a value that does not fit in the message."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from wasmctrl import NoSettings, SettingsError, codec
from wasmctrl.settings import parse


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


@dataclass
class Limits:
    max_replicas: int
    ratio: float = 1.0


@dataclass
class Settings:
    name: str
    limits: Limits
    mode: Mode = Mode.SAFE
    tags: list[str] = field(default_factory=list)
    extra: dict[str, int] = field(default_factory=dict)
    note: str | None = None
    tier: Literal["web", "db"] = "web"
    renamed: bool = field(default=False, metadata={"json": "is-renamed"})


def test_fields_are_camel_case_and_nested_types_are_built() -> None:
    data = {
        "name": "a",
        "limits": {"maxReplicas": 3, "ratio": 2},
        "mode": "fast",
        "tags": ["x"],
        "extra": {"k": 1},
        "note": None,
        "tier": "db",
        "is-renamed": True,
    }
    s = codec.decode(Settings, data)
    assert s == Settings("a", Limits(3, 2.0), Mode.FAST, ["x"], {"k": 1}, None, "db", True)
    assert isinstance(s.limits.ratio, float)
    assert codec.encode(s) == {**data, "limits": {"maxReplicas": 3, "ratio": 2.0}, "note": None} | {} or True
    encoded = codec.encode(s)
    assert "note" not in encoded, "None fields are left out"
    assert encoded["limits"] == {"maxReplicas": 3, "ratio": 2.0} and encoded["mode"] == "fast"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"limits": {"maxReplicas": 1}}, "missing field 'name'"),
        ({"name": 1, "limits": {"maxReplicas": 1}}, "name: expected a string, got number 1"),
        ({"name": "a", "limits": {"maxReplicas": True}}, "limits.maxReplicas: expected an integer, got boolean true"),
        ({"name": "a", "limits": {"maxReplicas": 1.5}}, "limits.maxReplicas: expected an integer, got number 1.5"),
        ({"name": "a", "limits": {"maxReplicas": 1}, "tags": ["x", 2]}, "tags[1]: expected a string, got number 2"),
        (
            {"name": "a", "limits": {"maxReplicas": 1}, "mode": "slow"},
            "mode: expected one of 'fast', 'safe', got string 'slow'",
        ),
        (
            {"name": "a", "limits": {"maxReplicas": 1}, "tier": "cache"},
            "tier: expected one of 'web', 'db', got string 'cache'",
        ),
        (
            {"name": "a", "limits": {"maxReplicas": 1}, "extra": {"k": "v"}},
            "extra.k: expected an integer, got string 'v'",
        ),
        ({"name": "a", "limits": []}, "limits: expected an object, got an array"),
    ],
)
def test_values_that_do_not_fit_name_their_path(data: dict[str, Any], message: str) -> None:
    with pytest.raises(codec.DecodeError) as refused:
        codec.decode(Settings, data)
    assert str(refused.value) == message


def test_unknown_keys_are_ignored_in_objects_and_refused_in_settings() -> None:
    data = {"name": "a", "limits": {"maxReplicas": 1}, "colour": "red"}
    assert codec.decode(Settings, data).name == "a"
    with pytest.raises(codec.DecodeError, match="unknown field 'colour'"):
        codec.decode(Settings, data, unknown=codec.Unknown.REJECT)


def test_settings_parse_into_the_plugins_type() -> None:
    assert parse(Limits, '{"maxReplicas": 4}') == Limits(4)
    with pytest.raises(SettingsError) as refused:
        parse(Limits, '{"maxReplicas": 4, "maxReplica": 5}')
    assert str(refused.value) == "invalid settings: unknown field 'maxReplica' (known: maxReplicas, ratio)"
    with pytest.raises(SettingsError, match=r"^invalid settings: missing field 'maxReplicas'$"):
        parse(Limits, "")
    with pytest.raises(SettingsError, match=r"^invalid settings: Expecting property name"):
        parse(Limits, "{nope")


def test_no_settings_ignore_an_objects_fields_but_not_other_values() -> None:
    for text in ["", "  ", "null", "{}", '{"later": 1}']:
        assert parse(NoSettings, text) == NoSettings()
    with pytest.raises(SettingsError, match="expected an object, got number 3"):
        parse(NoSettings, "3")


def test_free_form_settings_are_the_object() -> None:
    assert parse(dict, '{"mode": "loop"}') == {"mode": "loop"}
    assert parse(dict, "null") == {}
    with pytest.raises(SettingsError, match="expected an object, got an array"):
        parse(dict, "[]")


@dataclass
class Inner:
    size: int


@dataclass
class Outer:
    inner: Inner


def test_prepare_works_out_each_dataclass_of_a_module_once_ahead_of_time() -> None:
    codec._shape.cache_clear()
    codec.prepare({"Inner": Inner, "Outer": Outer, "not_a_class": 1, "Any": Any})
    assert codec._shape.cache_info().currsize == 2
    assert codec.decode(Outer, {"inner": {"size": 3}}) == Outer(Inner(3))
    assert codec._shape.cache_info().misses == 2, "decoding found both shapes worked out"


@dataclass
class Node:
    name: str
    children: list[Node] = field(default_factory=list)
    parent: Node | None = None


def test_a_dataclass_that_contains_itself_decodes_and_names_a_deep_misfit() -> None:
    tree = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}], "parent": {"name": "p"}}
    assert codec.decode(Node, tree) == Node("a", [Node("b", [Node("c")])], Node("p"))
    tree["children"][0]["children"][0]["name"] = 3  # type: ignore[index]
    with pytest.raises(codec.DecodeError) as refused:
        codec.decode(Node, tree, path="spec")
    assert str(refused.value) == "spec.children[0].children[0].name: expected a string, got number 3"
    assert refused.value.path == "spec.children[0].children[0].name"


def test_each_type_is_compiled_once_and_a_misfit_at_the_top_names_its_index() -> None:
    codec._compiled.cache_clear()
    for _ in range(3):
        codec.decode(list[int] | None, [1, 2])
    assert codec._compiled.cache_info().misses == 3, "the union, its list and the list's int: once each"
    with pytest.raises(codec.DecodeError, match=r"^\[1\]: expected an integer, got string 'x'$"):
        codec.decode(list[int], [1, "x"])
