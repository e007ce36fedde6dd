"""Write wasmctrl reconciler plugins in Python.

A plugin is one class: a :class:`Reconciler` with a ``manifest`` and a ``reconcile``, over
objects kept as plain ``dict``\\ s::

    from wasmctrl import Apply, Context, Manifest, Outcome, Reconciler, log

    class Hello(Reconciler):
        def manifest(self, settings):
            return Manifest.for_kind("v1", "ConfigMap", "hello")

        def reconcile(self, event, ctx: Context):
            if isinstance(event, Apply):
                log.info("reconciling", key=ctx.key, keys=len(event.object.get("data", {})))
            return Outcome.done()

The host calls ``manifest`` once per plugin version and ``reconcile`` once per key, each time
in a fresh sandbox. ``wasmctrl build`` makes the component (see the README's "How the
component is built"); :class:`wasmctrl.testing.Harness` runs a plugin natively under pytest
with the host's own checks.

The root holds what every plugin uses; :mod:`wasmctrl.action`, :mod:`wasmctrl.manifest`,
:mod:`wasmctrl.conditions`, :mod:`wasmctrl.meta`, :mod:`wasmctrl.sql` and
:mod:`wasmctrl.webhooks` the rest. The SDK implements the plugin contract
``wasmctrl:plugin@0.3.1`` (``sdk/wit/plugin.wit``).
"""

from . import codec, log, meta
from .action import Action, Event, EventType, ObjectRef, Outcome, Propagation
from .conditions import Condition, find_condition, set_condition
from .context import Context
from .error import Error, SettingsError
from .manifest import Gvk, Manifest, Mapping, Operation, Predicate, Selector
from .reconcile import Apply, Cleanup, Gone, Reconcile, Reconciler, finalizer
from .request import ActionFailure, ActionResult, ActionStatus, Request
from .settings import NoSettings
from .sql import SqlError, Statement
from .webhooks import Admission, Converter, Defaulter, Denied, HubAndSpoke, Validator

#: The plugin contract this SDK implements.
CONTRACT = "wasmctrl:plugin@0.3.1"

__all__ = [
    "CONTRACT",
    "Action",
    "ActionFailure",
    "ActionResult",
    "ActionStatus",
    "Admission",
    "Apply",
    "Cleanup",
    "Condition",
    "Context",
    "Converter",
    "Defaulter",
    "Denied",
    "Error",
    "Event",
    "EventType",
    "Gone",
    "Gvk",
    "HubAndSpoke",
    "Manifest",
    "Mapping",
    "NoSettings",
    "ObjectRef",
    "Operation",
    "Outcome",
    "Predicate",
    "Propagation",
    "Reconcile",
    "Reconciler",
    "Request",
    "Selector",
    "SettingsError",
    "SqlError",
    "Statement",
    "Validator",
    "codec",
    "finalizer",
    "find_condition",
    "log",
    "meta",
    "set_condition",
]
