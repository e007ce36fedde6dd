#!/usr/bin/env node
// Builds a TypeScript (or JavaScript) plugin project into a WebAssembly component of the wasmctrl
// plugin contract. This is the one build recipe: `wasmctrl build` runs it for a project with a
// package.json, and README.md ("How the component is built") says the same in commands.
//
//   node node_modules/wasmctrl/bin/build.mjs [--wit <dir>] [--world <world>] --out <file> [<project dir>]
//
// 1. type-check: `tsc --noEmit -p <project>` with the project's own TypeScript, when the
//    project has a tsconfig.json (a type error fails the build, as in `cargo build`);
// 2. bundle the entry module (package.json `wasmctrl.entry`, default `src/index.ts`) and what it
//    imports into one ES module with esbuild: componentize-js resolves no bare imports, and the
//    world's interfaces (`wasmctrl:plugin/...`) stay external, the component's imports;
// 3. componentize the bundle against the WIT world with componentize-js (SpiderMonkey,
//    snapshotted after the module's top level ran), without the `http` and `fetch-event`
//    features: the host offers WASI 0.2 but no `wasi:http`.
//
// Prints the component's path on stdout, and how long the build took and its size on stderr.
// Exits 1 when a step fails, 2 on a usage error.

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const SDK = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_ENTRY = "src/index.ts";
const DEFAULT_WORLD = "plugin-with-webhooks";
// The host links WASI 0.2 (clocks, random, stdio; no sockets or files) but not wasi:http.
const DISABLED_FEATURES = ["http", "fetch-event"];

/** A failure the user can act on: printed without a stack. */
class BuildError extends Error {}

function usage() {
  return "usage: build.mjs [--wit <dir>] [--world <world>] --out <file.wasm> [<project dir>]";
}

/** The command line, or a usage error. */
function options(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      wit: { type: "string", default: join(SDK, "wit") },
      world: { type: "string", default: DEFAULT_WORLD },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(usage());
    process.exit(0);
  }
  if (values.out === undefined || positionals.length > 1) {
    console.error(usage());
    process.exit(2);
  }
  return {
    project: resolve(positionals[0] ?? "."),
    wit: resolve(values.wit),
    world: values.world,
    out: resolve(values.out),
  };
}

/** The project's entry module, from its package.json. */
async function entryOf(project) {
  const manifest = join(project, "package.json");
  if (!existsSync(manifest)) throw new BuildError(`${project}: no package.json`);
  const pkg = JSON.parse(await readFile(manifest, "utf8"));
  const entry = resolve(project, pkg.wasmctrl?.entry ?? DEFAULT_ENTRY);
  if (!existsSync(entry)) {
    throw new BuildError(`${entry}: no such entry module (set "wasmctrl": {"entry": ...} in package.json)`);
  }
  return entry;
}

/** `tsc --noEmit` with the project's TypeScript, when it has a tsconfig.json. */
function typecheck(project) {
  if (!existsSync(join(project, "tsconfig.json"))) return;
  let tsc;
  try {
    tsc = createRequire(join(project, "package.json")).resolve("typescript/bin/tsc");
  } catch {
    throw new BuildError(`${project}: has a tsconfig.json but no typescript installed (npm install)`);
  }
  const run = spawnSync(process.execPath, [tsc, "--noEmit", "-p", project], { stdio: "inherit" });
  if (run.status !== 0) throw new BuildError(`${project}: type errors (tsc --noEmit)`);
}

/** The entry and its imports as one ES module in `dir`; the world's interfaces stay imports. */
async function bundle(entry, dir) {
  const { build } = await import("esbuild");
  const outfile = join(dir, "plugin.js");
  await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    external: ["wasmctrl:*"],
    keepNames: true,
    outfile,
    logLevel: "warning",
  });
  return outfile;
}

async function componentizeTo(source, { wit, world, out }) {
  const { componentize } = await import("@bytecodealliance/componentize-js");
  const { component } = await componentize({
    sourcePath: source,
    witPath: wit,
    worldName: world,
    disableFeatures: DISABLED_FEATURES,
  });
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, component);
  return component.byteLength;
}

async function main() {
  const opts = options(process.argv.slice(2));
  const started = performance.now();
  const entry = await entryOf(opts.project);
  typecheck(opts.project);
  const work = await mkdtemp(join(tmpdir(), "wasmctrl-build-ts-"));
  try {
    const bytes = await componentizeTo(await bundle(entry, work), opts);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.error(`built ${opts.out} in ${seconds} s, ${(bytes / (1024 * 1024)).toFixed(1)} MiB`);
    console.log(opts.out);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`error: ${e instanceof BuildError ? e.message : (e?.stack ?? e)}`);
  process.exit(1);
});
