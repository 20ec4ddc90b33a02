#!/usr/bin/env node
/**
 * `npm run demo`: bundles src/demo.ts and what it imports from src/ with esbuild
 * (a tenth of a second; dependencies stay in node_modules) and runs it in this
 * process. Plain Node loads the bundle and LangGraph without tsx's loader,
 * whose hooks on every import cost over a second of a first run.
 */
import { mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { setFlagsFromString } from "node:v8";
import { build } from "esbuild";

// V8 compiles PGlite's WebAssembly twice: quickly (Liftoff), then optimized (TurboFan) in the
// background. A run of a few seconds never gains back the second: it cost a third of the CPU.
setFlagsFromString("--liftoff-only");

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// Under node_modules/, so the bundle resolves the dependencies and finds migrations/ above it.
const outfile = join(root, "node_modules", ".cache", "langgraph-checkpoint-pg", `demo-${process.pid}.mjs`);
mkdirSync(dirname(outfile), { recursive: true });
await build({
  entryPoints: [join(root, "src", "demo.ts")],
  outfile,
  bundle: true,
  packages: "external",
  format: "esm",
  platform: "node",
  target: "node20",
  logLevel: "warning",
});
try {
  await import(pathToFileURL(outfile).href);
} finally {
  rmSync(outfile, { force: true });
}
