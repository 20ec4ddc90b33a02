/**
 * prune and tombstones (src/saver/tombstones.ts): a thread prune expires leaves
 * one, as deleteThread does, so a run still going on it cannot write it back; a
 * thread whose writes are in flight is not expired under them; tombstones older
 * than `keepTombstones` are collected (counted in a dry run).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidOptionsError, migrate, PostgresSaver, prune, ThreadDeletedError } from "../../src/index.js";
import { deleteLockName } from "../../src/saver/sql/gate.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("prune_tombstones");
let saver: PostgresSaver;
let pool: ReturnType<typeof testPool>;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 6 });
  saver = new PostgresSaver(pool);
});
afterAll(async () => {
  await pool?.end();
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "" } });

async function twoCheckpoints(threadId: string): Promise<RunnableConfig> {
  const first = await saver.put(cfg(threadId), makeCheckpoint({ x: 1 }, { x: "-a1.00000001" }), meta(-1), { x: "-a1.00000001" });
  return saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000001" }), meta(0), { x: "-a2.00000001" });
}

async function age(threadId: string, interval: string): Promise<void> {
  await db.pool.query(`UPDATE checkpoints SET created_at = now() - interval '${interval}' WHERE thread_id = $1`, [threadId]);
  await db.pool.query(`UPDATE checkpoint_writes SET created_at = now() - interval '${interval}' WHERE thread_id = $1`, [threadId]);
}

async function tombstone(threadId: string): Promise<{ last_checkpoint_id: string | null } | undefined> {
  return (await db.pool.query("SELECT last_checkpoint_id FROM checkpoint_tombstones WHERE thread_id = $1", [threadId])).rows[0];
}

describe("prune's expiry", () => {
  it("leaves a tombstone: a run still going on the expired thread cannot write it back", async () => {
    const threadId = tid("expire");
    const head = await twoCheckpoints(threadId);
    await age(threadId, "2 days");
    const r = await prune({ pool: db.pool, threadIds: [threadId], idleFor: "1d" });
    expect(r.threadsExpired).toBe(1);
    expect(await tombstone(threadId)).toEqual({ last_checkpoint_id: head.configurable!.checkpoint_id });
    const err = await saver.put(head, makeCheckpoint({ x: 3 }, { x: "-a3.00000001" }), meta(1), { x: "-a3.00000001" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThreadDeletedError);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [threadId])).rows[0].n).toBe(0);
  });

  it("leaves alone an idle thread whose write is in flight (its deletion lock is held), and expires it once that is done", async () => {
    const threadId = tid("expire-busy");
    await twoCheckpoints(threadId);
    await age(threadId, "2 days");
    const writer = await db.pool.connect();
    try {
      await writer.query("BEGIN");
      await writer.query("SELECT pg_advisory_xact_lock_shared(hashtext($1), hashtext($2))", [deleteLockName("public"), threadId]);
      const r = await prune({ pool: db.pool, threadIds: [threadId], idleFor: "1d" });
      expect(r.threadsExpired).toBe(0);
      expect(await tombstone(threadId)).toBeUndefined();
      expect((await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [threadId])).rows[0].n).toBe(2);
    } finally {
      await writer.query("COMMIT");
      writer.release();
    }
    expect((await prune({ pool: db.pool, threadIds: [threadId], idleFor: "1d" })).threadsExpired).toBe(1);
    expect(await tombstone(threadId)).toBeDefined();
  });
});

describe("tombstone collection", () => {
  it("deletes tombstones older than keepTombstones (default 7 days), only of threadIds when given; a dry run counts them", async () => {
    const [old, young, other] = [tid("old"), tid("young"), tid("other")];
    for (const t of [old, young, other]) {
      await twoCheckpoints(t);
      await saver.deleteThread(t);
    }
    await db.pool.query("UPDATE checkpoint_tombstones SET deleted_at = now() - interval '8 days' WHERE thread_id = ANY ($1)", [[old, other]]);
    const dry = await prune({ pool: db.pool, threadIds: [old, young], keepLast: 1, dryRun: true });
    expect(dry.tombstones).toBe(1);
    expect(await tombstone(old)).toBeDefined();
    const r = await prune({ pool: db.pool, threadIds: [old, young], keepLast: 1 });
    expect(r.tombstones).toBe(1);
    expect(await tombstone(old)).toBeUndefined();
    expect(await tombstone(young)).toBeDefined();
    expect(await tombstone(other)).toBeDefined(); // not among threadIds
    // keepTombstones: 0 collects them all; a thread without a tombstone any more takes any write again.
    const all = await prune({ pool: db.pool, threadIds: [young, other], keepLast: 1, keepTombstones: 0 });
    expect(all.tombstones).toBe(2);
    await saver.putWrites({ configurable: { thread_id: young, checkpoint_ns: "", checkpoint_id: uuid6(-3) } }, [["x", 1]], "t");
  });

  it("refuses a bad keepTombstones before any SQL, naming the option", async () => {
    await expect(prune({ pool: db.pool, keepLast: 1, keepTombstones: "soon" })).rejects.toThrow(InvalidOptionsError);
    await expect(prune({ pool: db.pool, keepLast: 1, keepTombstones: -1 })).rejects.toMatchObject({ option: "keepTombstones" });
  });
});
