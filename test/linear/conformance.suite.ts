/**
 * The official conformance suite against a saver in `lineage: "linear"` mode.
 * Run by test/saver/conformance-linear.test.ts in a child vitest, which asserts that
 * exactly the tests rejected by design fail (see README, "Concurrency").
 */
import { deltaChannelHistoryTests, validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { migrate, PostgresSaver } from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("conformance_linear");

const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
  checkpointerName: "langgraph-checkpoint-pg (linear)",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    await migrate({ pool: db.pool });
  },
  async createCheckpointer() {
    await db.pool.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
    return new PostgresSaver(db.pool, { lineage: "linear" });
  },
};

validate(initializer);
deltaChannelHistoryTests(initializer);
