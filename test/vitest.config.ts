import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";
import LongestFirst from "./setup/sequencer.js";

// Lives in test/ to keep the package's top level to the files that ship or configure it.
export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  test: {
    environment: "node",
    // The official conformance suite calls describe/it/beforeAll as globals.
    globals: true,
    include: ["test/**/*.test.ts"],
    // `npm test` is the everyday run: a file named *.long.test.ts takes minutes for what it adds, and runs in
    // `npm run test:long` (test/long/vitest.config.ts) with the partitioned re-run; CI runs both.
    exclude: [...configDefaults.exclude, "test/**/*.long.test.ts", "test/citus/**"],
    // Starts (or finds) one Postgres server per run; each test file then creates its own database.
    globalSetup: ["test/setup/global-setup.ts"],
    // Keeps the warnings tests provoke on purpose out of the output (see the file).
    setupFiles: ["test/setup/quiet.ts"],
    // The default summary only counts skipped tests; this one lists them with the reason.
    reporters: ["default", "./test/setup/skip-reporter.ts"],
    // Failure detectors, not performance bounds (those live in `npm run bench`): a loaded 2-core
    // CI machine runs the slowest tests (child processes, PGlite, 1,000-step threads) several
    // times slower than a quiet one, and a test must not fail for that.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    sequence: { sequencer: LongestFirst },
    // The default reporter names each test slower than this: the long ones, not the hundreds a busy
    // machine slows past vitest's 300 ms.
    slowTestThreshold: 10_000,
    // Files are isolated by database, so they may run in parallel. CI machines have 2 cores; a
    // third worker fills the time the others wait on Postgres and child processes (a full run on
    // a busy 2-core machine: 6 min with 3 workers, 8 with 2).
    fileParallelism: true,
    maxWorkers: 3,
    // A worker runs file after file in one module graph instead of a new process per file: the run
    // spent 144 s (CPU, over 70 files) importing the same modules again (20 s so). Files share no
    // state but the server: each has its own database, and the two that set DATABASE_URL restore it.
    isolate: false,
    // Workers compile PGlite's WebAssembly (tens of PGlite instances a run) once, without V8's optimizing
    // second pass, as `npm run demo` and the spawned CLI do: pglite.test.ts and the vector tests took 15% less
    // CPU so (104 s instead of 122); tests without WebAssembly are unaffected.
    execArgv: ["--liftoff-only"],
  },
});
