"""The glue between a :class:`~wasmctrl.Reconciler` and the bindings componentize-py generates
from the contract (``wit_world``): :func:`export` makes the two classes the component exports
(their conversions to and from the bindings' types are in :mod:`.wire`).

Plugin authors never see a binding type: the entry module ``wasmctrl build`` writes is ::

    from wasmctrl.guest import export as _export
    from virtualmachine import VirtualMachineController as _Plugin
    Reconciler, Webhooks = _export(_Plugin)

``wit_world`` exists only inside a component build, so it is imported when :func:`export`
runs, not when this package is: the whole SDK imports natively. componentize-py runs the entry
module at build time and snapshots the result, so no call pays for those imports.

Errors map as the Rust SDK's ``export.rs`` maps them: settings that do not parse are the
manifest's error string (and a terminal reconcile error); a reconcile's :class:`~wasmctrl.Error`
is the contract's ``error``; an object that does not parse, or any other exception out of
``reconcile``, is a terminal error naming the object (its traceback logged at error level).
Nothing a plugin raises traps the sandbox.
"""

from __future__ import annotations

import builtins
import sys
import traceback
from collections.abc import Callable
from typing import Any

from .. import _json, codec, log
from .. import settings as settings_
from ..context import Context, Host
from ..error import Error, SettingsError
from ..manifest import Gvk, Manifest, Operation
from ..reconcile import Reconciler, run
from ..request import Request
from ..sql import Rows, SqlError, Statement
from ..webhooks import Admission, Denied, UserInfo, convert_json, default_json, served, validate_json
from . import immortal
from .wire import Imports, Wire


def unserved(webhook: str) -> str:
    """The error of a webhook call the plugin does not implement."""
    return f"this plugin does not serve a `{webhook}` webhook"


