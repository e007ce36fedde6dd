"""Webhooks for the kind a plugin reconciles, answered from the same sandbox: validation and
defaulting shaped like controller-runtime's ``CustomValidator`` and ``CustomDefaulter``, and CRD
conversion with kubebuilder's hub and spokes (:class:`HubAndSpoke`).

A plugin declares what it serves in its manifest (``validating``, ``defaulting``,
``converting``) and mixes the matching classes into its reconciler::

    class Sizes(Reconciler, Validator, Defaulter):
        def validate_create(self, cm, admission):
            size = cm.get("data", {}).get("size", "1")
            if not size.isdigit():
                raise Denied("size must be a number")
            return []

        def default(self, cm, admission):
            cm.setdefault("data", {}).setdefault("size", "1")

Each call is pure: it decides, with no actions; it may read the cache as the manifest declares.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from . import _json
from .context import Context, Host
from .manifest import Operation
from .request import Request

S = TypeVar("S")

#: Warnings for the client (kubectl prints each as ``Warning: ...``).
Warnings = list[str]


@dataclass(frozen=True)
class UserInfo:
    """Who sent an admission request."""

    #: ``system:serviceaccount:<ns>:<name>`` for a ServiceAccount.
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()


class Admission(Context[S], Generic[S]):
    """An admission request as a validator or defaulter sees it: the operation, who asked, and
    everything a reconcile's :class:`~wasmctrl.Context` offers (settings, clock, cache)."""

    def __init__(
        self,
        host: Host,
        settings: S,
        request: Request,
        operation: Operation,
        *,
        subresource: str = "",
        user: UserInfo | None = None,
        dry_run: bool = False,
    ) -> None:
        super().__init__(host, settings, request)
        #: What is being done.
        self.operation = operation
        #: The subresource written (``status``), or empty.
        self.subresource = subresource
        #: Who asked.
        self.user = user or UserInfo()
        #: A dry run: nothing the request implies is stored, so a webhook with side effects
        #: must not have them.
        self.dry_run = dry_run


class Denied(Exception):
    """A refused request: the client sees ``admission webhook "<name>" denied the request:
    <message>`` with ``code`` (403 by default). Raise it from a validator or defaulter."""

    def __init__(self, message: str, code: int = 403, warnings: Warnings | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.warnings: Warnings = list(warnings or [])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Denied):
            return NotImplemented
        return (self.message, self.code, self.warnings) == (other.message, other.code, other.warnings)

    def __hash__(self) -> int:
        return hash((self.message, self.code))

    def __repr__(self) -> str:
        return f"Denied({self.message!r}, code={self.code})"


class Validator:
    """Validates the objects of the reconciled kind, as controller-runtime's
    ``CustomValidator``: one method per operation, each allowing by default. Return warnings
    (or ``None``), or raise :class:`Denied`."""

    def validate_create(self, obj: dict[str, Any], admission: Admission[Any]) -> Warnings | None:
        """A create of ``obj``."""
        return []

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], admission: Admission[Any]) -> Warnings | None:
        """An update from ``old`` (as stored) to ``new``."""
        return []

    def validate_delete(self, obj: dict[str, Any], admission: Admission[Any]) -> Warnings | None:
        """A delete of ``obj`` (as stored)."""
        return []


class Defaulter(abc.ABC):
    """Defaults the objects of the reconciled kind on create and update, as controller-runtime's
    ``CustomDefaulter``: it changes the object in place, and the webhook answers the JSON Patch
    of what changed."""

    @abc.abstractmethod
    def default(self, obj: dict[str, Any], admission: Admission[Any]) -> Warnings | None:
        """Fills in what ``obj`` leaves out. Return warnings (or ``None``), or raise
        :class:`Denied`."""


class Converter(abc.ABC):
    """Converts objects of the reconciled kind (a CRD with several versions) between versions.
    :class:`HubAndSpoke` writes one from conversions to and from a hub version."""

    @abc.abstractmethod
    def convert(self, obj: dict[str, Any], api_version: str, settings: Any) -> dict[str, Any]:
        """``obj`` (at any version the manifest declares) as ``api_version``
        (``group/version``). Raise ``ValueError`` when it cannot be converted."""


def served(plugin: object) -> dict[str, bool]:
    """Which webhooks ``plugin`` (a reconciler class or instance) implements, by the names the
    Rust SDK's ``export!`` takes."""
    cls = plugin if isinstance(plugin, type) else type(plugin)
    return {
        "validate": issubclass(cls, Validator),
        "default": issubclass(cls, Defaulter),
        "convert": issubclass(cls, Converter),
    }


