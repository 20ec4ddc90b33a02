import { configDefaults, defineConfig } from "vitest/config";
import base from "../vitest.config.js";

// `npm run test:partitioned`, the second half of `npm run test:long` (README "Tests"): the saver's and the
// store's tests again (prune's long files included), every schema they migrate hash partitioned by thread
// (test/helpers/db.ts sets the database's partitions setting), 4 partitions per table unless TEST_PARTITIONS
// says otherwise: what is tested is the layout (every statement pruned to one partition), not the count, and
// 16 took 40% longer on CI (each test schema creates every partition). Set here, in the main process, so that
// global setup says so and every worker inherits it. Left out: what never meets the test server's tables
// (the vector tests run on PGlite, the fuzzer on bytes), what is refused before any SQL (hostile.test.ts),
// what sends the same statements as a file kept here (strings.long.test.ts: large values;
// conformance-linear.long.test.ts: the conformance suite in linear mode), and the store's migrations
// (test/scaling/migrate.test.ts migrates partitioned schemas, the store's included).
process.env.TEST_PARTITIONS ||= "4";

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ["test/saver/**/*.test.ts", "test/store/**/*.test.ts", "test/ops/prune*.test.ts"],
    exclude: [
      ...configDefaults.exclude,
      "test/saver/fuzz.test.ts",
      "test/store/vector.test.ts",
      "test/store/vector-index.test.ts",
      "test/store/vector-official.long.test.ts",
      "test/store/vector-cli.long.test.ts",
      "test/saver/hostile.test.ts",
      "test/saver/strings.long.test.ts",
      "test/saver/conformance-linear.long.test.ts",
      "test/store/migrate.test.ts",
    ],
  },
});
