"""The plugin's own description of itself: :class:`Manifest` and the kinds, selectors,
predicates, mappings and webhooks it is built from.

The host derives informers, queues and permissions from the manifest, and checks every action
and cache read against it; :class:`wasmctrl.testing.Harness` makes the same checks natively.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Gvk:
    """A Kubernetes group/version/kind; ``group`` is empty for the core group (Pods,
    ConfigMaps, ...)."""

    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> Gvk:
        """The kind of objects whose ``apiVersion`` is ``api_version`` (``v1``, ``apps/v1``)."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` objects of this kind carry."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"


@dataclass
class Selector:
    """Which objects of a kind: ``namespaces`` (empty: every namespace, or the kind is
    cluster-scoped) and a label selector in its string form (``app=nginx,tier in (web,api)``;
    empty selects all)."""

    namespaces: list[str] = field(default_factory=list)
    labels: str = ""


class Predicate(enum.Enum):
    """A filter the host applies to watch events before it queues a key. With none, every
    change queues it; with several, any one passing is enough."""

    #: Creates, deletes, and updates that change ``metadata.generation`` (spec changes).
    GENERATION_CHANGED = "generation-changed"
    #: Creates, deletes, and updates that change ``metadata.labels``.
    LABELS_CHANGED = "labels-changed"
    #: Creates, deletes, and updates that change ``metadata.annotations``.
    ANNOTATIONS_CHANGED = "annotations-changed"
    #: Creates, deletes, and updates that start deletion or change ``metadata.finalizers``.
    FINALIZERS_CHANGED = "finalizers-changed"


@dataclass
class Watch:
    """The primary kind a plugin reconciles: one key per object."""

    kind: Gvk
    selector: Selector = field(default_factory=Selector)
    predicates: list[Predicate] = field(default_factory=list)


class MapBy(enum.Enum):
    """How a :class:`Mapping` finds the watched object an event on a related kind is about."""

    OWNER = "owner"
    SAME_NAME = "same-name"
    LABEL = "label"
    ANNOTATION = "annotation"
    NAMESPACE = "namespace"


@dataclass(frozen=True)
class Mapping:
    """How an event on a related kind maps to keys of the watched kind. Build one with the
    class methods; ``key`` is the label or annotation for :attr:`MapBy.LABEL` and
    :attr:`MapBy.ANNOTATION`."""

    by: MapBy
    key: str = ""

    @classmethod
    def owner(cls) -> Mapping:
        """Through the object's controller owner reference to the watched kind."""
        return cls(MapBy.OWNER)

    @classmethod
    def same_name(cls) -> Mapping:
        """The watched object with the same namespace and name."""
        return cls(MapBy.SAME_NAME)

    @classmethod
    def label(cls, key: str) -> Mapping:
        """The watched object in the same namespace named by the value of label ``key``."""
        return cls(MapBy.LABEL, key)

    @classmethod
    def annotation(cls, key: str) -> Mapping:
        """The watched object in the same namespace named by the value of annotation ``key``."""
        return cls(MapBy.ANNOTATION, key)

    @classmethod
    def namespace(cls) -> Mapping:
        """Every cached watched object in the same namespace (use sparingly)."""
        return cls(MapBy.NAMESPACE)


@dataclass
class Related:
    """Another kind the plugin reads from the cache; events on it queue the keys ``trigger``
    names (``None``: read-only)."""

    kind: Gvk
    selector: Selector = field(default_factory=Selector)
    trigger: Mapping | None = None


