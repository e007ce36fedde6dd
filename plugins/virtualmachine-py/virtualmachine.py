"""The controller101 VirtualMachine controller as a wasmctrl plugin, in Python: the Rust seed
(``plugins/virtualmachine``) ported with the same behaviour, under its own name
(``virtualmachine-py``) so that both can run side by side.

For each ``VirtualMachine`` (``cloudnative.tw/v1alpha1``) it validates ``spec.resource``,
decides the phase (``Active``, ``Stopped``, or ``Failed`` with a reason) and reports it with the
server's resources and ``lastUpdateTime`` in ``.status``. It writes status only when what it
reports changes, so its own status writes never start a reconcile loop. An object that no
longer exists is logged and left.

It also serves the kind's webhooks, as a kubebuilder project would: a validator that refuses a
spec the controller would fail (CPU at least 1, memory and disk as quantities, a known action)
before it is stored, and a defaulter that fills in the action the tutorial leaves out
(``start``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from wasmctrl import (
    Action,
    Cleanup,
    Context,
    Defaulter,
    Denied,
    Error,
    Gone,
    Manifest,
    NoSettings,
    Operation,
    Outcome,
    Predicate,
    Reconcile,
    Reconciler,
    Validator,
    codec,
    log,
    meta,
)
from wasmctrl.webhooks import Admission

#: The plugin's version: the pyproject's, which a test keeps them in step with.
VERSION = "0.1.0"
API_VERSION = "cloudnative.tw/v1alpha1"
KIND = "VirtualMachine"

#: Kubernetes quantity suffixes, binary before decimal so ``Mi`` is not read as ``M``.
SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m")


def debug_str(text: str) -> str:
    """``text`` as Rust's ``{:?}`` writes a string, so messages and log fields read as the
    Rust plugin's do."""
    escapes = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"', "\0": "\\0"}
    out = []
    for c in text:
        if c in escapes:
            out.append(escapes[c])
        elif not c.isprintable():
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class Resource:
    """``spec.resource`` / ``status.server``: CPU count and memory / root disk quantities."""

    cpu: int
    #: A Kubernetes quantity such as ``4Gi``.
    memory: str
    #: A Kubernetes quantity such as ``40Gi``.
    root_disk: str

    def debug(self) -> str:
        """As Rust's ``{:?}`` of the Rust plugin's ``Resource``."""
        return (
            f"Resource {{ cpu: {self.cpu}, memory: {debug_str(self.memory)}, root_disk: {debug_str(self.root_disk)} }}"
        )


@dataclass(frozen=True)
class Spec:
    """The requested resources and power action (``start``, the default, or ``stop``)."""

    resource: Resource
    action: str | None = None

    def debug(self) -> str:
        """As Rust's ``{:?}`` of the Rust plugin's ``Spec``: the log's ``spec`` field."""
        action = "None" if self.action is None else f"Some({debug_str(self.action)})"
        return f"Spec {{ resource: {self.resource.debug()}, action: {action} }}"


@dataclass(frozen=True)
class Status:
    """The machine's phase and the resources its server runs with."""

    #: ``Active``, ``Stopped`` or ``Failed``.
    phase: str
    #: Why the phase is ``Failed``.
    reason: str | None = None
    server: Resource | None = None
    #: The generation this status describes.
    observed_generation: int = 0
    #: When the status last changed (RFC 3339).
    last_update_time: str | None = None

    def reports(self, desired: Status) -> bool:
        """Whether this status already reports what ``desired`` says (the timestamp aside),
        so there is nothing to write."""
        return replace(self, last_update_time=None) == replace(desired, last_update_time=None)


@dataclass(frozen=True)
class VirtualMachine:
    """What the controller reads of a VirtualMachine object."""

    name: str
    generation: int | None
    spec: Spec
    status: Status | None

    @classmethod
    def of(cls, obj: dict[str, Any]) -> VirtualMachine:
        """The object's spec and status, typed; :class:`codec.DecodeError` names the field
        that does not fit."""
        generation = (obj.get("metadata") or {}).get("generation")
        spec = codec.decode(Spec, obj.get("spec"), path="spec")
        status = codec.decode(Status | None, obj.get("status"), path="status")
        return cls(meta.name(obj), generation, spec, status)


def is_quantity(value: str) -> bool:
    """A Kubernetes quantity: a decimal number with an optional binary or decimal suffix."""
    number = next((value[: -len(s)] for s in SUFFIXES if value.endswith(s)), value)
    return (
        number != ""
        and all(c.isascii() and (c.isdigit() or c == ".") for c in number)
        and number.count(".") <= 1
        and number != "."
    )


