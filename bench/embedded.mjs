#!/usr/bin/env node
/**
 * `npm run bench:embedded`: where the embedded database's first run goes
 * (issue 28). Each run is a new Node process, as an app's start is: import the
 * package, open the embedded database in a folder, migrate, close; it reports
 * the wall time of each phase, the CPU time and the peak memory (max RSS, what
 * `/usr/bin/time -v` reports) of the whole process.
 *
 * Three cases: a new folder as `PostgresSaver.open()` makes it (from the empty
 * database the package ships, embedded/initdb.tar.br), a new folder through
 * PGlite's initdb (what every first run did before), and the folder again (a
 * second run). `--runs N` (default 3) runs each N times and prints the median.
 * No database server needed. Plain Node runs a bundle of src/ (esbuild, as
 * `npm run demo` does), so no TypeScript loader skews the numbers.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { runs: { type: "string", default: "3" }, json: { type: "boolean" } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error("--runs: expected a positive integer");

// Under node_modules/, so the bundle resolves PGlite and finds migrations/ and embedded/ above it.
const cache = join(root, "node_modules", ".cache", "langgraph-checkpoint-pg");
mkdirSync(cache, { recursive: true });
const bundle = join(cache, `embedded-bench-${process.pid}.mjs`);
const child = join(cache, `embedded-bench-child-${process.pid}.mjs`);
await build({ entryPoints: [join(root, "src", "index.ts")], outfile: bundle, bundle: true, packages: "external", format: "esm", platform: "node", target: "node20", logLevel: "warning" });
// One run: the phases in wall-clock ms, then the process's CPU time and peak memory.
writeFileSync(
  child,
  `const [dir, mode] = process.argv.slice(2);
const t = [performance.now()];
const { openEmbedded, migrate } = await import(${JSON.stringify(pathToFileURL(bundle).href)});
t.push(performance.now());
const db = await openEmbedded(dir, mode === "initdb" ? { loadDataDir: () => undefined } : {});
t.push(performance.now());
await migrate({ pool: db.db });
t.push(performance.now());
await db.close();
t.push(performance.now());
const cpu = process.cpuUsage();
console.log(JSON.stringify({ created: db.created ?? "existing", importMs: t[1] - t[0], openMs: t[2] - t[1], migrateMs: t[3] - t[2], closeMs: t[4] - t[3],
  cpuMs: (cpu.user + cpu.system) / 1000, maxRssMB: process.resourceUsage().maxRSS / 1024 }));
`,
);

const once = (dir, mode) => {
  const started = performance.now();
  const out = JSON.parse(execFileSync(process.execPath, [child, dir, mode], { encoding: "utf8" }));
  return { ...out, wallMs: performance.now() - started };
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cases = { "new folder, shipped snapshot (open()'s default)": [], "new folder, PGlite's initdb (before issue 28)": [], "existing folder (a second run)": [] };
const [fast, slow, again] = Object.values(cases);
try {
  for (let i = 0; i < runs; i++) {
    const a = mkdtempSync(join(tmpdir(), "lgpg-bench-fast-"));
    const b = mkdtempSync(join(tmpdir(), "lgpg-bench-initdb-"));
    try {
      fast.push(once(a, "snapshot"));
      slow.push(once(b, "initdb"));
      again.push(once(a, "existing"));
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  }
} finally {
  rmSync(bundle, { force: true });
  rmSync(child, { force: true });
}
const fields = ["wallMs", "cpuMs", "maxRssMB", "importMs", "openMs", "migrateMs"];
const result = Object.fromEntries(Object.entries(cases).map(([name, rs]) => [name, Object.fromEntries(fields.map((f) => [f, Math.round(median(rs.map((r) => r[f])))]))]));
if (values.json) {
  console.log(JSON.stringify(result, null, 2));
} else {
  console.log(`embedded database, median of ${runs} run(s) each (node ${process.version}); a new process per run`);
  console.log("case                                               wall    CPU  max RSS   import  open   migrate");
  for (const [name, r] of Object.entries(result)) {
    console.log(
      `${name.padEnd(50)} ${String(r.wallMs).padStart(5)} ms ${String(r.cpuMs).padStart(5)} ms ${String(r.maxRssMB).padStart(5)} MB ${String(r.importMs).padStart(6)} ${String(r.openMs).padStart(5)} ${String(r.migrateMs).padStart(7)} ms`,
    );
  }
}
