import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Lives in test/ to keep the package's top level to the files that ship or configure it.
export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  test: {
    environment: "node",
    // The official conformance suite calls describe/it/beforeAll as globals.
    globals: true,
    include: ["test/**/*.test.ts"],
    // Starts (or finds) one Postgres server per run; each test file then creates its own database.
    globalSetup: ["test/setup/global-setup.ts"],
    // Real database work: DDL, concurrency tests, container start-up.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Files are isolated by database, so they may run in parallel; CI machines have 2 cores.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