def described(e: BaseException) -> str:
    """An exception as one line: its type and message."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class Fail(Exception):
    """A call's error, as the contract carries it (``value``). Raised inside a call and turned
    into componentize-py's ``Err`` at the export's edge only: ``Err`` is a frozen dataclass, and
    a context manager re-raising it (``log.forwarding``'s) would fail setting its traceback."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


#: How many times the build reconciles each warm-up sample: the interpreter specialises and
#: caches as code runs again, and 200 passes left more of that in the snapshot than one. The
#: Python seed's p50, five alternated runs each: 0.58..0.66 (median 0.60) -> 0.54..0.63 (0.56)
#: ms. (The TypeScript SDK's one pass: 200 measured the same there.)
WARM_UP_ROUNDS = 200


class Nothing:
    """The host a build-time reconcile sees (:meth:`Guest.warm_up`): nothing cached, no
    database, logs dropped. The component's imports cannot be called before its snapshot."""

    def log(self, level: log.Level, message: str, fields: list[tuple[str, str]]) -> None:
        pass

    def get(self, kind: Gvk, namespace: str, name: str) -> str | None:
        return None

    def list(self, kind: Gvk, namespace: str, labels: str) -> builtins.list[str]:
        return []

    def children(self, kind: Gvk, namespace: str, owner_uid: str) -> builtins.list[str]:
        return []

    def sql(self, database: str, statements: builtins.list[Statement]) -> builtins.list[Rows]:
        raise SqlError("no database while the component is built")


class Guest:
    """What the exported classes do, for one plugin class over one set of bindings. Each
    export runs through :meth:`call`, which forwards logs and turns a :class:`Fail` into the
    ``Err`` the bindings expect."""

    def __init__(self, plugin: type[Reconciler[Any]], wire: Wire, imports: Host | None = None) -> None:
        self.plugin = plugin
        self.wire = wire
        self.imports: Host = imports or Imports(wire)

    def warm_up(self, rounds: int = WARM_UP_ROUNDS) -> int:
        """Reconciles each of the plugin's :meth:`~wasmctrl.Reconciler.warm_up` samples
        ``rounds`` times, against a host that answers nothing (:class:`Nothing`), through the
        same path as the ``reconcile`` export. A sample that fails (at its first failure), or a
        ``warm_up`` that raises, warms less and fails nothing. Returns how many samples
        reconciled without an error."""
        try:
            samples = list(self.plugin().warm_up())
        except Exception:
            return 0
        building = Guest(self.plugin, self.wire, Nothing())
        warmed = 0
        for obj in samples:
            try:
                metadata = obj.get("metadata") or {}
                now = self.wire.types.Timestamp(0, 0)
                request = self.wire.types.Request(
                    metadata.get("namespace", ""), metadata.get("name", ""), _json.dumps(obj), False, "", now, []
                )
                for _ in range(rounds):
                    with log.forwarding(building.imports.log):
                        building.reconcile(request)
                warmed += 1
            except Exception:
                continue  # less warmed; the build goes on
        return warmed

    def call(self, export: Callable[..., Any], *args: Any) -> Any:
        """Runs one export with the plugin's logs going to the host."""
        try:
            with log.forwarding(self.imports.log):
                return export(*args)
        except Fail as failed:
            value = failed.value
        raise self.wire.err(value)

    def settings(self, text: str) -> Any:
        return settings_.parse(self.plugin.Settings, text)

    def declared(self, text: str) -> Manifest:
        """The plugin's manifest for the settings ``text``; :class:`Fail` with the message
        for refused settings (``ValueError``) or a manifest that raised."""
        try:
            return self.plugin().manifest(self.settings(text))
        except ValueError as e:
            raise Fail(str(e)) from None
        except Exception as e:
            raise Fail(f"manifest raised {described(e)}") from None

    def manifest(self, text: str) -> Any:
        """The ``manifest`` export."""
        return self.wire.manifest(self.declared(text))

    def reconcile(self, wire_request: Any) -> Any:
        """The ``reconcile`` export: the outcome, or the contract's error."""
        request = self.wire.request(wire_request)
        try:
            settings = self.settings(wire_request.settings)
        except SettingsError as e:
            # The host loaded the plugin with these settings, so they parsed then; they may
            # not if the plugin changed its mind, which is terminal for this version.
            raise Fail(self.wire.types.Error(str(e), False)) from None
        try:
            context = Context(self.imports, settings, request)
            return self.wire.outcome(run(self.plugin(), request, context))
        except Error as e:
            raise Fail(self.wire.types.Error(e.message, e.is_retryable)) from None
        except BaseException as e:
            message = f"{request.key}: reconcile raised {described(e)}"
            log.error(message, traceback="".join(traceback.format_exception(e)))
            raise Fail(self.wire.types.Error(message, False)) from None

    def declare(self, text: str) -> Any:
        """The ``webhooks`` export's ``declare``: what the manifest declares, checked against
        the webhook classes the plugin implements."""
        declared = self.declared(text).webhooks
        implemented = served(self.plugin)
        wanted = {
            "validate": bool(declared.validates),
            "default": declared.defaults,
            "convert": bool(declared.converts),
        }
        for name in wanted:
            if wanted[name] and not implemented[name]:
                raise Fail(f"the manifest declares a `{name}` webhook that the plugin does not implement")
        operations = [self.wire.webhooks.Operation[o.name] for o in declared.validates]
        return self.wire.webhooks.Declaration(operations, declared.defaults, list(declared.converts))

    def admission(self, r: Any) -> Admission[Any]:
        """What a validator or defaulter sees of the host's request."""
        obj = r.object if r.object is not None else r.old_object
        request = Request(r.namespace, r.name, obj, False, self.wire.time(r.now))
        user = UserInfo(r.user_info.username, r.user_info.uid, tuple(r.user_info.groups))
        settings = self.settings(r.settings)
        return Admission(
            self.imports,
            settings,
            request,
            Operation[r.operation.name],
            subresource=r.subresource,
            user=user,
            dry_run=r.dry_run,
        )

    def answer(self, warnings: list[str], patched: dict[str, Any] | None = None) -> Any:
        text = _json.dumps(patched) if patched is not None else None
        return self.wire.webhooks.AdmissionResponse(True, "", 200, list(warnings), text)

    def refusal(self, denied: Denied) -> Any:
        return self.wire.webhooks.AdmissionResponse(False, denied.message, denied.code, list(denied.warnings), None)

    def served_by(self, webhook: str) -> Any:
        """A fresh plugin instance, when it implements ``webhook``."""
        plugin = self.plugin()
        if not served(plugin)[webhook]:
            raise Fail(unserved(webhook))
        return plugin

    def decide(self, verdict: Callable[[], Any]) -> Any:
        """Runs a validator or defaulter: a refusal is an answer; anything else it raises is
        the call's error (settings that do not parse by their message)."""
        try:
            return verdict()
        except Denied as denied:
            return self.refusal(denied)
        except SettingsError as e:
            raise Fail(str(e)) from None
        except Exception as e:
            raise Fail(described(e)) from None

    def validate(self, r: Any) -> Any:
        """The ``webhooks`` export's ``validate``."""
        plugin = self.served_by("validate")
        return self.decide(lambda: self.answer(validate_json(plugin, self.admission(r), r.object, r.old_object)))

    def mutate(self, r: Any) -> Any:
        """The ``webhooks`` export's ``mutate``: the defaulter's object, for the host to diff."""
        plugin = self.served_by("default")
        if r.object is None:
            return self.answer([])

        def defaulted() -> Any:
            patched, warnings = default_json(plugin, self.admission(r), r.object)
            return self.answer(warnings, patched)

        return self.decide(defaulted)

    def convert(self, text: str, api_version: str, objects: list[str]) -> list[str]:
        """The ``webhooks`` export's ``convert``: a failed conversion fails the whole review."""
        plugin = self.served_by("convert")
        try:
            return convert_json(plugin, self.settings(text), api_version, objects)
        except ValueError as e:
            raise Fail(str(e)) from None
        except Exception as e:
            raise Fail(described(e)) from None


def export(plugin: type[Reconciler[Any]], wire: Wire | None = None) -> tuple[type, type]:
    """The component's ``Reconciler`` and ``Webhooks`` export classes for ``plugin``. A plugin
    that serves no webhooks still exports both: ``declare`` answers an empty declaration and
    the other webhook calls answer that it serves none.

    Also forwards the stdlib ``logging`` to the host (a root handler), since the entry module
    is where a plugin's process starts."""
    if not (isinstance(plugin, type) and issubclass(plugin, Reconciler)):
        raise TypeError(f"export: {plugin!r} is not a wasmctrl.Reconciler subclass")
    wire = wire or Wire.load()
    guest = Guest(plugin, wire)
    log.install()
    # Part of the snapshot: the decoders of the plugin module's types, and what reconciling
    # the plugin's samples leaves warm.
    codec.prepare(vars(sys.modules[plugin.__module__]))
    guest.warm_up()
    from wit_world import exports

    class ReconcilerExport(exports.Reconciler):
        def manifest(self, settings: str) -> Any:
            return guest.call(guest.manifest, settings)

        def reconcile(self, request: Any) -> Any:
            return guest.call(guest.reconcile, request)

    class WebhooksExport(exports.Webhooks):
        def declare(self, settings: str) -> Any:
            return guest.call(guest.declare, settings)

        def validate(self, request: Any) -> Any:
            return guest.call(guest.validate, request)

        def mutate(self, request: Any) -> Any:
            return guest.call(guest.mutate, request)

        def convert(self, settings: str, desired_api_version: str, objects: list[str]) -> list[str]:
            return guest.call(guest.convert, settings, desired_api_version, objects)

    # Last, so that everything the calls use is in the snapshot by now.
    immortal.mark()
    return ReconcilerExport, WebhooksExport
