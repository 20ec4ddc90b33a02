/**
 * The official conformance suite (`@langchain/langgraph-checkpoint-validation`),
 * in full, plus its opt-in delta-channel suite, against savers made with
 * `options` on a database of the calling file. The saver's name is our own:
 * the suite skips some tests for some savers it knows.
 *
 * @example
 * ```ts
 * conformance("langgraph-checkpoint-pg (whole values)", "conformance_whole", { elementStorage: false });
 * ```
 */
import { deltaChannelHistoryTests, validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { migrate, PostgresSaver, type PostgresSaverOptions } from "../../src/index.js";
import { withTestDatabase } from "./db.js";

export function conformance(name: string, database: string, options?: PostgresSaverOptions): void {
  const db = withTestDatabase(database);
  const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
    checkpointerName: name,
    beforeAllTimeout: 60_000,
    async beforeAll() {
      await migrate({ pool: db.pool });
    },
    async createCheckpointer() {
      // One live checkpointer at a time (the suite's contract): a clean slate each time.
      await db.pool.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
      return new PostgresSaver(db.pool, options);
    },
  };
  validate(initializer);
  deltaChannelHistoryTests(initializer);
}
