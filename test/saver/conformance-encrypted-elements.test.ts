/**
 * The official conformance suite, in full, plus its delta-channel suite, with
 * lists stored by their elements under an encrypting serializer: each element
 * sealed for its own row, hashes keyed, refs values authenticated (issue 26).
 */
import { randomBytes } from "node:crypto";
import { deltaChannelHistoryTests, validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { EncryptedSerializer, migrate, PostgresSaver } from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("conformance_encrypted_elements");
const serde = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });

const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
  checkpointerName: "langgraph-checkpoint-pg (encrypted elements)",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    await migrate({ pool: db.pool });
  },
  async createCheckpointer() {
    // One live checkpointer at a time (the suite's contract): a clean slate each time.
    await db.pool.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
    return new PostgresSaver(db.pool, { elementStorage: true, serde });
  },
};

validate(initializer);
deltaChannelHistoryTests(initializer);
