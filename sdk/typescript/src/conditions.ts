/**
 * Status conditions as Kubernetes defines them (`metav1.Condition`) and apimachinery's
 * `meta.SetStatusCondition`: what every controller that reports conditions writes by hand
 * otherwise.
 *
 * ```ts
 * const ready = Condition.of("Ready", true, "PodRunning", "running on node-1", vm.metadata?.generation);
 * setCondition(status.conditions, ready, ctx.now); // lastTransitionTime: now, or kept if the status did not change
 * ```
 *
 * @module
 */

import { rfc3339 } from "./request.js";

/**
 * A `metav1.Condition`: one aspect of an object's state, as `kubectl wait --for=condition=` and
 * other controllers read it. Its CRD schema requires every field but `observedGeneration`; the
 * API server refuses a condition without a reason.
 */
export interface Condition {
  /** The condition's type, CamelCase (`Ready`, `Available`). */
  type: string;
  /** `True`, `False` or `Unknown`. */
  status: "True" | "False" | "Unknown";
  /** A CamelCase reason for the status, for machines. */
  reason: string;
  /** Details for people. */
  message: string;
  /** When `status` last changed (RFC 3339); {@link setCondition} sets it. */
  lastTransitionTime?: string;
  /** The object's `metadata.generation` the condition was computed from. */
  observedGeneration?: number;
}

/** Builds {@link Condition}s. */
export const Condition = {
  /** A condition of `type` that holds (`True`) or not (`False`), computed from `generation`. */
  of(type: string, holds: boolean, reason: string, message: string, generation?: number): Condition {
    return normalized({ type, status: holds ? "True" : "False", reason, message, observedGeneration: generation });
  },
  /** A condition of `type` whose status cannot be told yet (`Unknown`). */
  unknown(type: string, reason: string, message: string, generation?: number): Condition {
    return normalized({ type, status: "Unknown", reason, message, observedGeneration: generation });
  },
} as const;

/** The condition of `type`, if there is one. */
export function findCondition(conditions: readonly Condition[], type: string): Condition | undefined {
  return conditions.find((c) => c.type === type);
}

/** Whether the condition of `type` is there and `True`. */
export function isConditionTrue(conditions: readonly Condition[], type: string): boolean {
  return findCondition(conditions, type)?.status === "True";
}

/**
 * Sets `condition` in `conditions` (changing the array), replacing the one of its type, as
 * apimachinery's `SetStatusCondition`: `lastTransitionTime` becomes `now` (to the second) when
 * the condition is new or its status changed, and stays otherwise (unless `condition` brings
 * its own). Conditions of other types are kept as they are. Returns whether anything changed.
 */
export function setCondition(conditions: Condition[], condition: Condition, now: Date): boolean {
  const stamp = rfc3339(now);
  const index = conditions.findIndex((c) => c.type === condition.type);
  const existing = conditions[index];
  if (existing === undefined) {
    conditions.push(normalized({ ...condition, lastTransitionTime: condition.lastTransitionTime ?? stamp }));
    return true;
  }
  const kept = existing.status === condition.status ? existing.lastTransitionTime : undefined;
  const next = normalized({ ...condition, lastTransitionTime: condition.lastTransitionTime ?? kept ?? stamp });
  const changed = !sameCondition(existing, next);
  conditions[index] = next;
  return changed;
}

/** The fields in `metav1.Condition`'s order, a zero generation left out as Kubernetes does. */
function normalized(c: Condition): Condition {
  const out: Condition = { type: c.type, status: c.status, reason: c.reason ?? "", message: c.message ?? "" };
  if (c.lastTransitionTime !== undefined) out.lastTransitionTime = c.lastTransitionTime;
  if (c.observedGeneration !== undefined && c.observedGeneration !== 0) out.observedGeneration = c.observedGeneration;
  return out;
}

/** Equal field by field, times compared as instants (`...:00Z` and `...:00.000Z` are one time). */
function sameCondition(a: Condition, b: Condition): boolean {
  const time = (t: string | undefined): number | string | undefined => {
    if (t === undefined) return undefined;
    const at = Date.parse(t);
    return Number.isNaN(at) ? t : at;
  };
  return (
    a.type === b.type &&
    a.status === b.status &&
    (a.reason ?? "") === b.reason &&
    (a.message ?? "") === b.message &&
    time(a.lastTransitionTime) === time(b.lastTransitionTime) &&
    (a.observedGeneration ?? 0) === (b.observedGeneration ?? 0)
  );
}
