#!/usr/bin/env node
/**
 * `npm run build`: the package as published, in dist/.
 * - dist/*.js: ES modules and their .d.ts, compiled by tsc (src/tsconfig.json);
 *   dist/cli/main.js is the `langgraph-checkpoint-pg` command.
 * - dist/cjs/: the same API for `require`, bundled by esbuild into one file
 *   (dependencies stay external), and `langgraph-checkpoint-pg/schema` (the
 *   drizzle tables) as a second one, dist/cjs/schema.js, and `langgraph-checkpoint-pg/store` as
 *   dist/cjs/store.js, the root bundle again (one copy of each class: `instanceof` holds across the
 *   two entry points), and `langgraph-checkpoint-pg/otel` as dist/cjs/otel.js, a bundle of its own
 *   (only it requires @opentelemetry/api) that takes the errors and events from the root bundle,
 *   with a copy of the .d.ts files that TypeScript reads as CommonJS (dist/cjs/package.json says so).
 * The library locates its migrations/ from its own file (import.meta.url); in
 * the CommonJS bundle that URL is defined from __filename.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const cjs = join(dist, "cjs");

rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", join(root, "src")], { stdio: "inherit" });

// The command's declarations are no API: nobody imports the command.
for (const file of readdirSync(join(dist, "cli")).map((f) => join(dist, "cli", f))) {
  if (file.endsWith(".d.ts")) rmSync(file);
}

// Both CommonJS bundles. Error classes are told apart by name (err.name): a bundle keeps every name as written.
const cjsBundle = { outdir: cjs, bundle: true, packages: "external", format: "cjs", platform: "node", target: "node20", keepNames: true, logLevel: "warning" };
await build({
  ...cjsBundle,
  entryPoints: { index: join(root, "src", "index.ts"), schema: join(root, "src", "db", "schema.ts") },
  define: { "import.meta.url": "__import_meta_url" },
  banner: { js: 'const __import_meta_url = require("node:url").pathToFileURL(__filename).href;' },
});
// The otel entry: its own file, so that the root never loads @opentelemetry/api; the errors (and the
// events' channel name) are the root's, so that its InvalidOptionsError is the one users catch.
const fromRoot = [join(root, "src", "errors.ts"), join(root, "src", "events.ts")];
await build({
  ...cjsBundle,
  entryPoints: { otel: join(root, "src", "otel", "index.ts") },
  plugins: [
    {
      name: "root-errors",
      setup(b) {
        b.onResolve({ filter: /^\.\.?\/(.*\/)?(errors|events)\.js$/ }, (args) =>
          fromRoot.includes(join(args.resolveDir, args.path.replace(/\.js$/, ".ts"))) ? { path: "./index.js", external: true } : undefined,
        );
      },
    },
  ],
});
writeFileSync(join(cjs, "package.json"), `${JSON.stringify({ type: "commonjs" }, null, 2)}\n`);
writeFileSync(join(cjs, "store.js"), '"use strict";\n// langgraph-checkpoint-pg/store: the root bundle, so that its classes are the root\'s.\nmodule.exports = require("./index.js");\n');

// The declarations again, under dist/cjs: there TypeScript reads them as CommonJS.
const declarations = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (path === cjs) return [];
    return statSync(path).isDirectory() ? declarations(path) : name.endsWith(".d.ts") ? [path] : [];
  });
for (const file of declarations(dist)) {
  const to = join(cjs, relative(dist, file));
  mkdirSync(dirname(to), { recursive: true });
  cpSync(file, to);
}
