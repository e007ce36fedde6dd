/**
 * The contract's types on the wire, as componentize-js lifts and lowers them for the world
 * `wasmctrl:plugin/plugin-with-webhooks@0.3.1`: records as objects with camelCase fields,
 * variants as `{ tag, val }`, enums as their kebab-case names, `option` as a value or
 * `undefined`, `u64`/`s64` as `bigint`, `list<u32>` as a `Uint32Array`. Written from
 * `jco guest-types` output for `wit/plugin.wit`; the glue converts between these and the SDK's
 * own types, so a contract bump touches this file and the glue only.
 *
 * @module
 */

export interface Gvk {
  group: string;
  version: string;
  kind: string;
}

export interface Selector {
  namespaces: string[];
  labels: string;
}

export type Predicate = "generation-changed" | "labels-changed" | "annotations-changed" | "finalizers-changed";

export type Mapping =
  | { tag: "owner" }
  | { tag: "same-name" }
  | { tag: "label"; val: string }
  | { tag: "annotation"; val: string }
  | { tag: "namespace" };

export interface Related {
  kind: Gvk;
  selector: Selector;
  trigger?: Mapping | undefined;
}

export interface Manifest {
  name: string;
  version: string;
  watches: { kind: Gvk; selector: Selector; predicates: Predicate[] };
  owns: Gvk[];
  reads: Related[];
  writes: Gvk[];
  capabilities: string[];
}

export interface Timestamp {
  seconds: bigint;
  nanoseconds: number;
}

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

export interface ActionFailure {
  target: ObjectRef;
  code: number;
  reason: string;
  message: string;
}

export type ActionStatus =
  | { tag: "applied" }
  | { tag: "unchanged" }
  | { tag: "failed"; val: ActionFailure }
  | { tag: "skipped" };

export interface ActionResult {
  index: number;
  status: ActionStatus;
}

export interface Request {
  namespace: string;
  name: string;
  object?: string | undefined;
  deleting: boolean;
  settings: string;
  now: Timestamp;
  previous: ActionResult[];
}

export type Action =
  | { tag: "apply"; val: string }
  | { tag: "patch"; val: { target: ObjectRef; body: { tag: "merge" | "json"; val: string } } }
  | { tag: "delete"; val: { target: ObjectRef; propagation: "background" | "foreground" | "orphan" } }
  | { tag: "update-status"; val: string }
  | { tag: "add-finalizer"; val: string }
  | { tag: "remove-finalizer"; val: string }
  | { tag: "emit-event"; val: { type: "normal" | "warning"; reason: string; note: string; action: string } }
  | { tag: "children"; val: { kind: Gvk; objects: string[] } };

export interface Outcome {
  actions: Action[];
  bestEffort: Uint32Array;
  requeueAfterMs?: bigint | undefined;
}

export interface Error {
  message: string;
  retryable: boolean;
}

export type Level = "trace" | "debug" | "info" | "warn" | "error";

export type SqlValue =
  | { tag: "null" }
  | { tag: "boolean"; val: boolean }
  | { tag: "integer"; val: bigint }
  | { tag: "float"; val: number }
  | { tag: "text"; val: string };

export interface Statement {
  query: string;
  identifiers: string[];
  params: SqlValue[];
}

export interface Rows {
  columns: string[];
  rows: SqlValue[][];
  affected: bigint;
}

export interface SqlError {
  message: string;
  sqlstate?: string | undefined;
  transient: boolean;
}

export type Operation = "create" | "update" | "delete" | "connect";

export interface AdmissionRequest {
  uid: string;
  kind: Gvk;
  plural: string;
  subresource: string;
  name: string;
  namespace: string;
  operation: Operation;
  userInfo: { username: string; uid: string; groups: string[] };
  object?: string | undefined;
  oldObject?: string | undefined;
  dryRun: boolean;
  settings: string;
  now: Timestamp;
}

export interface AdmissionResponse {
  allowed: boolean;
  message: string;
  code: number;
  warnings: string[];
  patched?: string | undefined;
}

export interface Declaration {
  validates: Operation[];
  defaults: boolean;
  converts: string[];
}

/** The `reconciler` export. Its `result`s' errors are thrown ({@link Failure}). */
export interface ReconcilerExport {
  manifest(settings: string): Manifest;
  reconcile(request: Request): Outcome;
}

/** The `webhooks` export. */
export interface WebhooksExport {
  declare(settings: string): Declaration;
  validate(request: AdmissionRequest): AdmissionResponse;
  mutate(request: AdmissionRequest): AdmissionResponse;
  convert(settings: string, desiredApiVersion: string, objects: string[]): string[];
}

/**
 * What an export throws for a `result`'s error: componentize-js answers `err(payload)` for a
 * thrown value with its own `payload` property (and traps on an `Error` without one).
 */
export class Failure<P> extends globalThis.Error {
  constructor(readonly payload: P) {
    super(typeof payload === "string" ? payload : JSON.stringify(payload));
    this.name = "Failure";
  }
}