def invalid(spec: Spec) -> str | None:
    """What is wrong with a spec, if anything: the reason a VirtualMachine fails, and what its
    validating webhook refuses."""
    resource = spec.resource
    if resource.cpu <= 0:
        return f"spec.resource.cpu must be positive, got {resource.cpu}"
    for field, value in (("memory", resource.memory), ("rootDisk", resource.root_disk)):
        if not is_quantity(value):
            return f"spec.resource.{field} is not a quantity: {debug_str(value)}"
    action = spec.action if spec.action is not None else "start"
    if action not in ("start", "stop"):
        return f"spec.action must be start or stop, got {debug_str(action)}"
    return None


def desired_status(vm: VirtualMachine) -> Status:
    """The status the spec calls for, without a timestamp."""
    generation = vm.generation or 0
    reason = invalid(vm.spec)
    if reason is not None:
        return Status(phase="Failed", reason=reason, observed_generation=generation)
    phase = "Stopped" if vm.spec.action == "stop" else "Active"
    return Status(phase=phase, server=vm.spec.resource, observed_generation=generation)


def note(vm: VirtualMachine, status: Status) -> str:
    """The Event note for a phase change."""
    if status.reason is not None:
        return f"{vm.name} is {status.phase}: {status.reason}"
    return f"{vm.name} is {status.phase}"


def decoded_for_admission(obj: dict[str, Any]) -> VirtualMachine:
    """The object of an admission request, or the 400 refusal an object that does not decode
    gets (as the Rust SDK refuses one that does not fit its type)."""
    try:
        return VirtualMachine.of(obj)
    except codec.DecodeError as e:
        raise Denied(f"the object does not decode: {e}", 400) from None


class VirtualMachineController(Reconciler[NoSettings], Validator, Defaulter):
    """The plugin: reconciler, validator and defaulter of VirtualMachines."""

    Settings = NoSettings

    def manifest(self, settings: NoSettings) -> Manifest:
        return (
            Manifest.for_kind(API_VERSION, KIND, "virtualmachine-py")
            .with_version(VERSION)
            # Status writes do not bump the generation, so they do not trigger us again.
            .predicate(Predicate.GENERATION_CHANGED)
            .validating(Operation.CREATE, Operation.UPDATE)
            .defaulting()
        )

    def warm_up(self) -> list[dict[str, Any]]:
        """A new VM, reconciled when the component is built so that what its reconcile warms
        is in the snapshot."""
        return [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {"name": "warm-up", "namespace": "default", "generation": 1},
                "spec": {"resource": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"}},
            }
        ]

    def reconcile(self, event: Reconcile, ctx: Context[NoSettings]) -> Outcome:
        key = ctx.key
        if isinstance(event, Gone):
            log.info("virtualmachine no longer exists", key=key)
            return Outcome.done()
        try:
            vm = VirtualMachine.of(event.object)
        except codec.DecodeError as e:
            raise Error.terminal(f"{key}: object does not parse: {e}") from None
        if isinstance(event, Cleanup):
            log.info("virtualmachine is being deleted", key=key)
            return Outcome.done()
        log.info("reconciling virtualmachine", key=key, generation=vm.generation, spec=vm.spec.debug())
        return self.report(vm, ctx)

    def report(self, vm: VirtualMachine, ctx: Context[NoSettings]) -> Outcome:
        """The status write (and Event on a phase change) that brings ``.status`` in line
        with the spec; nothing when it already is."""
        desired = desired_status(vm)
        current = vm.status or Status(phase="")
        if current.reports(desired):
            return Outcome.done()
        status = replace(desired, last_update_time=ctx.now_rfc3339())
        outcome = Outcome.of(Action.update_status(codec.encode(status)))
        if current.phase != status.phase:
            if status.phase == "Failed":
                outcome.push(Action.warning("Failed", note(vm, status)))
            else:
                outcome.push(Action.event(status.phase, note(vm, status)))
        return outcome

    # Refuses what the controller would fail, before it is stored.

    def validate_create(self, obj: dict[str, Any], admission: Admission[Any]) -> list[str]:
        reason = invalid(decoded_for_admission(obj).spec)
        if reason is not None:
            raise Denied(reason)
        return []

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], admission: Admission[Any]) -> list[str]:
        before, after = decoded_for_admission(old), decoded_for_admission(new)
        warnings = self.validate_create(new, admission)
        fewer = after.spec.resource.cpu < before.spec.resource.cpu
        if fewer:
            cpus = f"{before.spec.resource.cpu} -> {after.spec.resource.cpu}"
            warnings.append(f"{after.name}: fewer CPUs ({cpus}) take effect at the next restart")
        return warnings

    # Fills in what the tutorial's manifests leave out.

    def default(self, obj: dict[str, Any], admission: Admission[Any]) -> list[str]:
        decoded_for_admission(obj)
        if obj["spec"].get("action") is None:
            obj["spec"]["action"] = "start"
        return []
