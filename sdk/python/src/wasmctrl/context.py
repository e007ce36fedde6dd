"""What a reconcile knows and can ask of the host: :class:`Context` (settings, the key, the
host's clock, what the previous reconcile's actions did, cache reads, SQL) and :class:`Host`,
the services behind it.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from . import _json
from .error import Error
from .log import Level
from .manifest import Gvk
from .request import ActionFailure, ActionResult, Request, rfc3339
from .sql import Rows, SqlError, Statement

S = TypeVar("S")


class CacheError(Exception):
    """A cache read the host refused or could not answer, with the host's message."""


class Host(Protocol):
    """The host services a plugin uses. In wasm these are the component's imports
    (``wasmctrl.guest``); natively :class:`wasmctrl.testing.Harness` stands in for them."""

    def log(self, level: Level, message: str, fields: list[tuple[str, str]]) -> None:
        """Records a log line with key/value fields."""

    def get(self, kind: Gvk, namespace: str, name: str) -> str | None:
        """One object as JSON; ``None`` when it is not cached. Raises :class:`CacheError`."""

    def list(self, kind: Gvk, namespace: str, labels: str) -> builtins.list[str]:
        """Objects as JSON in a namespace (empty: all) matching a label selector (empty: all).
        Raises :class:`CacheError`."""

    def children(self, kind: Gvk, namespace: str, owner_uid: str) -> builtins.list[str]:
        """Objects as JSON in a namespace (empty: all) that the object with ``owner_uid``
        controls. Raises :class:`CacheError`."""

    def sql(self, database: str, statements: builtins.list[Statement]) -> builtins.list[Rows]:
        """Runs statements in one transaction on a granted database. Raises
        :class:`~wasmctrl.sql.SqlError`."""


def _parse_all(items: list[str], what: str) -> list[dict[str, Any]]:
    """Each object a read returned, parsed; one that does not parse is a retryable error
    saying what was read (the cache holds what the API server served, so it is transient)."""
    out = []
    for text in items:
        try:
            out.append(_json.loads(text))
        except ValueError as e:
            raise Error.retryable(f"{what}: {e}") from None
    return out


class Cache:
    """Reads from the host's informer cache, limited to the kinds the manifest declares (the
    watched kind, owned kinds and ``reads``) in the namespaces and labels it declares. A read
    outside them fails (a retryable :class:`~wasmctrl.Error` naming what was refused) and the
    host fails the reconcile even if the plugin catches it."""

    def __init__(self, host: Host) -> None:
        self._host = host

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One cached object of a declared kind; ``None`` when it is not cached."""
        gvk = Gvk.from_api_version(api_version, kind)
        try:
            text = self._host.get(gvk, namespace, name)
        except CacheError as e:
            raise Error.retryable(e) from None
        if text is None:
            return None
        return _parse_all([text], f"{kind} {namespace}/{name}")[0]

    def list(self, api_version: str, kind: str, namespace: str = "", labels: str = "") -> builtins.list[dict[str, Any]]:
        """Cached objects of a declared kind in ``namespace`` (empty: every namespace the
        plugin may read) matching the label selector ``labels`` (empty: all), in
        namespace/name order."""
        gvk = Gvk.from_api_version(api_version, kind)
        try:
            items = self._host.list(gvk, namespace, labels)
        except CacheError as e:
            raise Error.retryable(e) from None
        return _parse_all(items, f"listing {kind}")

    def children(self, api_version: str, kind: str, owner: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        """The cached objects of a declared kind that ``owner`` controls (an owner reference
        with ``controller: true`` and its uid), in its namespace, in name order: the children
        a previous reconcile applied, found through the host's owner index."""
        gvk = Gvk.from_api_version(api_version, kind)
        meta = owner.get("metadata") or {}
        namespace, uid = str(meta.get("namespace") or ""), str(meta.get("uid") or "")
        try:
            items = self._host.children(gvk, namespace, uid)
        except CacheError as e:
            raise Error.retryable(e) from None
        return _parse_all(items, f"children of kind {kind}")


class Database:
    """A database the operator granted and the manifest declares as ``sql:<name>``."""

    def __init__(self, host: Host, name: str) -> None:
        self._host = host
        self.name = name

    def execute(self, statement: Statement) -> Rows:
        """Runs one statement."""
        rows = self.transaction([statement])
        if not rows:
            raise SqlError("the host returned no result for the statement")
        return rows[0]

    def transaction(self, statements: list[Statement]) -> list[Rows]:
        """Runs statements in order in one transaction: all take effect or none."""
        return self._host.sql(self.name, statements)


class Context(Generic[S]):
    """Handed to ``reconcile``: the operator's settings, the key, the host's clock, what the
    previous reconcile's actions did, cache reads and SQL. Log with :mod:`wasmctrl.log` or
    ``logging``."""

    def __init__(self, host: Host, settings: S, request: Request) -> None:
        self._host = host
        self._request = request
        #: The operator's settings, parsed into the reconciler's ``Settings``.
        self.settings: S = settings
        #: Reads from the host's cache.
        self.cache = Cache(host)

    @property
    def key(self) -> str:
        """The key reconciled: ``namespace/name``, or ``name`` for a cluster-scoped kind."""
        return self._request.key

    @property
    def namespace(self) -> str:
        """The reconciled object's namespace; empty for a cluster-scoped kind."""
        return self._request.namespace

    @property
    def name(self) -> str:
        """The reconciled object's name."""
        return self._request.name

    @property
    def now(self) -> datetime:
        """The host's current time (UTC). Read it rather than a clock: one reconcile sees one
        time, and tests set it (``Harness.now``)."""
        return self._request.now

    def now_rfc3339(self) -> str:
        """:attr:`now` as Kubernetes writes times: RFC 3339 in UTC, to the second."""
        return rfc3339(self._request.now)

    @property
    def previous(self) -> list[ActionResult]:
        """What each action of this key's previous reconcile did, in order; empty when there
        was none since the host (or this version of the plugin) started, or when it returned
        an error."""
        return list(self._request.previous)

    def failures(self) -> Iterator[tuple[int, ActionFailure]]:
        """The previous reconcile's failed actions: each one's position and failure."""
        return self._request.failures()

    def sql(self, database: str) -> Database:
        """A database the operator granted and the manifest declares as ``sql:<database>``."""
        return Database(self._host, database)
