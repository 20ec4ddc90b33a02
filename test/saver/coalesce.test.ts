/**
 * Write coalescing (src/saver/coalesce.ts): while a write of a lineage is in flight,
 * its next putWrites calls wait and go out together in one statement. Each call
 * still settles only once its rows are stored, with the outcome it would have
 * had alone; reads wait for queued writes; results come in call order.
 *
 * A put is held in flight by locking its lineage's head row from another
 * connection (the put statement locks it FOR UPDATE first).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import type { PendingWrite } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver } from "../../src/index.js";
import { MAX_WAIT_MS } from "../../src/saver/coalesce.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("coalesce");
let pool: pg.Pool;
let saver: PostgresSaver;
/** Statements the saver ran (one pool checkout each). */
let statements = 0;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 10 });
  pool.on("acquire", () => statements++);
  saver = new PostgresSaver(pool);
});
afterAll(async () => {
  await pool?.end();
});

const lockers: pg.PoolClient[] = [];
afterEach(async () => {
  for (const c of lockers.splice(0)) {
    await c.query("ROLLBACK").catch(() => {});
    c.release();
  }
});

const cfg = (thread_id: string, checkpoint_id?: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) } });

/** A thread with one checkpoint; returns its config. */
async function thread(prefix: string): Promise<{ threadId: string; first: RunnableConfig }> {
  const threadId = tid(prefix);
  const first = await saver.put(cfg(threadId), makeCheckpoint({ x: 1 }, { x: "-a1.00000001" }), meta(-1), { x: "-a1.00000001" });
  return { threadId, first };
}

