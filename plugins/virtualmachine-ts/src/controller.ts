/**
 * The controller101 VirtualMachine controller as a wasmctrl plugin, in TypeScript: the Rust
 * `virtualmachine` plugin's behaviour, line for line, under the name `virtualmachine-ts`.
 *
 * For each `VirtualMachine` (`cloudnative.tw/v1alpha1`) it validates `spec.resource`, decides the
 * phase (`Active`, `Stopped`, or `Failed` with a reason) and reports it with the server's
 * resources and `lastUpdateTime` in `.status`. It writes status only when what it reports
 * changes, so its own status writes never start a reconcile loop. An object that no longer
 * exists is logged and left.
 *
 * It also serves the kind's webhooks, as a kubebuilder project would: a validator that refuses a
 * spec the controller would fail (CPU at least 1, memory and disk as quantities, a known action)
 * before it is stored, and a defaulter that fills in the action the tutorial leaves out (`start`).
 *
 * @module
 */

import {
  Action,
  Denied,
  Manifest,
  Operation,
  Outcome,
  Predicate,
  log,
  nameAny,
  type Context,
  type CustomResource,
  type Defaulter,
  type Reconcile,
  type Reconciler,
  type Settings,
  type Validator,
  type Warnings,
} from "wasmctrl";

/** The plugin's version: package.json's (a test keeps them equal). */
export const VERSION = "0.1.0";

/** `spec.resource` / `status.server`: CPU count and memory / root disk quantities. */
export interface Resource {
  /** Virtual CPUs. */
  cpu: number;
  /** Memory, a Kubernetes quantity such as `4Gi`. */
  memory: string;
  /** Root disk size, a Kubernetes quantity such as `40Gi`. */
  rootDisk: string;
}

/** The requested resources and power action. */
export interface Spec {
  resource: Resource;
  /** start (the default) or stop. */
  action?: string | null;
}

/** The machine's phase and the resources its server runs with. */
export interface Status {
  /** `Active`, `Stopped` or `Failed`. */
  phase: string;
  /** Why the phase is `Failed`. */
  reason?: string | undefined;
  /** The resources the server runs with. */
  server?: Resource | undefined;
  /** The generation this status describes. */
  observedGeneration: number;
  /** When the status last changed (RFC 3339). */
  lastUpdateTime?: string | undefined;
}

/** A virtual machine (the controller101 example). */
export type VirtualMachine = CustomResource<Spec, Status>;

