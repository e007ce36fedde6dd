"""What a plugin may touch (:class:`Scope`), read from its manifest (:class:`Declaration`) as the
host reads it, narrowed by the operator's namespaces.

A port of ``wasmctrl-core``'s ``lib.rs`` and ``declaration.rs``, rule for rule and message for
message, so :class:`~wasmctrl.testing.Harness` refuses what the host refuses. The rules:

- The watched kind is readable and writable in the plugin's effective namespaces (the
  manifest's, narrowed by the operator), reads limited to the watched label selector.
- Owned kinds are readable in the effective namespaces; they are written only in the
  namespace of the object being reconciled (owner references cannot cross namespaces).
- ``reads`` kinds are readable in the namespaces their declaration names, or the effective
  namespaces when it names none, limited to their label selector. They are never writable.
- ``writes`` kinds are writable in the effective namespaces.
- An empty namespace on an object means a cluster-scoped object; it is in scope for every
  declared kind. On a write target it means "the reconciled object's namespace". On a list it
  means "every namespace the plugin may read", and results are filtered to those.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..manifest import Gvk, Manifest
from .selector import LabelSelector, ParseError


@dataclass(frozen=True)
class Namespaces:
    """A set of namespaces: every namespace (``only`` is ``None``), or only some. Never "an
    empty list that means all", which is how narrowing to nothing turns into access to
    everything."""

    only: frozenset[str] | None = None

    @classmethod
    def declared(cls, names: Iterable[str]) -> Namespaces:
        """A manifest's list: empty means every namespace."""
        names = frozenset(names)
        return cls(names or None)

    def contains(self, namespace: str) -> bool:
        """Whether objects in ``namespace`` are in the set; the empty namespace
        (cluster-scoped objects) always is."""
        return self.only is None or namespace == "" or namespace in self.only

    def intersect(self, other: Namespaces) -> Namespaces:
        """The namespaces in both sets."""
        if self.only is None:
            return other
        if other.only is None:
            return self
        return Namespaces(self.only & other.only)

    def __str__(self) -> str:
        if self.only is None:
            return "all namespaces"
        return "[" + ", ".join(sorted(self.only)) + "]"


class Verb(enum.Enum):
    """What a plugin asks to do with an object, by its name in the contract."""

    GET = "get"
    LIST = "list"
    APPLY = "apply"
    PATCH = "patch"
    DELETE = "delete"
    UPDATE_STATUS = "update-status"
    ADD_FINALIZER = "add-finalizer"
    REMOVE_FINALIZER = "remove-finalizer"
    EMIT_EVENT = "emit-event"

    def __str__(self) -> str:
        return self.value


def _object_label(namespace: str, name: str) -> str:
    if not namespace:
        return name if name else "in every namespace"
    return f"{namespace}/{name}" if name else f"in namespace {namespace}"


class Refusal(Exception):
    """Something a plugin asked for that its declaration does not allow, naming the verb, kind,
    namespace and object."""

    def __init__(self, verb: Verb, kind: Gvk, namespace: str, name: str, reason: str) -> None:
        super().__init__(f"{verb} {kind} {_object_label(namespace, name)} refused: {reason}")
        self.verb = verb
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Grant:
    """One declared way to read a kind: which namespaces, which labels."""

    namespaces: Namespaces
    selector: LabelSelector


class Write(enum.Enum):
    """How a kind may be written."""

    #: In the effective namespaces (the watched kind, ``writes``).
    NAMESPACES = "namespaces"
    #: Only beside the reconciled object (owned children).
    OWNED = "owned"


@dataclass
class Reads:
    """Which objects of one kind a read may see; from :meth:`Scope.check_read`."""

    grants: list[Grant]

    def admits(self, namespace: str, labels: Mapping[str, Any] | None) -> bool:
        """Whether an object in ``namespace`` with these labels is visible."""
        return any(g.namespaces.contains(namespace) and g.selector.matches(labels) for g in self.grants)

    def check_selector(self, requested: LabelSelector) -> str | None:
        """Why a list's selector is refused (it asks for labels no visible object could have),
        or ``None``. Any other selector is simply combined with the declared one."""
        if all(g.selector.disjoint(requested) for g in self.grants):
            declared = " or ".join(str(g.selector) for g in self.grants)
            return f"the selector {requested} asks for labels outside the declared selector ({declared})"
        return None