/** Lock the lineage's head row from another connection; resolves once `pending` puts of the saver wait for it. */
async function holdHead(threadId: string, waiting = 1): Promise<() => Promise<void>> {
  const c = await db.pool.connect();
  lockers.push(c);
  await c.query("BEGIN");
  await c.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns = '' FOR UPDATE", [threadId]);
  const release = async () => {
    await c.query("COMMIT");
  };
  (release as { until?: () => Promise<void> }).until = async () => {
    for (;;) {
      const { rows } = await db.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%checkpoint_heads%'",
      );
      if (rows[0]!.n >= waiting) return;
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  return release;
}
async function until(cond: () => Promise<boolean>): Promise<void> {
  while (!(await cond())) await new Promise((r) => setTimeout(r, 5));
}
const untilWaiting = (release: () => Promise<void>) => (release as unknown as { until: () => Promise<void> }).until();

async function storedWrites(threadId: string): Promise<{ checkpoint_id: string; task_id: string; idx: number; channel: string }[]> {
  const { rows } = await db.pool.query(
    "SELECT checkpoint_id, task_id, idx, channel FROM checkpoint_writes WHERE thread_id = $1 ORDER BY checkpoint_id, task_id, idx",
    [threadId],
  );
  return rows;
}

describe("putWrites behind a put in flight", () => {
  it("go out together in one statement once the put is done, each stored", async () => {
    const { threadId, first } = await thread("batch");
    const release = await holdHead(threadId);
    const next = makeCheckpoint({ x: 2 }, { x: "-a2.00000001" });
    const put = saver.put(first, next, meta(0), { x: "-a2.00000001" });
    await untilWaiting(release);
    const before = statements;
    const writes = Array.from({ length: 5 }, (_, i) => saver.putWrites(first, [["a", i], ["b", `v${i}`]], `task-${i}`, `~path-${i}`));
    // Held longer than the cap: the queued writes go out on their own, together, while the put still waits
    // (their results come after the put's: results are delivered in call order).
    await until(async () => (await storedWrites(threadId)).length === 10);
    expect(statements - before).toBe(1);
    let putDone = false;
    void put.then(() => (putDone = true));
    await new Promise((r) => setImmediate(r));
    expect(putDone).toBe(false);
    await release();
    await put;
    await Promise.all(writes);
    const tuple = await saver.getTuple(first);
    expect(tuple?.pendingWrites?.length).toBe(10);
    expect(tuple?.pendingWrites?.filter(([task]) => task === "task-3")).toEqual([
      ["task-3", "a", 3],
      ["task-3", "b", "v3"],
    ]);
    expect(MAX_WAIT_MS).toBeGreaterThan(0);
  });

  it("are sent when the put is done (before the cap), in one statement", async () => {
    const { threadId, first } = await thread("after-put");
    const before = statements;
    // No lock: the put is in flight for one statement; the writes called meanwhile queue behind it.
    const put = saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000002" }), meta(0), { x: "-a2.00000002" });
    const writes = Array.from({ length: 4 }, (_, i) => saver.putWrites(first, [["a", i]], `t-${i}`));
    await Promise.all([put, ...writes]);
    expect(statements - before).toBe(2);
    expect((await storedWrites(threadId)).length).toBe(4);
  });

  it("keep what the calls one after another would leave: ordinary writes the first, special ones the last", async () => {
    const { threadId, first } = await thread("dedupe");
    // The same calls, one after another, on a second thread: the reference.
    const ref = await thread("dedupe-ref");
    const calls: [PendingWrite[], string][] = [
      [[["x", "first"]], "task-b"],
      [[["__interrupt__", { n: 1 }]], "task-a"],
      [[["x", "second"]], "task-b"],
      [[["__interrupt__", { n: 2 }], ["y", 7]], "task-a"],
      [[["__resume__", "r1"], ["__resume__", "r2"]], "task-c"],
      [[["__resume__", "r3"]], "task-c"],
    ];
    for (const [w, task] of calls) await saver.putWrites(ref.first, w, task);
    const release = await holdHead(threadId);
    const put = saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000003" }), meta(0), { x: "-a2.00000003" });
    await untilWaiting(release);
    const before = statements;
    const writes = calls.map(([w, task]) => saver.putWrites(first, w, task));
    await until(async () => (await storedWrites(threadId)).length === (await storedWrites(ref.threadId)).length);
    expect(statements - before).toBe(1);
    await release();
    await Promise.all([put, ...writes]);
    const got = (await saver.getTuple(first))!.pendingWrites;
    const want = (await saver.getTuple(ref.first))!.pendingWrites;
    expect(got).toEqual(want);
    expect(got).toContainEqual(["task-b", "x", "first"]);
    expect(got).toContainEqual(["task-a", "__interrupt__", { n: 2 }]);
    expect(got).toContainEqual(["task-c", "__resume__", "r3"]);
  });

  it("make a read of the lineage wait for them", async () => {
    const { threadId, first } = await thread("read-waits");
    const release = await holdHead(threadId);
    const put = saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000004" }), meta(0), { x: "-a2.00000004" });
    await untilWaiting(release);
    const writes = [saver.putWrites(first, [["a", 1]], "t1"), saver.putWrites(first, [["a", 2]], "t2")];
    // The read waits for the put and the writes queued behind it: it sees them all.
    const read = saver.getTuple(first);
    await release();
    const tuple = await read;
    expect(tuple?.pendingWrites?.map(([t]) => t).sort()).toEqual(["t1", "t2"]);
    await Promise.all([put, ...writes]);
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ x: 2 });
  });

  it("give each call its own outcome when the batch fails, in call order", async () => {
    const { threadId, first } = await thread("fail");
    // A trigger refuses one channel: alone, only that call fails.
    await db.pool.query(`CREATE OR REPLACE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.channel = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF; RETURN NEW; END $$`);
    await db.pool.query("CREATE TRIGGER refuse_boom BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION refuse_boom()");
    try {
      const release = await holdHead(threadId);
      const put = saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000005" }), meta(0), { x: "-a2.00000005" });
      await untilWaiting(release);
      const order: string[] = [];
      const calls = [
        saver.putWrites(first, [["a", 1]], "ok-1").then(() => order.push("ok-1")),
        saver.putWrites(first, [["boom", 1]], "bad").then(
          () => order.push("bad resolved"),
          (err: Error) => order.push(`bad: ${err.name}`),
        ),
        saver.putWrites(first, [["a", 3]], "ok-3").then(() => order.push("ok-3")),
      ];
      // The failure comes at once, while the put still waits; the successes after it, in call order.
      await until(async () => order.length > 0);
      expect(order).toEqual(["bad: DatabaseOperationError"]);
      await release();
      await put;
      await Promise.all(calls);
      // The failure comes at once; the successes in call order.
      expect(order).toEqual(["bad: DatabaseOperationError", "ok-1", "ok-3"]);
      expect((await storedWrites(threadId)).map((w) => w.task_id)).toEqual(["ok-1", "ok-3"]);
    } finally {
      await db.pool.query("DROP TRIGGER refuse_boom ON checkpoint_writes");
    }
  });

  it("do not queue behind other writes: parallel tasks' writes go out side by side", async () => {
    const { threadId, first } = await thread("side-by-side");
    const before = statements;
    await Promise.all([0, 1, 2].map((i) => saver.putWrites(first, [["a", i]], `p-${i}`)));
    expect(statements - before).toBe(3);
    expect((await storedWrites(threadId)).length).toBe(3);
  });

  it("leave other lineages alone", async () => {
    const a = await thread("lineage-a");
    const b = await thread("lineage-b");
    const release = await holdHead(a.threadId);
    const put = saver.put(a.first, makeCheckpoint({ x: 2 }, { x: "-a2.00000006" }), meta(0), { x: "-a2.00000006" });
    await untilWaiting(release);
    // Thread b has nothing in flight: its write goes at once and is done while a's put still waits.
    await saver.putWrites(b.first, [["a", 1]], "t");
    expect((await storedWrites(b.threadId)).length).toBe(1);
    await release();
    await put;
  });
});
