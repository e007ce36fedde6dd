/**
 * Kubernetes objects as the host hands them over: plain JSON, typed by a small hand-written set
 * of interfaces (object metadata, owner references, ConfigMaps, Secrets, custom resources), and
 * the metadata helpers every controller repeats (kube's `ResourceExt`).
 *
 * The interfaces describe the JSON on the wire: times are RFC 3339 strings, as the API server
 * writes them. (`@kubernetes/client-node`'s models describe its deserialized objects instead,
 * times as `Date`s, which the JSON a plugin receives never holds.)
 *
 * @module
 */

import { Gvk } from "./gvk.js";

/** `metav1.ObjectMeta`. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  /** Set once the object is being deleted; finalizers hold it until they are removed. */
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
}

/** `metav1.OwnerReference`. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Any Kubernetes object. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** A custom resource with a spec and a status. */
export interface CustomResource<Spec, Status = unknown> extends KubeObject {
  spec: Spec;
  status?: Status | null;
}

/** A core/v1 ConfigMap. */
export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
  immutable?: boolean;
}

/** A core/v1 Secret (values base64 in `data`). */
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  immutable?: boolean;
}

/** The kinds this SDK types. Others: `Gvk.of("apps/v1", "Deployment")`. */
export const kinds = {
  ConfigMap: Gvk.of<ConfigMap>("v1", "ConfigMap"),
  Secret: Gvk.of<Secret>("v1", "Secret"),
} as const;

/** The object's name, or its `generateName` when it has none yet (kube's `name_any`). */
export function nameAny(object: KubeObject): string {
  return object.metadata?.name ?? object.metadata?.generateName ?? "";
}

/** The object's namespace; empty for cluster-scoped objects. */
export function namespaceOf(object: KubeObject): string {
  return object.metadata?.namespace ?? "";
}

/** `namespace/name`, or `name` for cluster-scoped objects: the host's key format. */
export function keyOf(namespace: string, name: string): string {
  return namespace === "" ? name : `${namespace}/${name}`;
}

/** Whether the object is being deleted (its `deletionTimestamp` is set). */
export function isDeleting(object: KubeObject): boolean {
  const at = object.metadata?.deletionTimestamp;
  return at !== undefined && at !== null;
}

/** Whether the object holds finalizer `name`. */
export function hasFinalizer(object: KubeObject, name: string): boolean {
  return (object.metadata?.finalizers ?? []).includes(name);
}

/**
 * The metadata of an owned child of `owner` named `name`: it lives in its owner's namespace
 * (the host adds the controller owner reference when it applies it). Add labels and
 * annotations as needed.
 */
export function childMeta(owner: KubeObject, name: string): ObjectMeta {
  const namespace = namespaceOf(owner);
  return namespace === "" ? { name } : { name, namespace };
}
