import { configDefaults, defineConfig } from "vitest/config";
import base from "../vitest.config.js";

// `npm run test:citus` (docs/scaling-out.md "On Citus"): the saver's and the store's tests on a Citus cluster.
// TEST_DATABASE_URL names its coordinator (scripts/citus-cluster.sh starts one); each test database is made a
// Citus database there, its schema `public` migrated and distributed by the docs' SQL block (test/helpers/citus.ts).
process.env.TEST_CITUS = "1";
if (!process.env.TEST_DATABASE_URL) throw new Error("npm run test:citus: set TEST_DATABASE_URL to a Citus coordinator (scripts/citus-cluster.sh prints one)");

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    // The saver's and the store's tests that run on a schema distributed as docs/scaling-out.md says (the others make
    // schemas of their own, or test what one server does: partitions, failover, the official tables).
    exclude: configDefaults.exclude,
    include: [
      "test/citus/**/*.test.ts",
      "test/saver/conformance.test.ts",
      "test/saver/saver.test.ts",
      "test/saver/graph.test.ts",
      "test/saver/semantics.test.ts",
      "test/saver/lineage.test.ts",
      "test/saver/tombstones.test.ts",
      "test/saver/reused-thread.test.ts",
      "test/saver/copy.test.ts",
      "test/saver/deleted-run.test.ts",
      "test/saver/retention.test.ts",
      "test/ops/prune.test.ts",
      "test/ops/prune-race.test.ts",
      "test/ops/prune-tombstones.test.ts",
      "test/store/graph.test.ts",
      "test/store/store.test.ts",
      "test/store/ttl-race.test.ts",
    ],
  },
});
