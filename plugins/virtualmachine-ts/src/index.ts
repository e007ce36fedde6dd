/**
 * The component's entry: the world's `reconciler` and `webhooks` interfaces, served by the
 * VirtualMachine controller. Tests import `controller.ts`, never this module (its imports exist
 * only inside the component).
 *
 * @module
 */

import { exportPlugin } from "wasmctrl/export";

import { VirtualMachineController } from "./controller.js";

export const { reconciler, webhooks } = exportPlugin(new VirtualMachineController());
