/**
 * The plugin's own description of itself: {@link Manifest} and the selectors, predicates,
 * mappings and webhook operations it is built from.
 *
 * @module
 */

import { Gvk } from "./gvk.js";
import type { KubeObject } from "./objects.js";

/** Which objects of a kind. */
export interface Selector {
  /** Namespaces to consider; empty means every namespace (or the kind is cluster-scoped). */
  namespaces: string[];
  /** A label selector in its string form (`app=nginx,tier in (web,api)`); empty selects all. */
  labels: string;
}

/**
 * A filter the host applies to watch events before it queues a key. With none, every change
 * queues it; with several, any one passing is enough.
 */
export const Predicate = {
  /** Creates, deletes, and updates that change `metadata.generation` (spec changes). */
  GenerationChanged: "generation-changed",
  /** Creates, deletes, and updates that change `metadata.labels`. */
  LabelsChanged: "labels-changed",
  /** Creates, deletes, and updates that change `metadata.annotations`. */
  AnnotationsChanged: "annotations-changed",
  /** Creates, deletes, and updates that start deletion or change `metadata.finalizers`. */
  FinalizersChanged: "finalizers-changed",
} as const;
/** One of {@link Predicate}'s values. */
export type Predicate = (typeof Predicate)[keyof typeof Predicate];

/** How an event on a related kind maps to keys of the watched kind. */
export type Mapping =
  | { type: "owner" }
  | { type: "same-name" }
  | { type: "label"; name: string }
  | { type: "annotation"; name: string }
  | { type: "namespace" };

/** The ways an event on a related kind names keys of the watched kind. */
export const Mapping = {
  /** Through the object's controller owner reference to the watched kind. */
  owner: (): Mapping => ({ type: "owner" }),
  /** The watched object with the same namespace and name. */
  sameName: (): Mapping => ({ type: "same-name" }),
  /** The watched object in the same namespace named by the value of this label. */
  label: (name: string): Mapping => ({ type: "label", name }),
  /** The watched object in the same namespace named by the value of this annotation. */
  annotation: (name: string): Mapping => ({ type: "annotation", name }),
  /** Every cached watched object in the same namespace (use sparingly). */
  namespace: (): Mapping => ({ type: "namespace" }),
} as const;

/** Another kind the plugin reads from the cache and may be triggered by. */
export interface Related {
  kind: Gvk;
  selector: Selector;
  /** Events on it queue the keys this mapping names; undefined means read-only. */
  trigger?: Mapping | undefined;
}

/** An admission operation. */
export const Operation = {
  Create: "create",
  Update: "update",
  Delete: "delete",
  /** Exec, attach, port-forward: never sent for the kinds plugins reconcile. */
  Connect: "connect",
} as const;
/** One of {@link Operation}'s values. */
export type Operation = (typeof Operation)[keyof typeof Operation];

/** What a plugin serves as webhooks for the kind it reconciles. */
export interface Webhooks {
  /** The operations its validator judges; none: no validating webhook. */
  validates: Operation[];
  /** Whether its defaulter defaults created and updated objects. */
  defaults: boolean;
  /** The versions of its kind its converter converts between; none: no conversion. */
  converts: string[];
}

/** What a manifest declares, as plain data (what the SDK sends the host, and tests read). */
export interface Declared {
  /** Stable plugin name: the field manager is `wasmctrl/<name>`; metrics and logs carry it. */
  name: string;
  /** The plugin's own version string. */
  version: string;
  /** The kind reconciled, which of its objects, and the event filters. */
  watches: { kind: Gvk; selector: Selector; predicates: Predicate[] };
  /** Kinds of the children it creates and owns. */
  owns: Gvk[];
  /** Other kinds it reads from the cache (and maybe is triggered by). */
  reads: Related[];
  /** Kinds it patches, applies or deletes without owning them. */
  writes: Gvk[];
  /** Capabilities the operator must grant, such as `sql:students`. */
  capabilities: string[];
  /** The finalizer the SDK keeps on reconciled objects ({@link Manifest.finalizer}). */
  finalizer: string | undefined;
  /** The webhooks it serves for the kind it reconciles. */
  webhooks: Webhooks;
}

