/**
 * Write wasmctrl reconciler plugins in TypeScript.
 *
 * A plugin is one object implementing {@link Reconciler} (and, if it serves them, the webhook
 * methods of {@link Validator}, {@link Defaulter} and {@link Converter}), exported from the
 * component's entry module with `exportPlugin` from `wasmctrl/export`:
 *
 * ```ts
 * import { Manifest, Outcome, log, type Context, type ConfigMap, type Reconcile, type Reconciler, type Settings } from "wasmctrl";
 *
 * export class Hello implements Reconciler<ConfigMap> {
 *   manifest() {
 *     return Manifest.forKind("v1", "ConfigMap", "hello");
 *   }
 *   reconcile(event: Reconcile<ConfigMap>, ctx: Context<Settings>) {
 *     if (event.type === "apply") log.info("reconciling", { key: ctx.key, keys: Object.keys(event.object.data ?? {}).length });
 *     return Outcome.done();
 *   }
 * }
 * ```
 *
 * The host calls `manifest` once per plugin version and `reconcile` once per key, each time in
 * a fresh sandbox: nothing survives from one call to the next. Test natively with
 * `wasmctrl/testing`'s `Harness`, which makes the host's own scope checks.
 *
 * The SDK implements the plugin contract `wasmctrl:plugin@0.3.1`; its copy of the contract's WIT
 * is `wit/plugin.wit` in this package.
 *
 * @module
 */

export { Action, ObjectRef, Outcome, type Event, type Propagation } from "./action.js";
export { Condition, findCondition, isConditionTrue, setCondition } from "./conditions.js";
export { Cache, Context, Database, type Host } from "./context.js";
export { ReconcileError } from "./error.js";
export { Gvk } from "./gvk.js";
export { log, type Fields, type Level } from "./logging.js";
export {
  Manifest,
  Mapping,
  Operation,
  Predicate,
  type Declared,
  type Related,
  type Selector,
  type Webhooks,
} from "./manifest.js";
export {
  childMeta,
  hasFinalizer,
  isDeleting,
  keyOf,
  kinds,
  nameAny,
  namespaceOf,
  type ConfigMap,
  type CustomResource,
  type KubeObject,
  type ObjectMeta,
  type OwnerReference,
  type Secret,
} from "./objects.js";
export { finalizer, type Reconcile, type Reconciler, type Settings } from "./reconciler.js";
export { Request, rfc3339, type ActionFailure, type ActionResult, type ActionStatus } from "./request.js";
export { Float, Rows, SqlError, Statement, float, type Column, type SqlValue } from "./sql.js";
export {
  Admission,
  Denied,
  HubAndSpoke,
  type Converter,
  type Defaulter,
  type JsonObject,
  type Plugin,
  type Spoke,
  type UserInfo,
  type Validator,
  type Verdict,
  type Warnings,
} from "./webhooks.js";