/** The plugin. */
export class VirtualMachineController
  implements Reconciler<VirtualMachine>, Validator<VirtualMachine, Settings>, Defaulter<VirtualMachine, Settings>
{
  manifest(): Manifest {
    return (
      Manifest.forKind("cloudnative.tw/v1alpha1", "VirtualMachine", "virtualmachine-ts")
        .version(VERSION)
        // Status writes do not bump the generation, so they do not trigger us again.
        .predicate(Predicate.GenerationChanged)
        .validating([Operation.Create, Operation.Update])
        .defaulting()
    );
  }

  /** A new VM, reconciled when the component is built so its code is compiled in the snapshot. */
  warmUp(): VirtualMachine[] {
    return [
      {
        apiVersion: "cloudnative.tw/v1alpha1",
        kind: "VirtualMachine",
        metadata: { name: "warm-up", namespace: "default", generation: 1 },
        spec: { resource: { cpu: 2, memory: "4Gi", rootDisk: "40Gi" } },
      },
    ];
  }

  reconcile(event: Reconcile<VirtualMachine>, ctx: Context<Settings>): Outcome {
    const key = ctx.key;
    if (event.type === "cleanup") {
      log.info("virtualmachine is being deleted", { key });
      return Outcome.done();
    }
    if (event.type === "gone") {
      log.info("virtualmachine no longer exists", { key });
      return Outcome.done();
    }
    const vm = event.object;
    log.info("reconciling virtualmachine", { key, generation: vm.metadata?.generation, spec: debugSpec(vm.spec) });

    const desired = desiredStatus(vm);
    const current = currentStatus(vm);
    if (reports(current, desired)) return Outcome.done();

    const status = withTime(desired, ctx.nowRfc3339());
    const outcome = Outcome.with([Action.updateStatus(status)]);
    if (current.phase !== status.phase) {
      const note =
        status.reason === undefined
          ? `${nameAny(vm)} is ${status.phase}`
          : `${nameAny(vm)} is ${status.phase}: ${status.reason}`;
      outcome.push(status.phase === "Failed" ? Action.warning("Failed", note) : Action.event(status.phase, note));
    }
    return outcome;
  }

  /** Decodes as the Rust type does: an object that does not fit is a terminal error (or a 400). */
  decodeObject(json: unknown): VirtualMachine {
    return decodeVirtualMachine(json);
  }

  /** Refuses what the controller would fail, before it is stored. */
  validateCreate(vm: VirtualMachine): Warnings {
    const reason = invalid(vm.spec);
    if (reason !== undefined) throw new Denied(reason);
    return [];
  }

  validateUpdate(old: VirtualMachine, vm: VirtualMachine): Warnings {
    const warnings = this.validateCreate(vm);
    if (vm.spec.resource.cpu < old.spec.resource.cpu) {
      warnings.push(
        `${nameAny(vm)}: fewer CPUs (${old.spec.resource.cpu} -> ${vm.spec.resource.cpu}) take effect at the next restart`,
      );
    }
    return warnings;
  }

  /** Fills in what the tutorial's manifests leave out. */
  default(vm: VirtualMachine): Warnings {
    vm.spec.action ??= "start";
    return [];
  }
}

/** Whether `current` already reports what `desired` says (the timestamp aside): nothing to write. */
export function reports(current: Status, desired: Status): boolean {
  return (
    current.phase === desired.phase &&
    current.reason === desired.reason &&
    sameResource(current.server, desired.server) &&
    current.observedGeneration === desired.observedGeneration
  );
}

function sameResource(a: Resource | undefined, b: Resource | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.cpu === b.cpu && a.memory === b.memory && a.rootDisk === b.rootDisk;
}

/**
 * What is wrong with a spec, if anything: the reason a VirtualMachine fails, and what its
 * validating webhook refuses.
 */
export function invalid(spec: Spec): string | undefined {
  const { resource } = spec;
  if (resource.cpu <= 0) return `spec.resource.cpu must be positive, got ${resource.cpu}`;
  for (const [field, value] of [["memory", resource.memory], ["rootDisk", resource.rootDisk]] as const) {
    if (!isQuantity(value)) return `spec.resource.${field} is not a quantity: ${debugString(value)}`;
  }
  const action = spec.action ?? "start";
  if (action === "start" || action === "stop") return undefined;
  return `spec.action must be start or stop, got ${debugString(action)}`;
}

/** The status the spec calls for, without a timestamp. */
export function desiredStatus(vm: VirtualMachine): Status {
  const observedGeneration = vm.metadata?.generation ?? 0;
  const reason = invalid(vm.spec);
  if (reason !== undefined) return { phase: "Failed", reason, observedGeneration };
  const { cpu, memory, rootDisk } = vm.spec.resource;
  const phase = vm.spec.action === "stop" ? "Stopped" : "Active";
  return { phase, server: { cpu, memory, rootDisk }, observedGeneration };
}

/** The status the object reports now (none: an empty phase, generation 0). */
function currentStatus(vm: VirtualMachine): Status {
  const status = vm.status ?? undefined;
  if (status === undefined) return { phase: "", observedGeneration: 0 };
  const server = status.server ?? undefined;
  return {
    phase: status.phase,
    reason: status.reason ?? undefined,
    server: server === undefined ? undefined : { cpu: server.cpu, memory: server.memory, rootDisk: server.rootDisk },
    observedGeneration: status.observedGeneration ?? 0,
  };
}