def _decoded(text: str | None) -> dict[str, Any]:
    """The object of an admission request, or the 400 refusal controller-runtime answers when
    it does not decode."""
    try:
        obj = _json.loads(text) if text is not None else None
    except ValueError as e:
        raise Denied(f"the object does not decode: {e}", 400) from None
    if not isinstance(obj, dict):
        raise Denied("the object does not decode: not a JSON object", 400)
    return obj


def validate_json(plugin: Validator, admission: Admission[Any], obj: str | None, old: str | None) -> Warnings:
    """A validator's verdict on a request whose objects are JSON (``obj`` as written, ``old``
    as stored): the method its operation names. Raises :class:`Denied`."""
    operation = admission.operation
    if operation is Operation.CREATE:
        warnings = plugin.validate_create(_decoded(obj), admission)
    elif operation is Operation.UPDATE:
        old_obj, new_obj = _decoded(old), _decoded(obj)
        warnings = plugin.validate_update(old_obj, new_obj, admission)
    elif operation is Operation.DELETE:
        warnings = plugin.validate_delete(_decoded(old), admission)
    else:
        warnings = []
    return list(warnings or [])


def default_json(plugin: Defaulter, admission: Admission[Any], text: str) -> tuple[dict[str, Any] | None, Warnings]:
    """A defaulter's result on the object ``text``: the object as it left it (``None`` when it
    changed nothing) and its warnings. Raises :class:`Denied`."""
    obj = _decoded(text)
    before = copy.deepcopy(obj)
    warnings = list(plugin.default(obj, admission) or [])
    return (None if obj == before else obj), warnings


def convert_json(plugin: Converter, settings: Any, api_version: str, objects: list[str]) -> list[str]:
    """Each of ``objects`` (JSON) converted to ``api_version``, in order; ``ValueError`` fails
    the whole review."""
    out = []
    for text in objects:
        obj = _json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("an object to convert is not a JSON object")
        out.append(_json.dumps(plugin.convert(obj, api_version, settings)))
    return out


#: One step of a conversion: an object at one version to another.
Step = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class HubAndSpoke:
    """Conversion through a hub version, as kubebuilder lays it out: each spoke version converts
    to and from the hub, so N versions need 2(N - 1) conversions, not N(N - 1)::

        conversion = HubAndSpoke("example.com", "v1").spoke("v2", to_hub=v2_to_v1, from_hub=v1_to_v2)
        conversion.convert({"apiVersion": "example.com/v1", "kind": "Box", "size": 3}, "example.com/v2")
    """

    group: str
    hub: str
    to_hub: dict[str, Step] = field(default_factory=dict)
    from_hub: dict[str, Step] = field(default_factory=dict)

    def spoke(self, version: str, *, to_hub: Step, from_hub: Step) -> HubAndSpoke:
        """Adds the spoke ``version`` with its conversions to and from the hub."""
        self.to_hub[version] = to_hub
        self.from_hub[version] = from_hub
        return self

    def version_of(self, api_version: str) -> str:
        """The version of ``api_version``; ``ValueError`` when it is not of this group."""
        group, _, version = api_version.rpartition("/")
        if group != self.group:
            raise ValueError(f"{api_version} is not a version of {self.group}")
        return version

    def convert(self, obj: dict[str, Any], api_version: str) -> dict[str, Any]:
        """``obj`` as ``api_version``: to the hub from its own version, then from the hub; its
        ``apiVersion`` set, and what the versions share (metadata, kind) kept."""
        source = self.version_of(str(obj.get("apiVersion", "")))
        target = self.version_of(api_version)
        kind, metadata = obj.get("kind"), obj.get("metadata")
        hub = self.step(self.to_hub, source, obj, "from")
        hub["apiVersion"] = f"{self.group}/{self.hub}"
        out = self.step(self.from_hub, target, hub, "to")
        out["apiVersion"] = api_version
        if kind is not None:
            out["kind"] = kind
        if metadata is not None:
            out["metadata"] = metadata
        return out

    def step(self, steps: dict[str, Step], version: str, obj: dict[str, Any], direction: str) -> dict[str, Any]:
        """One leg of a conversion: the spoke's step, or the object itself at the hub."""
        if version in steps:
            return dict(steps[version](copy.deepcopy(obj)))
        if version == self.hub:
            return copy.deepcopy(obj)
        raise ValueError(f"no conversion {direction} {version}")
