"""A native stand-in for the host, so ``pytest`` tests a plugin without wasm.

It makes the host's own checks (:mod:`.scope`, :mod:`.checks`, ported from ``wasmctrl-core``):
a cache read or an action outside the kinds, namespaces and labels the manifest declares
(narrowed by :meth:`Harness.namespaces`, as an operator's config would) fails the reconcile
with a terminal error naming what was refused, as it fails on the host.

SQL goes to a stand-in function given with :meth:`Harness.sql`; every statement is recorded
for :meth:`Harness.statements`, and a database the manifest did not declare is refused as the
host refuses it::

    h = Harness(MyPlugin).now("2026-01-01T00:00:00Z").object({...})   # a cached Pod
    outcome = h.reconcile({...})                                        # the object
    assert len(outcome.actions) == 1

Unlike the component, the harness lets an unexpected exception out of ``reconcile``
propagate (the host would report it as a terminal error), so pytest shows its traceback.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from .. import log
from .. import settings as settings_
from ..action import Outcome
from ..context import CacheError, Context
from ..error import Error
from ..guest import unserved
from ..log import Level
from ..manifest import Gvk, Manifest, Operation
from ..reconcile import Reconciler, run
from ..request import Request, parse_time
from ..sql import Rows, SqlError, Statement
from ..webhooks import Admission, Converter, Defaulter, Validator, convert_json, default_json, served, validate_json
from .checks import ActionError, BestEffortError, Reconciled, best_effort, check_action
from .scope import Declaration, DeclarationError, Refusal, Scope, Verb
from .selector import LabelSelector, ParseError

W = TypeVar("W", Validator, Defaulter, Converter)

#: Answers the plugin's SQL in tests: ``(database, statements) -> one Rows per statement``.
SqlStandIn = Callable[[str, list[Statement]], list[Rows]]


class WebhookError(Exception):
    """A webhook call the host would fail (rather than answer with a decision): a webhook the
    manifest does not declare, one the plugin does not implement, a refused cache read."""


@dataclass(frozen=True)
class LogLine:
    """One line a plugin logged."""

    level: Level
    message: str
    fields: list[tuple[str, str]]


def controlled_by(obj: dict[str, Any], owner_uid: str) -> bool:
    """Whether ``owner_uid`` controls ``obj``: an ``ownerReferences`` entry with
    ``controller: true`` and that uid, as kube's garbage collector reads it."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") is True and r.get("uid") == owner_uid for r in references if isinstance(r, dict))


def _labels(obj: dict[str, Any]) -> dict[str, Any] | None:
    return (obj.get("metadata") or {}).get("labels")


