/**
 * prune never deletes a row a committed checkpoint names (issue 26, rows 1 and 11). Its collection
 * decides on a snapshot which blobs and element rows nothing refers to; a put committing meanwhile
 * may rely on one of them: an element it sends again (row 1: `ON CONFLICT` reuses the stored row),
 * or a value a checkpoint whose parent is not stored names without writing it (row 11). Such a put
 * touches the row; the collection deletes only rows unchanged since its snapshot.
 *
 * The forced cases freeze the collection statement after its snapshot (it waits for an orphan write
 * this test holds locked, which it deletes before any blob), let the put commit, then let it go on.
 * The stress case, without instrumentation, is in prune-race-stress.long.test.ts (`npm run test:long`).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import type { Checkpoint } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, prune } from "../../src/index.js";
import { longText, makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, waitForLockWait, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("prune_race");
let pool: pg.Pool;
let saver: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 10 });
  saver = new PostgresSaver(pool, { elementStorage: true });
});
afterAll(async () => {
  await pool?.end();
});

const cfg = (thread_id: string, checkpoint_id?: string): RunnableConfig => ({
  configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) },
});
/** List elements long enough that a list of one is stored by its elements (a list of short ones stays whole, issue 40). */
const [A, B, P, Q, R] = ["a", "b", "p", "q", "r"].map((label) => longText(label));
let counter = 0;
/** A fresh version string (short form, as the saver makes them). */
const ver = () => `-a${(++counter).toString(36)}.00000001`;

/** Element rows of a thread, by hash. */
async function elementHashes(threadId: string): Promise<Set<string>> {
  const { rows } = await db.pool.query<{ version: string }>("SELECT version FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__'", [threadId]);
  return new Set(rows.map((r) => r.version));
}

/**
 * Runs `prune({ keepLast: 1, grace: 0 })` on `threadId` and freezes its collection statement after
 * its snapshot, before it deletes any blob; runs `meanwhile`, then lets the collection finish.
 */
async function pruneFrozen<T>(threadId: string, meanwhile: () => Promise<T>): Promise<T> {
  // An orphan write (its checkpoint was never stored): the collection deletes it before any blob.
  await saver.putWrites(cfg(threadId, "orphan-checkpoint"), [["x", "orphan"]], "orphan-task");
  const locker = await db.pool.connect();
  try {
    await locker.query("BEGIN");
    await locker.query("SELECT 1 FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_id = 'orphan-checkpoint' FOR UPDATE", [threadId]);
    const pruning = prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [threadId], lockTimeout: "1h" });
    // Only the collection can wait on that row: its snapshot is taken.
    await waitForLockWait(db.pool, "prune: round");
    const out = await meanwhile();
    await locker.query("COMMIT");
    const result = await pruning;
    expect(result.checkpoints).toBeGreaterThan(0);
    expect(result.writes).toBeGreaterThanOrEqual(1);
    return out;
  } finally {
    await locker.query("ROLLBACK").catch(() => undefined);
    locker.release();
  }
}

describe("a put committing while prune's collection decides (forced order)", () => {
  it("row 1: an element the put sends again is kept, though the collection found it unreferenced", async () => {
    const threadId = tid("readd");
    const v0 = ver();
    let config = await saver.put(cfg(threadId), makeCheckpoint({ items: [A] }, { items: v0 }), meta(-1), { items: v0 });
    const before = await elementHashes(threadId);
    expect(before.size).toBe(1);
    const v1 = ver();
    config = await saver.put(config, makeCheckpoint({ items: [A, B] }, { items: v1 }), meta(0), { items: v1 });
    const b = [...(await elementHashes(threadId))].filter((h) => !before.has(h));
    expect(b).toHaveLength(1);
    const v2 = ver();
    config = await saver.put(config, makeCheckpoint({ items: [A] }, { items: v2 }), meta(1), { items: v2 });
    // Pruning to the head ([A]) leaves B unreferenced; the head's child brings it back.
    const v3 = ver();
    const c3 = await pruneFrozen(threadId, () => saver.put(config, makeCheckpoint({ items: [A, B] }, { items: v3 }), meta(2), { items: v3 }));
    expect((await elementHashes(threadId)).has(b[0]!)).toBe(true);
    expect((await new PostgresSaver(pool, { elementStorage: true }).getTuple(c3))!.checkpoint.channel_values).toEqual({ items: [A, B] });
  });

  it("row 11: a value a checkpoint with an unknown parent names is kept, though the collection found it unreferenced", async () => {
    const threadId = tid("unknown-parent");
    const vx = ver();
    let config = await saver.put(cfg(threadId), makeCheckpoint({ x: "the first x" }, { x: vx }), meta(-1), { x: vx });
    const vy = ver();
    config = await saver.put(config, makeCheckpoint({ x: "the second x" }, { x: vy }), meta(0), { x: vy });
    // A branch-mode put naming a parent that was never stored, and the first x without writing it.
    const orphan: Checkpoint = makeCheckpoint({ x: "the first x" }, { x: vx });
    const c3 = await pruneFrozen(threadId, () => saver.put(cfg(threadId, "never-stored"), orphan, meta(5), {}));
    expect((await saver.getTuple(c3))!.checkpoint.channel_values).toEqual({ x: "the first x" });
  });

  it("row 11: a list such a checkpoint names keeps its refs value and its elements", async () => {
    const threadId = tid("unknown-parent-list");
    const vx = ver();
    let config = await saver.put(cfg(threadId), makeCheckpoint({ items: [P, Q] }, { items: vx }), meta(-1), { items: vx });
    expect((await elementHashes(threadId)).size).toBe(2);
    const vy = ver();
    config = await saver.put(config, makeCheckpoint({ items: [R] }, { items: vy }), meta(0), { items: vy });
    const orphan: Checkpoint = makeCheckpoint({ items: [P, Q] }, { items: vx });
    const c3 = await pruneFrozen(threadId, () => saver.put(cfg(threadId, "never-stored"), orphan, meta(5), {}));
    expect((await new PostgresSaver(pool, { elementStorage: true }).getTuple(c3))!.checkpoint.channel_values).toEqual({ items: [P, Q] });
  });
});
