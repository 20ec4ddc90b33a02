/**
 * The official conformance suite against a saver in `lineage: "linear"` mode.
 * Run by test/saver/conformance-linear.test.ts in a child vitest, which asserts that
 * exactly the tests rejected by design fail (see README, "Concurrency").
 */
import { conformance } from "../helpers/conformance.js";

conformance("langgraph-checkpoint-pg (linear)", "conformance_linear", { lineage: "linear" });