class StandIn:
    """The host's services during one call of a plugin with ``scope``: the harness's cache,
    its logs and its SQL, each read checked against the scope. The first refused read is kept,
    since the host fails the call for it even when the plugin carries on."""

    def __init__(self, harness: Harness, scope: Scope) -> None:
        self.harness = harness
        self.scope = scope
        self.refused: Refusal | None = None

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None:
        self.harness._logs.append(LogLine(level, message, list(fields)))

    def _check_read(self, verb: Verb, kind: Gvk, namespace: str, name: str) -> Any:
        try:
            return self.scope.check_read(verb, kind, namespace, name)
        except Refusal as refusal:
            self._refuse(refusal)

    def _refuse(self, refusal: Refusal) -> None:
        if self.refused is None:
            self.refused = refusal
        raise CacheError(str(refusal))

    def _cached(self, kind: Gvk, namespace: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The cached objects of ``kind`` in ``namespace`` (empty: all), in namespace/name
        order, with their namespaces."""
        for (ns, _), obj in sorted(self.harness._objects.get(kind, {}).items()):
            if not namespace or ns == namespace:
                yield ns, obj

    def get(self, kind: Gvk, namespace: str, name: str) -> str | None:
        reads = self._check_read(Verb.GET, kind, namespace, name)
        obj = self.harness._objects.get(kind, {}).get((namespace, name))
        # The host caches only what the plugin declared (namespaces and labels go to the API
        # server): an object outside its selector is not found, as on the host.
        if obj is None or not reads.admits(namespace, _labels(obj)):
            return None
        return json.dumps(obj)

    def list(self, kind: Gvk, namespace: str, labels: str) -> builtins.list[str]:
        try:
            selector = LabelSelector.parse(labels)
        except ParseError as e:
            raise CacheError(str(e)) from None
        reads = self._check_read(Verb.LIST, kind, namespace, "")
        reason = reads.check_selector(selector)
        if reason is not None:
            self._refuse(Refusal(Verb.LIST, kind, namespace, "", reason))
        return [
            json.dumps(obj)
            for ns, obj in self._cached(kind, namespace)
            if selector.matches(_labels(obj)) and reads.admits(ns, _labels(obj))
        ]

    def children(self, kind: Gvk, namespace: str, owner_uid: str) -> builtins.list[str]:
        reads = self._check_read(Verb.LIST, kind, namespace, "")
        return [
            json.dumps(obj)
            for ns, obj in self._cached(kind, namespace)
            if controlled_by(obj, owner_uid) and reads.admits(ns, _labels(obj))
        ]

    def sql(self, database: str, statements: builtins.list[Statement]) -> builtins.list[Rows]:
        if not self.scope.has_capability(f"sql:{database}"):
            raise SqlError(f"the manifest does not declare the capability sql:{database}")
        self.harness._statements.extend((database, s) for s in statements)
        if self.harness._sql is None:
            raise SqlError("test harness: no SQL stand-in; give one with Harness.sql")
        return self.harness._sql(database, statements)


class Harness:
    """A stand-in host for one plugin class: an in-memory cache, captured logs, fixed settings
    and clock, and SQL answered by a function. Configure it with the chaining methods, then
    run the plugin with :meth:`reconcile`, :meth:`reconcile_deleted`, :meth:`validate`,
    :meth:`defaulted` or :meth:`convert`."""

    def __init__(self, plugin: type[Reconciler[Any]]) -> None:
        if not (isinstance(plugin, type) and issubclass(plugin, Reconciler)):
            raise TypeError(f"Harness: {plugin!r} is not a wasmctrl.Reconciler subclass")
        self.plugin = plugin
        self._settings: Any = None
        self._now: datetime | None = None
        self._namespaces: list[str] | None = None
        self._sql: SqlStandIn | None = None
        self._objects: dict[Gvk, dict[tuple[str, str], dict[str, Any]]] = {}
        self._logs: list[LogLine] = []
        self._statements: list[tuple[str, Statement]] = []

    # Configuration.

    def settings(self, value: Any) -> Harness:
        """Operator settings (JSON data) handed to ``manifest`` and ``reconcile``."""
        self._settings = value
        return self

    def now(self, when: str | datetime) -> Harness:
        """The time the host reports: an aware ``datetime`` or RFC 3339 text."""
        self._now = parse_time(when) if isinstance(when, str) else when
        return self

    def namespaces(self, *names: str) -> Harness:
        """Narrows the plugin's namespaces to these, as an operator's config does."""
        self._namespaces = list(names)
        return self

    def sql(self, stand_in: SqlStandIn) -> Harness:
        """Answers SQL with ``stand_in`` (for example from an in-memory table the test keeps)."""
        self._sql = stand_in
        return self

    def object(self, obj: dict[str, Any]) -> Harness:
        """Puts an object (with apiVersion, kind, metadata.name) in the stand-in cache."""
        meta = obj.get("metadata") or {}
        kind = Gvk.from_api_version(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self._objects.setdefault(kind, {})[key] = json.loads(json.dumps(obj))
        return self

    # What the plugin did.

    def logs(self) -> list[LogLine]:
        """Everything logged so far."""
        return list(self._logs)

    def statements(self) -> list[tuple[str, Statement]]:
        """Every statement the plugin ran, with its database, in order."""
        return list(self._statements)

    # Running it.

    def parsed_settings(self) -> Any:
        """The settings as the plugin's ``Settings``; raises :class:`~wasmctrl.SettingsError`
        with the message the host would print."""
        text = "null" if self._settings is None else json.dumps(self._settings)
        return settings_.parse(self.plugin.Settings, text)

    def manifest(self) -> Manifest:
        """The plugin's manifest for the configured settings; refused settings raise as the
        host would refuse them (``ValueError``, a :class:`~wasmctrl.SettingsError` for
        settings that do not parse)."""
        return self.plugin().manifest(self.parsed_settings())

    def reconcile(self, obj: dict[str, Any]) -> Outcome:
        """Reconciles an existing object, as the host would on a watch event."""
        return self.run(Request.for_object(obj))

    def reconcile_deleted(self, namespace: str, name: str) -> Outcome:
        """Reconciles the key of an object that no longer exists."""
        return self.run(Request.for_deleted(namespace, name))

    def run(self, request: Request) -> Outcome:
        """Reconciles a hand-built request (its clock set from the harness when given one).
        Raises :class:`~wasmctrl.Error` as the host would fail it: the plugin's own errors,
        and reads or actions outside its scope."""
        if self._now is not None:
            request = replace(request, now=self._now)
        settings, _, scope = self._prepare(Error.terminal)
        if not scope.reconciles_in(request.namespace):
            raise Error.terminal(
                f"test harness: {request.key} is outside the plugin's namespaces {scope.namespaces}; the host never queues it"
            )
        host = StandIn(self, scope)
        outcome = self._refusing(
            host, Error.terminal, lambda: run(self.plugin(), request, Context(host, settings, request))
        )
        self._check(scope, request, outcome)
        return outcome

    @staticmethod
    def _refusing(host: StandIn, fail: Callable[[str], Exception], call: Callable[[], Any]) -> Any:
        """Runs ``call`` with the plugin's logs captured. A read the host refused fails the call
        whatever the plugin did with it (``fail`` with the refusal); otherwise what the call
        raised (an Error, a Denied, a bug's exception) is raised as it was."""
        failure: Exception | None = None
        with log.capturing(host.log):
            try:
                decided = call()
            except Exception as e:
                failure = e
        if host.refused is not None:
            raise fail(f"cache read {host.refused}")
        if failure is not None:
            raise failure
        return decided

    def _prepare(self, fail: Callable[[str], Exception]) -> tuple[Any, Manifest, Scope]:
        """The parsed settings, the manifest and the plugin's scope, or ``fail(message)``
        raised as the host would refuse them."""
        try:
            settings = self.parsed_settings()
            manifest = self.plugin().manifest(settings)
            return settings, manifest, Declaration.of(manifest).scope(self._namespaces)
        except (ValueError, DeclarationError) as e:
            raise fail(str(e)) from None

    def _check(self, scope: Scope, request: Request, outcome: Outcome) -> None:
        """The host's checks of an outcome, before it sends anything."""
        try:
            best_effort(outcome.best_effort, len(outcome.actions))
        except BestEffortError as e:
            raise Error.terminal(e) from None
        reconciled = Reconciled(request.namespace, request.name, request.object is not None)
        for index, action in enumerate(outcome.actions):
            try:
                check_action(scope, reconciled, action)
            except (ActionError, Refusal) as e:
                raise Error.terminal(f"action {index}: {e}") from None

    # Webhooks.

    def _declared(self, name: str, wanted: Callable[[Manifest], bool], missing: str) -> tuple[Any, Scope]:
        """Settings and scope for a webhook call, refused as the host would: the manifest
        must declare the webhook (``missing`` says it does not) and the plugin must implement
        it (``declare`` refuses a plugin that does not)."""
        settings, manifest, scope = self._prepare(WebhookError)
        if not wanted(manifest):
            raise WebhookError(f"test harness: {missing}")
        if not served(self.plugin)[name]:
            raise WebhookError(unserved(name))
        return settings, scope

    def _instance(self, webhook: type[W]) -> W:
        """A fresh instance of the plugin, as the ``webhook`` class it implements
        (:meth:`_declared` checked that it does)."""
        plugin = self.plugin()
        if not isinstance(plugin, webhook):
            raise WebhookError(f"{self.plugin.__name__} is not a {webhook.__name__}")
        return plugin

    def _admitting(self, scope: Scope, decide: Callable[[StandIn], Any]) -> Any:
        """Runs ``decide`` over a stand-in host under the plugin's scope; a refused read fails
        the call, a refusal by the plugin stands."""
        host = StandIn(self, scope)
        return self._refusing(host, WebhookError, lambda: decide(host))

    def _admission(
        self, host: StandIn, settings: Any, obj: dict[str, Any] | None, operation: Operation
    ) -> Admission[Any]:
        request = Request.for_object(obj) if obj is not None else Request.for_deleted("", "")
        if self._now is not None:
            request.now = self._now
        return Admission(host, settings, request, operation)

    def validate(
        self, operation: Operation, obj: dict[str, Any] | None = None, old: dict[str, Any] | None = None
    ) -> list[str]:
        """Runs the plugin's validating webhook as the host would: ``obj`` the object written
        (none for a delete), ``old`` the one stored (none for a create). Returns the warnings;
        raises :class:`~wasmctrl.Denied` for a refusal and :class:`WebhookError` where the host
        would fail the call."""
        settings, scope = self._declared(
            "validate", lambda m: operation in m.webhooks.validates, f"the manifest does not validate {operation.name}"
        )
        texts = [json.dumps(o) if o is not None else None for o in (obj, old)]

        def decide(host: StandIn) -> list[str]:
            admission = self._admission(host, settings, obj if obj is not None else old, operation)
            return validate_json(self._instance(Validator), admission, texts[0], texts[1])

        return self._admitting(scope, decide)

    def defaulted(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Runs the plugin's defaulting webhook on a create of ``obj``: the object as the
        host's patch would leave it, with the warnings. Raises :class:`~wasmctrl.Denied` for a
        refusal."""
        settings, scope = self._declared(
            "default", lambda m: m.webhooks.defaults, "the manifest does not declare a defaulter"
        )

        def decide(host: StandIn) -> tuple[dict[str, Any], list[str]]:
            admission = self._admission(host, settings, obj, Operation.CREATE)
            patched, warnings = default_json(self._instance(Defaulter), admission, json.dumps(obj))
            return (patched if patched is not None else json.loads(json.dumps(obj))), warnings

        return self._admitting(scope, decide)

    def convert(self, objects: list[dict[str, Any]], api_version: str) -> list[dict[str, Any]]:
        """Converts ``objects`` to ``api_version`` as the conversion webhook would."""
        version = api_version.rpartition("/")[2]
        settings, _ = self._declared(
            "convert", lambda m: version in m.webhooks.converts, f"the manifest does not convert to {version}"
        )
        converted = convert_json(self._instance(Converter), settings, api_version, [json.dumps(o) for o in objects])
        return [json.loads(o) for o in converted]
