/**
 * The official conformance suite's differential (test/helpers/conformance.ts) against a saver in
 * `lineage: "linear"` mode: linear mode changes the put statement (src/saver/write.ts), not what
 * `list` sends. Run by test/saver/conformance-linear.long.test.ts in a child vitest, which asserts
 * that exactly the tests rejected by design fail (see README, "Concurrency").
 */
import { conformanceDifferential } from "../helpers/conformance.js";

conformanceDifferential("langgraph-checkpoint-pg (linear)", "conformance_linear", { lineage: "linear" });
