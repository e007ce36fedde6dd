/**
 * A plugin that misbehaves on request, to prove the sandbox contains a TypeScript plugin as it
 * contains the Rust one (`tests/plugins/hostile`). Its settings choose the misbehaviour and its
 * manifest name: `{"mode": "loop" | "alloc" | "patch-other" | "get-other" | "ok", "name": ...}`
 * (name default `hostile-ts-<mode>`, mode default `ok`; another mode is refused at load).
 *
 * It reconciles core/v1 ConfigMaps: in every namespace, except in `patch-other` and `get-other`,
 * which are declared for namespace `team-a` only and reach into namespace `other`.
 *
 * - `loop` spins forever in reconcile (the host's deadline must end it);
 * - `alloc` allocates without bound, 1 MiB buffers written through (the memory cap must end it);
 * - `patch-other` returns a merge patch of the ConfigMap of the same name in `other` (the host
 *   must refuse it before sending anything);
 * - `get-other` reads the ConfigMap of the same name in `other` through the cache, and reports
 *   what it got in a log line and a `Read` Event (the host must refuse the read and fail the
 *   reconcile, whatever the plugin makes of the error);
 * - `ok` does nothing.
 *
 * @module
 */

import {
  Action,
  Manifest,
  ObjectRef,
  Outcome,
  ReconcileError,
  kinds,
  log,
  type ConfigMap,
  type Context,
  type Reconcile,
  type Reconciler,
} from "wasmctrl";

/** The misbehaviours. */
export const MODES = ["loop", "alloc", "patch-other", "get-other", "ok"] as const;
export type Mode = (typeof MODES)[number];

/** The plugin's settings. */
export interface HostileSettings {
  mode: Mode;
  /** The manifest name, to pose as another plugin. */
  name?: string;
}

/** The namespace the scoped modes are declared for, and the one they reach into. */
const DECLARED = "team-a";
const OTHER = "other";

function isMode(value: unknown): value is Mode {
  return typeof value === "string" && (MODES as readonly string[]).includes(value);
}

/** The plugin. */
export class Hostile implements Reconciler<ConfigMap, HostileSettings> {
  decodeSettings(json: unknown): HostileSettings {
    const settings = (json ?? {}) as Record<string, unknown>;
    const mode = settings["mode"] ?? "ok";
    if (!isMode(mode)) throw new Error(`mode must be one of ${MODES.join(", ")}, got ${JSON.stringify(mode)}`);
    const name = settings["name"];
    if (name !== undefined && typeof name !== "string") throw new Error("name must be a string");
    return name === undefined ? { mode } : { mode, name };
  }

  manifest(settings: HostileSettings): Manifest {
    const manifest = Manifest.forKind("v1", "ConfigMap", settings.name ?? `hostile-ts-${settings.mode}`);
    const scoped = settings.mode === "patch-other" || settings.mode === "get-other";
    return scoped ? manifest.namespaces([DECLARED]) : manifest;
  }

  reconcile(event: Reconcile<ConfigMap>, ctx: Context<HostileSettings>): Outcome {
    switch (ctx.settings.mode) {
      case "loop":
        return spin();
      case "alloc":
        return hoard();
      case "patch-other":
        if (event.type === "gone") return Outcome.done();
        return Outcome.with([
          Action.mergePatch(ObjectRef.of(kinds.ConfigMap, OTHER, ctx.name), { data: { patchedBy: ctx.name } }),
        ]);
      case "get-other":
        if (event.type === "gone") return Outcome.done();
        return Outcome.with([Action.event("Read", readOther(ctx))]);
      case "ok":
        return Outcome.done();
    }
  }
}

/** Never returns. */
function spin(): never {
  let turns = 0;
  for (;;) turns = (turns + 1) % 1_000_000;
}

/** Never returns: keeps 1 MiB buffers, each written through so its memory is really taken. */
function hoard(): never {
  const kept: Uint8Array[] = [];
  for (;;) kept.push(new Uint8Array(1 << 20).fill(1));
}

/** What reading the ConfigMap of the same name in `other` gave, as the plugin reports it. */
function readOther(ctx: Context<HostileSettings>): string {
  let got: string;
  try {
    got = ctx.cache.get(kinds.ConfigMap, OTHER, ctx.name) === undefined ? "absent" : "found";
  } catch (e) {
    // Carry on as a careless plugin would: the host fails the reconcile all the same.
    got = `refused: ${e instanceof ReconcileError ? e.message : String(e)}`;
  }
  log.info("read another namespace", { key: ctx.key, target: `${OTHER}/${ctx.name}`, got });
  return `${OTHER}/${ctx.name}: ${got}`;
}
