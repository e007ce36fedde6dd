/**
 * {@link Gvk}: a Kubernetes group, version and kind, the one kind type of the SDK, from a
 * manifest to cache reads and actions.
 *
 * @module
 */

import type { KubeObject } from "./objects.js";

/**
 * A Kubernetes group/version/kind; `group` is empty for the core group (Pods, ConfigMaps, ...).
 *
 * `T` is the TypeScript type of the kind's objects. It exists only for the compiler: a cache
 * read of `Gvk<ConfigMap>` answers `ConfigMap`s, as `ctx.get::<ConfigMap>()` does in Rust.
 */
export class Gvk<T extends KubeObject = KubeObject> {
  /** Never set: carries `T` for the compiler. */
  declare readonly objectType?: T;

  constructor(
    readonly group: string,
    readonly version: string,
    readonly kind: string,
  ) {}

  /**
   * The kind of objects whose `apiVersion` is `apiVersion` (`v1`, `apps/v1`):
   * `Gvk.of<ConfigMap>("v1", "ConfigMap")`.
   */
  static of<T extends KubeObject = KubeObject>(apiVersion: string, kind: string): Gvk<T> {
    const slash = apiVersion.indexOf("/");
    return slash < 0
      ? new Gvk<T>("", apiVersion, kind)
      : new Gvk<T>(apiVersion.slice(0, slash), apiVersion.slice(slash + 1), kind);
  }

  /** The `apiVersion` objects of this kind carry. */
  apiVersion(): string {
    return this.group === "" ? this.version : `${this.group}/${this.version}`;
  }

  /** Whether `other` names the same kind. */
  equals(other: Gvk<KubeObject>): boolean {
    return this.group === other.group && this.version === other.version && this.kind === other.kind;
  }

  /** `group/version/kind`, or `version/kind` for the core group, as the host prints kinds. */
  toString(): string {
    return this.group === "" ? `${this.version}/${this.kind}` : `${this.group}/${this.version}/${this.kind}`;
  }
}
