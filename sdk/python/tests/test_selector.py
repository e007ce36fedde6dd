"""Label selectors (wasmctrl.testing.selector), as wasmctrl-core's selector.rs tests them."""

from __future__ import annotations

from typing import Any

import pytest

from wasmctrl.testing.selector import LabelSelector, ParseError


def m(selector: str, labels: Any) -> bool:
    return LabelSelector.parse(selector).matches(labels)


def test_every_operator_matches_like_kubernetes() -> None:
    labels = {"app": "nginx", "tier": "web"}
    assert m("", None)
    assert m("app=nginx", labels) and m("app==nginx", labels)
    assert not m("app!=nginx", labels) and m("app!=other", labels)
    assert m("app!=x", {}), "!= matches objects without the label"
    assert m("tier in (web, api)", labels) and not m("tier in (api)", labels)
    assert m("tier notin (api)", labels) and not m("tier notin (web)", labels)
    assert m("app", labels) and not m("!app", labels) and m("!canary", labels)
    assert m("app=nginx,tier in (web),!canary", labels)
    assert not m("app=nginx,tier=api", labels)


@pytest.mark.parametrize("bad", ["=x", "a in web", "a in (b", "app=ngi nx", ",", "-a=b", "a=b,"])
def test_bad_selectors_are_rejected_with_the_selector_named(bad: str) -> None:
    with pytest.raises(ParseError) as refused:
        LabelSelector.parse(bad)
    assert f'"{bad}"' in str(refused.value)


def test_empty_values_are_legal() -> None:
    assert LabelSelector.parse("app=").matches({"app": ""})


def test_disjoint_selectors_are_those_no_labels_satisfy() -> None:
    def d(a: str, b: str) -> bool:
        return LabelSelector.parse(a).disjoint(LabelSelector.parse(b))

    assert d("app=a", "app=b") and d("x", "!x") and d("t in (a)", "t notin (a)")
    assert d("t in (a,b)", "t in (c)") and d("app=a", "!app")
    assert not d("app=a", "") and not d("app=a", "tier=web") and not d("t in (a,b)", "t=b")
    assert not d("app!=a", "app=b") and not d("app!=a", "!app") and not d("x", "x=1")


def test_display_round_trips() -> None:
    s = LabelSelector.parse("app=nginx,tier in (web,api),!canary,x!=y,k")
    assert str(s) == "app=nginx,tier in (web,api),!canary,x!=y,k"
    assert LabelSelector.parse(str(s)) == s
