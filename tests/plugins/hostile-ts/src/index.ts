/**
 * The component's entry: the hostile plugin's `reconciler` (and an empty `webhooks`).
 *
 * @module
 */

import { exportPlugin } from "wasmctrl/export";

import { Hostile } from "./hostile.js";

export const { reconciler, webhooks } = exportPlugin(new Hostile());
