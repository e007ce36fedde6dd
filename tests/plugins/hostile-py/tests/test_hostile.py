"""The hostile plugin's modes under the native harness: the scope checks refuse its reaches
across namespaces as the host must (the sandbox tests check the host does), and its settings
choose its name and mode."""

from __future__ import annotations

from typing import Any

import pytest

from hostile import Hostile
from wasmctrl import Error, Outcome
from wasmctrl.testing import Harness

CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team-a"}}
TARGET = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "target", "namespace": "other"},
    "data": {"k": "v"},
}


def harness(**settings: Any) -> Harness:
    return Harness(Hostile).settings(settings).object(TARGET)


def test_settings_choose_the_name_and_the_mode() -> None:
    assert harness(mode="loop").manifest().name == "hostile-py-loop"
    assert harness(name="posing").manifest().name == "posing"
    m = harness().manifest()
    assert (m.name, m.watches.selector.namespaces) == ("hostile-py-ok", ["team-a"])
    with pytest.raises(ValueError, match="unknown mode 'fly'"):
        harness(mode="fly").manifest()


def test_ok_does_nothing() -> None:
    assert harness().reconcile(CONFIG) == Outcome.done()
    assert harness(mode="loop").reconcile_deleted("team-a", "c") == Outcome.done()


def test_patching_another_namespace_is_refused() -> None:
    with pytest.raises(Error) as refused:
        harness(mode="patch-other").reconcile(CONFIG)
    assert refused.value == Error.terminal(
        "action 0: patch v1/ConfigMap other/target refused: namespace other is outside the plugin's namespaces [team-a]"
    )


def test_reading_another_namespace_fails_the_reconcile_though_the_plugin_carries_on() -> None:
    h = harness(mode="get-other")
    with pytest.raises(Error) as refused:
        h.reconcile(CONFIG)
    assert refused.value.message.startswith(
        "cache read get v1/ConfigMap other/target refused: namespace other is outside"
    )
    [line] = h.logs()
    assert line.fields[1] == ("got", f"refused: {refused.value.message.removeprefix('cache read ')}")