@dataclass
class Scope:
    """Everything a plugin may touch. Build it with :meth:`new` and the ``owns``/``reads``/
    ``writes`` methods in the order the manifest declares them."""

    watched: Gvk
    namespaces: Namespaces
    read_grants: dict[Gvk, list[Grant]] = field(default_factory=dict)
    write_rules: dict[Gvk, Write] = field(default_factory=dict)
    capabilities: set[str] = field(default_factory=set)

    @classmethod
    def new(cls, watched: Gvk, namespaces: Namespaces, selector: LabelSelector) -> Scope:
        """A plugin reconciling ``watched`` objects in ``namespaces`` (already narrowed) that
        match ``selector``."""
        scope = cls(watched, namespaces)
        scope._grant(watched, namespaces, selector)
        scope.write_rules[watched] = Write.NAMESPACES
        return scope

    def owns(self, kind: Gvk) -> Scope:
        """Children of ``kind`` are created beside the reconciled object."""
        self._grant(kind, self.namespaces, LabelSelector())
        self.write_rules.setdefault(kind, Write.OWNED)
        return self

    def reads(self, kind: Gvk, namespaces: list[str], selector: LabelSelector) -> Scope:
        """``kind`` is read in ``namespaces`` (empty: the plugin's own) where labels match."""
        where = Namespaces.declared(namespaces) if namespaces else self.namespaces
        self._grant(kind, where, selector)
        return self

    def writes(self, kind: Gvk) -> Scope:
        """``kind`` may be patched, applied and deleted in the plugin's namespaces."""
        self.write_rules[kind] = Write.NAMESPACES
        return self

    def capability(self, name: str) -> Scope:
        """The plugin uses a named capability of the host (``sql:<database>``)."""
        self.capabilities.add(name)
        return self

    def has_capability(self, name: str) -> bool:
        """Whether the plugin declared capability ``name``."""
        return name in self.capabilities

    def _grant(self, kind: Gvk, namespaces: Namespaces, selector: LabelSelector) -> None:
        grants = self.read_grants.setdefault(kind, [])
        grant = Grant(namespaces, selector)
        if grant not in grants:
            grants.append(grant)

    def reconciles_in(self, namespace: str) -> bool:
        """Whether a key of the reconciled kind in ``namespace`` is the plugin's to reconcile."""
        return self.namespaces.contains(namespace)

    def is_owned(self, kind: Gvk) -> bool:
        """Whether ``kind`` is owned: its objects are children of the reconciled object."""
        return self.write_rules.get(kind) is Write.OWNED

    def check_read(self, verb: Verb, kind: Gvk, namespace: str, name: str) -> Reads:
        """May the plugin get or list objects of ``kind`` in ``namespace``? For a list, an
        empty namespace asks for every namespace the plugin may read. Raises
        :class:`Refusal`; the returned :class:`Reads` tells which objects it may see."""
        declared = self.read_grants.get(kind)
        if declared is None:
            reason = "the kind is not declared in the manifest (watches, owns or reads)"
            raise Refusal(verb, kind, namespace, name, reason)
        listing_all = verb is Verb.LIST and namespace == ""
        grants = [g for g in declared if listing_all or g.namespaces.contains(namespace)]
        if not grants:
            where = ", ".join(str(g.namespaces) for g in declared)
            reason = f"namespace {namespace} is outside the namespaces declared for this kind ({where})"
            raise Refusal(verb, kind, namespace, name, reason)
        return Reads(grants)

    def check_write(self, verb: Verb, kind: Gvk, namespace: str, name: str, reconciled: str) -> None:
        """May the plugin ``verb`` the object ``namespace/name`` of ``kind`` while reconciling
        an object in ``reconciled``? An empty ``namespace`` means the reconciled object's
        namespace (or a cluster-scoped object). Raises :class:`Refusal`."""
        write = self.write_rules.get(kind)
        if write is None:
            reason = "the kind is not declared in the manifest as watched, owned or writable"
            raise Refusal(verb, kind, namespace, name, reason)
        if namespace == "" or namespace == reconciled:
            return
        if write is Write.OWNED and reconciled:
            reason = f"owned objects live in their owner's namespace ({reconciled})"
            raise Refusal(verb, kind, namespace, name, reason)
        if not self.namespaces.contains(namespace):
            reason = f"namespace {namespace} is outside the plugin's namespaces {self.namespaces}"
            raise Refusal(verb, kind, namespace, name, reason)

    def check_reconciled(self, verb: Verb, namespace: str, name: str) -> None:
        """May the plugin ``verb`` (update status, add or remove a finalizer, emit an event)
        the object it reconciles? Only when that object is in its namespaces."""
        self.check_write(verb, self.watched, namespace, name, "")