/** `status` stamped with `time`, its fields in the order the Rust plugin writes them. */
function withTime(status: Status, time: string): Status {
  return {
    phase: status.phase,
    ...(status.reason === undefined ? {} : { reason: status.reason }),
    ...(status.server === undefined ? {} : { server: status.server }),
    observedGeneration: status.observedGeneration,
    ...(time === "" ? {} : { lastUpdateTime: time }),
  };
}

const SUFFIXES = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m"];

/** A Kubernetes quantity: a decimal number with an optional binary or decimal suffix. */
export function isQuantity(value: string): boolean {
  const suffix = SUFFIXES.find((s) => value.endsWith(s));
  const number = suffix === undefined ? value : value.slice(0, -suffix.length);
  return number !== "" && /^[0-9.]*$/.test(number) && number.split(".").length <= 2 && number !== ".";
}

/** A string as Rust's `{:?}` prints it, so messages and logs read as the Rust plugin's. */
function debugString(s: string): string {
  return JSON.stringify(s).replace(/\\u00([0-9a-f]{2})/g, (_, hex: string) => `\\u{${parseInt(hex, 16).toString(16)}}`);
}

/** The spec as Rust's `{:?}` prints the Rust plugin's `Spec`, for the same log line. */
export function debugSpec(spec: Spec): string {
  const { cpu, memory, rootDisk } = spec.resource;
  const action = spec.action == null ? "None" : `Some(${debugString(spec.action)})`;
  const resource = `Resource { cpu: ${cpu}, memory: ${debugString(memory)}, root_disk: ${debugString(rootDisk)} }`;
  return `Spec { resource: ${resource}, action: ${action} }`;
}

type Json = Record<string, unknown>;

/** Checks `value` is a JSON object, naming `field` when it is not. */
function objectAt(value: unknown, field: string): Json {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error(`${field}: expected an object`);
  return value as Json;
}

function required<T>(object: Json, key: string, field: string, check: (v: unknown, field: string) => T): T {
  if (!(key in object) || object[key] === undefined) throw new Error(`missing field \`${field}\``);
  return check(object[key], field);
}

function optional<T>(object: Json, key: string, field: string, check: (v: unknown, field: string) => T): T | undefined {
  const value = object[key];
  return value === undefined || value === null ? undefined : check(value, field);
}

function integer(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isInteger(value)) throw new Error(`${field}: expected an integer`);
  return value;
}

function text(value: unknown, field: string): string {
  if (typeof value !== "string") throw new Error(`${field}: expected a string`);
  return value;
}

function resourceAt(value: unknown, field: string): Resource {
  const r = objectAt(value, field);
  return {
    cpu: required(r, "cpu", `${field}.cpu`, integer),
    memory: required(r, "memory", `${field}.memory`, text),
    rootDisk: required(r, "rootDisk", `${field}.rootDisk`, text),
  };
}

/** The object as a VirtualMachine, its fields checked as the Rust type's deserializer checks them. */
export function decodeVirtualMachine(json: unknown): VirtualMachine {
  const vm = objectAt(json, "object");
  const metadata = objectAt(vm["metadata"] ?? {}, "metadata");
  optional(metadata, "generation", "metadata.generation", integer);
  const spec = required(vm, "spec", "spec", objectAt);
  required(spec, "resource", "spec.resource", resourceAt);
  optional(spec, "action", "spec.action", text);
  const status = optional(vm, "status", "status", objectAt);
  if (status !== undefined) {
    required(status, "phase", "status.phase", text);
    optional(status, "reason", "status.reason", text);
    optional(status, "server", "status.server", resourceAt);
    optional(status, "observedGeneration", "status.observedGeneration", integer);
    optional(status, "lastUpdateTime", "status.lastUpdateTime", text);
  }
  return json as VirtualMachine;
}