class Operation(enum.Enum):
    """An admission operation."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    #: exec, attach, port-forward: never sent for the kinds plugins reconcile.
    CONNECT = "connect"


@dataclass
class Webhooks:
    """What a plugin serves as webhooks for the kind it reconciles."""

    #: The operations its Validator judges; none: no validating webhook.
    validates: list[Operation] = field(default_factory=list)
    #: Whether its Defaulter defaults created and updated objects.
    defaults: bool = False
    #: The versions of its kind its Converter converts between; none: no conversion webhook.
    converts: list[str] = field(default_factory=list)

    def any(self) -> bool:
        """Whether it serves any webhook."""
        return bool(self.validates) or self.defaults or bool(self.converts)


@dataclass
class Manifest:
    """What a plugin declares about itself. Start with :meth:`for_kind` and chain the builder
    methods, which change the manifest and return it::

        Manifest.for_kind("cloudnative.tw/v1alpha1", "VirtualMachine", "virtualmachine-py")
            .with_version("0.1.0")
            .predicate(Predicate.GENERATION_CHANGED)
            .owns_kind("v1", "ConfigMap")

    Builder methods are named apart from the fields they set (``with_version`` sets
    ``version``) because a Python class cannot hold both under one name.
    """

    #: Stable plugin name: the field manager is ``wasmctrl/<name>``; metrics and logs carry it.
    name: str
    #: The kind reconciled.
    watches: Watch
    #: The plugin's own version string.
    version: str = "0.0.0"
    #: Kinds of the children it creates (the host adds a controller owner reference to them).
    owns: list[Gvk] = field(default_factory=list)
    #: Other kinds it reads from the cache (and maybe is triggered by).
    reads: list[Related] = field(default_factory=list)
    #: Kinds it patches, applies or deletes without owning them.
    writes: list[Gvk] = field(default_factory=list)
    #: Capabilities the operator must grant, such as ``sql:students``.
    capabilities: list[str] = field(default_factory=list)
    #: The finalizer the SDK keeps on reconciled objects (see :meth:`with_finalizer`). The
    #: SDK's own: the host sees only the actions adding and removing it.
    finalizer: str | None = None
    #: The webhooks it serves for the kind it reconciles.
    webhooks: Webhooks = field(default_factory=Webhooks)

    @classmethod
    def for_kind(cls, api_version: str, kind: str, name: str) -> Manifest:
        """A plugin named ``name`` reconciling every object of ``kind`` (``apiVersion``
        ``api_version``), reacting to every change."""
        return cls(name=name, watches=Watch(Gvk.from_api_version(api_version, kind)))

    def with_version(self, version: str) -> Manifest:
        """Sets the plugin's version string (keep it the pyproject's ``version``)."""
        self.version = version
        return self

    def namespaces(self, *namespaces: str) -> Manifest:
        """Restricts the watched objects to these namespaces."""
        self.watches.selector.namespaces = list(namespaces)
        return self

    def labels(self, selector: str) -> Manifest:
        """Restricts the watched objects to those matching a label selector (``app=nginx``)."""
        self.watches.selector.labels = selector
        return self

    def predicate(self, predicate: Predicate) -> Manifest:
        """Adds an event filter; with several, any one passing queues the key."""
        self.watches.predicates.append(predicate)
        return self

    def owns_kind(self, api_version: str, kind: str) -> Manifest:
        """Declares a kind of child object this plugin creates and owns."""
        self.owns.append(Gvk.from_api_version(api_version, kind))
        return self

    def reads_kind(
        self,
        api_version: str,
        kind: str,
        *,
        namespaces: list[str] | None = None,
        labels: str = "",
        trigger: Mapping | None = None,
    ) -> Manifest:
        """Declares a kind this plugin reads from the cache, in ``namespaces`` (none: the
        plugin's own) where labels match ``labels``, optionally triggered by its events."""
        selector = Selector(list(namespaces or []), labels)
        self.reads.append(Related(Gvk.from_api_version(api_version, kind), selector, trigger))
        return self

    def writes_kind(self, api_version: str, kind: str) -> Manifest:
        """Declares a kind this plugin patches, applies or deletes without owning it."""
        self.writes.append(Gvk.from_api_version(api_version, kind))
        return self

    def capability(self, name: str) -> Manifest:
        """Declares a capability the operator must grant, such as ``sql:students``."""
        self.capabilities.append(name)
        return self

    def with_finalizer(self, name: str) -> Manifest:
        """Guards reconciled objects with the finalizer ``name``, as kube-runtime's
        ``finalizer()`` does: the SDK adds it to a live object before its first ``Apply``
        (in a reconcile of its own), and once the object is being deleted calls ``Cleanup``
        and removes the finalizer when that cleanup succeeded. Without one, nothing waits for
        the plugin: a deleted object is cleaned up if other finalizers hold it, and is
        otherwise simply ``Gone``."""
        self.finalizer = name
        return self

    def validating(self, *operations: Operation) -> Manifest:
        """Serves a validating webhook for the reconciled kind on ``operations``: the
        plugin's :class:`~wasmctrl.webhooks.Validator` judges them."""
        self.webhooks.validates = list(operations)
        return self

    def defaulting(self) -> Manifest:
        """Serves a defaulting (mutating) webhook on creates and updates: the plugin's
        :class:`~wasmctrl.webhooks.Defaulter` fills in what objects leave out."""
        self.webhooks.defaults = True
        return self

    def converting(self, *versions: str) -> Manifest:
        """Serves the conversion webhook of the reconciled kind between ``versions``: the
        plugin's :class:`~wasmctrl.webhooks.Converter` converts."""
        self.webhooks.converts = list(versions)
        return self