class DeclarationError(ValueError):
    """A manifest that grants nothing: the field at fault and what is wrong with it."""


_DATABASE = re.compile(r"[a-z0-9_-]{1,63}")


@dataclass
class Declaration:
    """What a manifest declares about the objects a plugin touches, and the one reading of it
    into a :class:`Scope`."""

    watched: Gvk
    namespaces: list[str] = field(default_factory=list)
    labels: str = ""
    owns: list[Gvk] = field(default_factory=list)
    #: Each read: its kind, namespaces (empty: the plugin's own) and label selector.
    reads: list[tuple[Gvk, list[str], str]] = field(default_factory=list)
    writes: list[Gvk] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, manifest: Manifest) -> Declaration:
        """What ``manifest`` declares."""
        w = manifest.watches
        reads = [(r.kind, list(r.selector.namespaces), r.selector.labels) for r in manifest.reads]
        return cls(
            w.kind,
            list(w.selector.namespaces),
            w.selector.labels,
            list(manifest.owns),
            reads,
            list(manifest.writes),
            list(manifest.capabilities),
        )

    def scope(self, narrowed: list[str] | None = None) -> Scope:
        """Checks every kind, selector and capability, and says what the plugin may touch,
        its namespaces narrowed to ``narrowed`` when the operator gave any (a narrowing cannot
        widen: the two lists intersect). Raises :class:`DeclarationError`."""
        namespaces = Namespaces.declared(self.namespaces)
        if narrowed is not None:
            namespaces = namespaces.intersect(Namespaces.declared(narrowed))
        scope = Scope.new(
            _checked("watches.kind", self.watched), namespaces, _selector("watches.selector.labels", self.labels)
        )
        for kind in self.owns:
            scope.owns(_checked("owns", kind))
        for kind, read_namespaces, labels in self.reads:
            selector = _selector("reads.selector.labels", labels)
            scope.reads(_checked("reads.kind", kind), read_namespaces, selector)
        for kind in self.writes:
            scope.writes(_checked("writes", kind))
        for capability in self.capabilities:
            scope.capability(_offered(capability))
        return scope


def _checked(where: str, kind: Gvk) -> Gvk:
    if not kind.version or not kind.kind:
        given = f"{kind.group}/{kind.version}/{kind.kind}"
        raise DeclarationError(f'{where}: group/version/kind "{given}" needs a version and a kind')
    return kind


def _selector(where: str, labels: str) -> LabelSelector:
    try:
        return LabelSelector.parse(labels)
    except ParseError as e:
        raise DeclarationError(f"{where}: {e}") from None


def _offered(capability: str) -> str:
    """The capabilities a host offers: ``sql:<database>``."""
    database = capability.removeprefix("sql:")
    if capability.startswith("sql:") and _DATABASE.fullmatch(database):
        return capability
    raise DeclarationError(
        f'capabilities: "{capability}" is not a capability this host offers (`sql:<database>`, '
        "the database name in lowercase letters, digits, '-' or '_')"
    )
