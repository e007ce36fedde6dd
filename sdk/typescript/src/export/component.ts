/**
 * `wasmctrl/export`: a plugin's component entry. Import it only from the module the build
 * componentizes (`src/index.ts`), never from code the native tests load: it imports the world's
 * interfaces, which exist only inside the component.
 *
 * ```ts
 * import { exportPlugin } from "wasmctrl/export";
 * import { VirtualMachineController } from "./controller.js";
 *
 * export const { reconciler, webhooks } = exportPlugin(new VirtualMachineController());
 * ```
 *
 * @module
 */

import { children, get, list } from "wasmctrl:plugin/cache@0.3.1";
import { log } from "wasmctrl:plugin/log@0.3.1";
import { execute } from "wasmctrl:plugin/sql@0.3.1";

import type { KubeObject } from "../objects.js";
import type { Plugin } from "../webhooks.js";
import { exportWith, hostOver, resolveGlobals, warmUp, type PluginExports } from "./glue.js";

export type { PluginExports } from "./glue.js";

/**
 * The world's exports for `plugin`: its `reconciler` and `webhooks` interfaces (a plugin that
 * implements no webhook declares none). Export both from the entry module under those names.
 * Reconciles the plugin's `warmUp()` samples first (see `Reconciler.warmUp`).
 */
export function exportPlugin<T extends KubeObject, S>(plugin: Plugin<T, S>): PluginExports {
  // The entry module runs when the component is built, before the snapshot.
  const imports = { log, get, list, children, execute };
  resolveGlobals(Object.values(imports));
  warmUp(plugin);
  return exportWith(hostOver(imports), plugin);
}