/**
 * What a plugin declares about itself; the host derives informers, queues and permissions from
 * it. Build one with {@link Manifest.forKind} (or {@link Manifest.create}) and the builder
 * methods, each of which changes this manifest and returns it; read it back in `declared`.
 */
export class Manifest {
  /** What it declares. */
  readonly declared: Declared;

  private constructor(name: string, kind: Gvk) {
    this.declared = {
      name,
      version: "0.0.0",
      watches: { kind, selector: { namespaces: [], labels: "" }, predicates: [] },
      owns: [],
      reads: [],
      writes: [],
      capabilities: [],
      finalizer: undefined,
      webhooks: { validates: [], defaults: false, converts: [] },
    };
  }

  /** A plugin named `name` reconciling every object of `kind`, reacting to every change. */
  static create(name: string, kind: Gvk): Manifest {
    return new Manifest(name, kind);
  }

  /**
   * A plugin named `name` reconciling every object of the kind `apiVersion`/`kind`:
   * `Manifest.forKind("cloudnative.tw/v1alpha1", "VirtualMachine", "virtualmachine")`.
   */
  static forKind(apiVersion: string, kind: string, name: string): Manifest {
    return new Manifest(name, Gvk.of(apiVersion, kind));
  }

  /** Sets the plugin's version string (usually its package.json `version`). */
  version(version: string): this {
    this.declared.version = version;
    return this;
  }

  /** Restricts the watched objects to these namespaces. */
  namespaces(namespaces: readonly string[]): this {
    this.declared.watches.selector.namespaces = [...namespaces];
    return this;
  }

  /** Restricts the watched objects to those matching a label selector (`app=nginx`). */
  labels(selector: string): this {
    this.declared.watches.selector.labels = selector;
    return this;
  }

  /** Adds an event filter; with several, any one passing queues the key. */
  predicate(predicate: Predicate): this {
    this.declared.watches.predicates.push(predicate);
    return this;
  }

  /** Declares a kind of child object this plugin creates and owns. */
  owns<T extends KubeObject>(kind: Gvk<T>): this {
    this.declared.owns.push(kind);
    return this;
  }

  /**
   * Declares a kind this plugin reads from the cache, in `selector`'s namespaces (none: the
   * plugin's own) where its labels match, optionally triggering on its events.
   */
  reads<T extends KubeObject>(kind: Gvk<T>, selector: Partial<Selector> = {}, trigger?: Mapping): this {
    this.declared.reads.push({
      kind,
      selector: { namespaces: [...(selector.namespaces ?? [])], labels: selector.labels ?? "" },
      trigger,
    });
    return this;
  }

  /** Declares a kind this plugin patches, applies or deletes without owning it. */
  writes<T extends KubeObject>(kind: Gvk<T>): this {
    this.declared.writes.push(kind);
    return this;
  }

  /** Declares a capability the operator must grant, such as `sql:students`. */
  capability(name: string): this {
    this.declared.capabilities.push(name);
    return this;
  }

  /**
   * Guards reconciled objects with the finalizer `name` (`example.com/cleanup`), as
   * kube-runtime's `finalizer()` does: the SDK adds it to a live object before its first
   * `apply` (one extra reconcile, brought back by the finalizer's own change), asks for a
   * `cleanup` once the object is being deleted, and removes the finalizer after a cleanup that
   * succeeded, so the object goes only after it.
   */
  finalizer(name: string): this {
    this.declared.finalizer = name;
    return this;
  }

  /** Serves a validating webhook for the reconciled kind on `operations`. */
  validating(operations: readonly Operation[]): this {
    this.declared.webhooks.validates = [...operations];
    return this;
  }

  /** Serves a defaulting (mutating) webhook for the reconciled kind on creates and updates. */
  defaulting(): this {
    this.declared.webhooks.defaults = true;
    return this;
  }

  /** Serves the conversion webhook of the reconciled kind, a CRD with these `versions`. */
  converting(versions: readonly string[]): this {
    this.declared.webhooks.converts = [...versions];
    return this;
  }
}
