"""The :class:`Reconciler` a plugin implements, the events it is asked to handle (:class:`Apply`,
:class:`Cleanup`, :class:`Gone`), and how the SDK decides which from the host's request, the
plugin's declared finalizer included.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from . import meta
from .action import Action, Outcome
from .context import Context
from .error import Error
from .manifest import Manifest
from .request import Request
from .settings import NoSettings
from .sql import SqlError

S = TypeVar("S")


@dataclass(frozen=True)
class Apply:
    """The object exists and is not being deleted (and holds the plugin's finalizer, when it
    declares one): bring the world in line with it."""

    object: dict[str, Any]


@dataclass(frozen=True)
class Cleanup:
    """The object is being deleted. With a finalizer declared, that finalizer holds it until
    this cleanup succeeds, then the SDK removes it; without one, other finalizers hold it and
    nothing waits for this plugin."""

    object: dict[str, Any]


@dataclass(frozen=True)
class Gone:
    """The object no longer exists: what it owned goes with it by garbage collection, and what
    it did not own is the plugin's to let go of."""

    namespace: str
    name: str


#: What a reconcile is asked to do with its key, as kube-runtime's ``finalizer::Event`` says
#: it, plus the key whose object is gone. Match on it::
#:
#:     match event:
#:         case Apply(obj): ...
#:         case Cleanup(obj): ...
#:         case Gone(namespace, name): ...
Reconcile = Apply | Cleanup | Gone


class Reconciler(abc.ABC, Generic[S]):
    """A reconciler: declares what it watches and decides, per key, what should happen.

    Subclass it, name the settings type as ``Settings`` (a dataclass; :class:`NoSettings`
    when it takes none, ``dict`` for free-form JSON) and implement :meth:`manifest` and
    :meth:`reconcile`. Every call runs in a fresh sandbox, on a fresh instance of the class:
    nothing set on ``self`` or in a module global survives from one call to the next.
    """

    #: The type the operator's settings are parsed into before each call.
    Settings: ClassVar[type[Any]] = NoSettings

    @abc.abstractmethod
    def manifest(self, settings: S) -> Manifest:
        """Describes the plugin for the operator's settings. Raising ``ValueError`` (such as
        :class:`~wasmctrl.SettingsError`) rejects the settings: the host refuses to load the
        plugin and prints the message.

        The SDK also calls it before each reconcile of an existing object, to learn the
        finalizer it handles: keep it a pure function of the settings."""

    @abc.abstractmethod
    def reconcile(self, event: Reconcile, ctx: Context[S]) -> Outcome | Error:
        """Decides what to do for one key: :class:`Apply` a live object, :class:`Cleanup` one
        being deleted, or let a :class:`Gone` one go. Return the :class:`Outcome`, or raise
        (or return) an :class:`Error`."""

    def warm_up(self) -> Sequence[dict[str, Any]]:
        """Sample objects for the component's build to reconcile, each 200 times (CPython
        specialises and caches as code runs again), before it snapshots the interpreter:
        every call starts from the snapshot, so what the samples' reconciles left warm
        (specialised bytecode, attribute caches) no call pays for again.
        The build's reconciles see no settings, no cached objects and no databases, and what
        they return or raise is dropped; but whatever they change in module-level state
        starts every call changed. None by default: nothing of the plugin runs at build time
        but its import."""
        return ()


def finalizer(obj: dict[str, Any], name: str, reconcile: Callable[[Reconcile], Outcome]) -> Outcome:
    """kube-runtime's ``finalizer()`` for plugins, which reconcilers with a declared finalizer
    get without calling it. For ``obj`` and the finalizer ``name``:

    - live without the finalizer: adds it, and nothing else (the change brings the object
      back; declare ``Predicate.FINALIZERS_CHANGED`` if you filter events);
    - live with it: ``reconcile(Apply(obj))``;
    - being deleted with it: ``reconcile(Cleanup(obj))``, then, when that succeeded, removes
      the finalizer so the object can go; a failed cleanup keeps it and is retried;
    - being deleted without it: nothing (it is not ours to clean up).
    """
    ours = name in meta.finalizers(obj)
    if meta.deleting(obj):
        if not ours:
            return Outcome.done()
        return reconcile(Cleanup(obj)).push(Action.remove_finalizer(name))
    if not ours:
        return Outcome.of(Action.add_finalizer(name))
    return reconcile(Apply(obj))


def outcome_of(result: object) -> Outcome:
    """What a plugin's ``reconcile`` returned, as an outcome: an :class:`Error` returned is
    raised, and anything else but an :class:`Outcome` is the plugin's bug, reported as a
    terminal error rather than taken as "done"."""
    if isinstance(result, Outcome):
        return result
    if isinstance(result, Error):
        raise result
    raise Error.terminal(f"reconcile returned {type(result).__name__}, not an Outcome")


def run(plugin: Reconciler[Any], request: Request, ctx: Context[Any]) -> Outcome:
    """Runs ``plugin`` for the host's ``request``: decodes the object, handles the finalizer
    the manifest declares, and calls ``reconcile`` with what is left to do. Raises
    :class:`Error` for a failed reconcile (an uncaught :class:`~wasmctrl.sql.SqlError`
    included); any other exception is the caller's to report."""

    def call(event: Reconcile) -> Outcome:
        try:
            return outcome_of(plugin.reconcile(event, ctx))
        except SqlError as e:
            raise e.to_error() from None

    obj = request.decoded()
    if obj is None:
        return call(Gone(request.namespace, request.name))
    try:
        manifest = plugin.manifest(ctx.settings)
    except ValueError as e:
        raise Error.terminal(e) from None
    if manifest.finalizer is not None:
        return finalizer(obj, manifest.finalizer, call)
    if meta.deleting(obj):
        return call(Cleanup(obj))
    return call(Apply(obj))
