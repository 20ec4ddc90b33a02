/**
 * The official conformance suite, in full, plus its delta-channel suite, with
 * every value stored whole (`elementStorage: false`); conformance.test.ts runs
 * it with the default, values stored by content (stored.ts).
 */
import { deltaChannelHistoryTests, validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { migrate, PostgresSaver } from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("conformance_whole");

const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
  checkpointerName: "langgraph-checkpoint-pg (whole values)",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    await migrate({ pool: db.pool });
  },
  async createCheckpointer() {
    // One live checkpointer at a time (the suite's contract): a clean slate each time.
    await db.pool.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
    return new PostgresSaver(db.pool, { elementStorage: false });
  },
};

validate(initializer);
deltaChannelHistoryTests(initializer);
