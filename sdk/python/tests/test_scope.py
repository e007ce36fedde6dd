"""What a manifest grants (wasmctrl.testing.scope), as wasmctrl-core's lib.rs and
declaration.rs test it: kinds, namespaces and labels for reads; kinds and namespaces for
writes; the operator's narrowing; refusals naming the field."""

from __future__ import annotations

import pytest

from wasmctrl import Gvk
from wasmctrl.testing.scope import Declaration, DeclarationError, Namespaces, Refusal, Scope, Verb
from wasmctrl.testing.selector import LabelSelector


def sel(text: str) -> LabelSelector:
    return LabelSelector.parse(text)


THING = Gvk("example.com", "v1", "Thing")
POD, CM, SECRET, NODE = (Gvk("", "v1", k) for k in ("Pod", "ConfigMap", "Secret", "Node"))
DEPLOY = Gvk("apps", "v1", "Deployment")


def scope() -> Scope:
    return (
        Scope.new(THING, Namespaces.declared(["team-a"]), sel("tier=web"))
        .owns(POD)
        .reads(CM, [], sel("app=x"))
        .reads(SECRET, ["shared"], LabelSelector())
        .reads(NODE, [], LabelSelector())
        .writes(DEPLOY)
    )


def test_reads_are_limited_to_declared_kinds_namespaces_and_labels() -> None:
    s = scope()
    reads = s.check_read(Verb.GET, CM, "team-a", "c")
    assert reads.admits("team-a", {"app": "x"})
    assert not reads.admits("team-a", {"app": "y"}), "outside the selector"
    with pytest.raises(Refusal) as refused:
        s.check_read(Verb.GET, CM, "team-b", "c")
    assert (refused.value.verb, refused.value.namespace) == (Verb.GET, "team-b")
    assert str(refused.value) == (
        "get v1/ConfigMap team-b/c refused: namespace team-b is outside the namespaces declared for this kind ([team-a])"
    )
    with pytest.raises(Refusal):
        s.check_read(Verb.LIST, CM, "team-b", "")
    # A list over every namespace is allowed and filtered.
    assert not s.check_read(Verb.LIST, CM, "", "").admits("team-b", {"app": "x"})
    # Undeclared kinds are refused whatever the namespace.
    with pytest.raises(Refusal, match=r"not declared in the manifest \(watches, owns or reads\)"):
        s.check_read(Verb.GET, DEPLOY, "team-a", "d")
    # Explicit namespaces on a read stand as declared.
    s.check_read(Verb.GET, SECRET, "shared", "s")
    with pytest.raises(Refusal):
        s.check_read(Verb.GET, SECRET, "team-a", "s")
    # Cluster-scoped objects of a declared kind are readable.
    s.check_read(Verb.GET, NODE, "", "n1")
    # The watched kind's reads follow its selector.
    watched = s.check_read(Verb.LIST, THING, "team-a", "")
    assert watched.admits("team-a", {"tier": "web"}) and not watched.admits("team-a", {"app": "x"})


def test_writes_are_limited_to_declared_kinds_and_namespaces() -> None:
    s = scope()
    s.check_write(Verb.APPLY, POD, "team-a", "p", "team-a")
    s.check_write(Verb.APPLY, POD, "", "p", "team-a")
    with pytest.raises(Refusal, match="owner's namespace"):
        s.check_write(Verb.APPLY, POD, "team-b", "p", "team-a")
    s.check_write(Verb.PATCH, DEPLOY, "team-a", "d", "team-a")
    with pytest.raises(Refusal) as refused:
        s.check_write(Verb.DELETE, DEPLOY, "team-b", "d", "team-a")
    assert str(refused.value).startswith("delete apps/v1/Deployment team-b/d refused")
    with pytest.raises(Refusal, match="not declared"):
        s.check_write(Verb.PATCH, CM, "team-a", "c", "team-a")
    with pytest.raises(Refusal):
        s.check_write(Verb.PATCH, THING, "team-b", "t", "team-a")


def test_namespaces_never_read_empty_as_all() -> None:
    only_a, only_b = Namespaces.declared(["a"]), Namespaces.declared(["b"])
    none = only_a.intersect(only_b)
    assert not none.contains("a") and not none.contains("b")
    assert Namespaces().intersect(only_a) == only_a
    assert only_a.contains(""), "cluster-scoped objects are not in a namespace"
    assert str(Namespaces()) == "all namespaces" and str(Namespaces.declared(["b", "a"])) == "[a, b]"


def sample() -> Declaration:
    return Declaration(THING, labels="app=x", owns=[POD], reads=[(CM, [], "")], writes=[DEPLOY])


def test_grants_follow_the_declaration_and_the_operator_only_narrows() -> None:
    s = sample().scope()

    def reads(kind: Gvk) -> bool:
        try:
            s.check_read(Verb.GET, kind, "ns", "x")
            return True
        except Refusal:
            return False

    def writes(kind: Gvk) -> bool:
        try:
            s.check_write(Verb.PATCH, kind, "ns", "x", "ns")
            return True
        except Refusal:
            return False

    assert reads(THING) and reads(POD) and reads(CM) and not reads(DEPLOY) and not reads(SECRET)
    assert writes(THING) and writes(POD) and writes(DEPLOY) and not writes(CM) and not writes(SECRET)
    narrowed = sample().scope(["team-a"])
    with pytest.raises(Refusal):
        narrowed.check_read(Verb.GET, CM, "team-b", "x")
    narrowed.check_write(Verb.PATCH, DEPLOY, "team-a", "x", "team-a")
    with pytest.raises(Refusal):
        narrowed.check_write(Verb.PATCH, DEPLOY, "team-b", "x", "team-a")
    declared = sample()
    declared.namespaces = ["team-b"]
    nothing = declared.scope(["team-a"])
    assert not nothing.reconciles_in("team-a") and not nothing.reconciles_in("team-b")


@pytest.mark.parametrize(
    ("change", "prefix"),
    [
        (lambda d: setattr(d, "owns", [Gvk("", "v1", "")]), "owns:"),
        (lambda d: setattr(d, "watched", Gvk("example.com", "", "Thing")), "watches.kind:"),
        (lambda d: setattr(d, "writes", [Gvk("apps", "v1", "")]), "writes:"),
        (lambda d: setattr(d, "labels", "a in (b"), "watches.selector.labels:"),
        (lambda d: setattr(d, "reads", [(CM, [], "=")]), "reads.selector.labels:"),
    ],
)
def test_refusals_name_the_field(change, prefix: str) -> None:  # type: ignore[no-untyped-def]
    declared = sample()
    change(declared)
    with pytest.raises(DeclarationError) as refused:
        declared.scope()
    assert str(refused.value).startswith(prefix)


@pytest.mark.parametrize("nonsense", ["network", "sql:", "sql:Students", "sql:a b"])
def test_only_offered_capabilities_are_granted(nonsense: str) -> None:
    declared = sample()
    declared.capabilities = [nonsense]
    with pytest.raises(DeclarationError, match=r"^capabilities"):
        declared.scope()
    declared.capabilities = ["sql:students", "sql:audit_log-2"]
    assert declared.scope().has_capability("sql:audit_log-2")
