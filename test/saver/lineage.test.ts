/**
 * Lineage safety (row-version optimistic locking): concurrent writers on one
 * thread never silently fork it. Real parallel clients, real graphs.
 */
import { Annotation, StateGraph, START, END, MemorySaver } from "@langchain/langgraph";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CheckpointConflictError,
  CheckpointParentMissingError,
  DatabaseOperationError,
  migrate,
  PostgresSaver,
  withConflictRetry,
  type SaverEvent,
} from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { lockWaitingSql } from "../helpers/citus.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("lineage");
let pool: pg.Pool;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 20, application_name: "lineage-writers" });
});
afterAll(async () => {
  await pool.end();
});

function recorder() {
  const events: SaverEvent[] = [];
  return { events, onEvent: (e: SaverEvent) => events.push(e), of: (type: SaverEvent["type"]) => events.filter((e) => e.type === type) };
}

async function rows(table: string, threadId: string): Promise<number> {
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE thread_id = $1`, [threadId]);
  return rows[0].n;
}

async function heads(threadId: string): Promise<string[]> {
  const { rows } = await db.pool.query("SELECT checkpoint_id FROM checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns = ''", [threadId]);
  return rows.map((r) => r.checkpoint_id);
}

/** Puts a root and returns its config. */
async function start(saver: PostgresSaver, threadId: string) {
  const cp = makeCheckpoint({ x: "root" });
  return saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
}

/** A checkpoint that writes x; `inherits` adds versions of other channels it refers to without writing them. */
/** A checkpoint writing x; `inherits` holds channels at their parent's versions and values (which it does not write), as LangGraph's do. */
function child(value: string, inherits: Record<string, { version: string; value: unknown }> = {}) {
  const version = `${String(2).padStart(32, "0")}.${Math.random()}`;
  const values = Object.fromEntries(Object.entries(inherits).map(([ch, i]) => [ch, i.value]));
  const versions = Object.fromEntries(Object.entries(inherits).map(([ch, i]) => [ch, i.version]));
  return { cp: makeCheckpoint({ ...values, x: value }, { ...versions, x: version }), versions: { x: version } };
}

describe("linear mode, saver API", () => {
  it("of two concurrent children of the head exactly one commits; the loser writes nothing and names the winner", async () => {
    const rec = recorder();
    const saver = new PostgresSaver(pool, { lineage: "linear", onEvent: rec.onEvent });
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    const a = child("a");
    const b = child("b");
    const results = await Promise.allSettled([saver.put(h, a.cp, meta(0), a.versions), saver.put(h, b.cp, meta(0), b.versions)]);
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    const err = lost[0]!.reason as CheckpointConflictError;
    expect(err).toBeInstanceOf(CheckpointConflictError);
    expect(err.code).toBe("CHECKPOINT_CONFLICT");
    expect(err.retryable).toBe(true);
    const winnerId = (won[0] as PromiseFulfilledResult<{ configurable: { checkpoint_id: string } }>).value.configurable.checkpoint_id;
    expect(err).toMatchObject({ threadId, checkpointNs: "", expectedParent: h.configurable!.checkpoint_id, actualHead: winnerId });
    // Root + winner only: the loser's checkpoint and blob are nowhere.
    expect(await rows("checkpoints", threadId)).toBe(2);
    expect(await rows("checkpoint_blobs", threadId)).toBe(2);
    expect(await heads(threadId)).toEqual([winnerId]);
    expect(rec.of("conflict")).toHaveLength(1);
    expect(rec.of("fork")).toHaveLength(0);
  });

  it("two first puts of a new thread race for its head: one becomes the root, the other is a conflict naming it", async () => {
    for (let round = 0; round < 10; round++) {
      const saver = new PostgresSaver(pool, { lineage: "linear" });
      const threadId = uuid6(-3);
      const a = makeCheckpoint({ x: "a" }, { x: "1.a" });
      const b = makeCheckpoint({ x: "b" }, { x: "1.b" });
      const cfg = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
      const results = await Promise.allSettled([saver.put(cfg, a, meta(-1), a.channel_versions), saver.put(cfg, b, meta(-1), b.channel_versions)]);
      const won = results.filter((r): r is PromiseFulfilledResult<{ configurable?: { checkpoint_id?: string } }> => r.status === "fulfilled");
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
      expect(won).toHaveLength(1);
      expect(lost[0]!.reason).toBeInstanceOf(CheckpointConflictError);
      expect(lost[0]!.reason).toMatchObject({ reason: "head-moved", actualHead: won[0]!.value.configurable!.checkpoint_id });
      expect(await heads(threadId)).toEqual([won[0]!.value.configurable!.checkpoint_id]);
      expect(await rows("checkpoints", threadId)).toBe(1);
    }
  });

  it("rejects a root put into a non-empty lineage and a put into a deleted thread", async () => {
    const saver = new PostgresSaver(pool, { lineage: "linear" });
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    await expect(start(saver, threadId)).rejects.toMatchObject({ code: "CHECKPOINT_CONFLICT", expectedParent: undefined });
    await saver.deleteThread(threadId);
    // A deleted thread stays deleted (its tombstone, tombstones.ts).
    const c = child("after-delete");
    await expect(saver.put(h, c.cp, meta(0), c.versions)).rejects.toMatchObject({ code: "THREAD_DELETED", reason: "history" });
    // Once the tombstone is collected, linear lineage still needs its parent: gone, even with every value in the put.
    await pool.query("DELETE FROM checkpoint_tombstones WHERE thread_id = $1", [threadId]);
    await expect(saver.put(h, c.cp, meta(0), c.versions)).rejects.toMatchObject({
      code: "CHECKPOINT_PARENT_MISSING",
      parentCheckpointId: h.configurable!.checkpoint_id,
      missing: [],
    });
    expect(await rows("checkpoints", threadId)).toBe(0);
    expect(await rows("checkpoint_blobs", threadId)).toBe(0);
  });

  it("accepts a re-put of the head itself, and a deliberate fork with configurable.allow_fork", async () => {
    const rec = recorder();
    const saver = new PostgresSaver(pool, { lineage: "linear", onEvent: rec.onEvent });
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    const a = child("a");
    const ca = await saver.put(h, a.cp, meta(0), a.versions);
    await saver.put(h, a.cp, meta(0, { again: true }), a.versions); // same id: an update of the head
    expect((await saver.getTuple(ca))?.metadata).toMatchObject({ again: true });
    const b = child("b");
    const cb = await saver.put({ configurable: { ...h.configurable, allow_fork: true } }, b.cp, meta(0), b.versions);
    expect(await heads(threadId)).toEqual([cb.configurable!.checkpoint_id]);
    expect(rec.of("fork")).toEqual([
      expect.objectContaining({ displacedHead: ca.configurable!.checkpoint_id, parentCheckpointId: h.configurable!.checkpoint_id, deliberate: true }),
    ]);
  });
});

describe("branch mode, saver API", () => {
  it("a put whose parent is not the head commits, becomes the head, and emits a fork event", async () => {
    const rec = recorder();
    const saver = new PostgresSaver(pool, { onEvent: rec.onEvent });
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    const a = child("a");
    const ca = await saver.put(h, a.cp, meta(0), a.versions);
    const b = child("b");
    const cb = await saver.put(h, b.cp, meta(0), b.versions);
    expect((await saver.getTuple({ configurable: { thread_id: threadId } }))?.checkpoint.id).toBe(b.cp.id);
    expect(await heads(threadId)).toEqual([cb.configurable!.checkpoint_id]);
    expect(rec.of("fork")).toEqual([
      expect.objectContaining({ threadId, checkpointNs: "", checkpointId: b.cp.id, displacedHead: ca.configurable!.checkpoint_id, deliberate: false }),
    ]);
    // The head moved by compare-and-set on its row version (root, a, b: three moves);
    // the displaced checkpoint's row was not touched (checkpoints are insert-only).
    const { rows: hr } = await db.pool.query("SELECT checkpoint_id, row_version::int AS rv FROM checkpoint_heads WHERE thread_id = $1", [threadId]);
    expect(hr).toEqual([{ checkpoint_id: b.cp.id, rv: 3 }]);
    const { rows: r } = await db.pool.query("SELECT row_version::int AS rv FROM checkpoints WHERE thread_id = $1 AND checkpoint_id = $2", [threadId, a.cp.id]);
    expect(r[0]).toEqual({ rv: 1 });
  });

  it("two first puts of a new thread race for its head: both commit, the later one as the head, with a fork event", async () => {
    for (let round = 0; round < 10; round++) {
      const rec = recorder();
      const saver = new PostgresSaver(pool, { onEvent: rec.onEvent });
      const threadId = uuid6(-3);
      const a = makeCheckpoint({ x: "a" }, { x: "1.a" });
      const b = makeCheckpoint({ x: "b" }, { x: "1.b" });
      const cfg = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
      await Promise.all([saver.put(cfg, a, meta(-1), a.channel_versions), saver.put(cfg, b, meta(-1), b.channel_versions)]);
      expect(await rows("checkpoints", threadId)).toBe(2);
      const [head] = await heads(threadId);
      expect([a.id, b.id]).toContain(head);
      // The put that found the other's head displaced it, and said so.
      expect(rec.of("fork")).toEqual([expect.objectContaining({ checkpointId: head, displacedHead: head === a.id ? b.id : a.id })]);
    }
  });

  it("keeps exactly one head per lineage under 40 concurrent writers on separate connections", async () => {
    const saver = new PostgresSaver(pool);
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    const puts = Array.from({ length: 40 }, (_, i) => {
      const c = child(`w${i}`);
      return saver.put(h, c.cp, meta(0), c.versions);
    });
    await Promise.all(puts);
    expect(await heads(threadId)).toHaveLength(1);
    expect(await rows("checkpoints", threadId)).toBe(41);
  });

  it("a put whose parent was deleted under it (its tombstone since collected) is refused when it refers to values that went with it, and not retried", async () => {
    const rec = recorder();
    const saver = new PostgresSaver(pool, { onEvent: rec.onEvent });
    const threadId = uuid6(-3);
    const rootCp = makeCheckpoint({ x: "root", y: "kept" }, { x: "1.a", y: "1.b" });
    const h = await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, rootCp, meta(-1), rootCp.channel_versions);
    await saver.deleteThread(threadId);
    // While its tombstone is kept, the put is refused as continuing a deleted thread (test/saver/tombstones.test.ts).
    await pool.query("DELETE FROM checkpoint_tombstones WHERE thread_id = $1", [threadId]);
    const c = child("orphan", { y: { version: "1.b", value: "kept" } }); // y is inherited from the deleted root
    let attempts = 0;
    const err = await withConflictRetry(() => {
      attempts++;
      return saver.put(h, c.cp, meta(0), c.versions);
    }).catch((e: unknown) => e);
    expect(attempts).toBe(1);
    expect(err).toBeInstanceOf(CheckpointParentMissingError);
    expect(err).not.toBeInstanceOf(CheckpointConflictError);
    expect(err).toMatchObject({
      code: "CHECKPOINT_PARENT_MISSING",
      retryable: false,
      threadId,
      checkpointNs: "",
      checkpointId: c.cp.id,
      parentCheckpointId: h.configurable!.checkpoint_id,
      missing: [{ channel: "y", version: "1.b" }],
    });
    expect((err as Error).message).toContain('"y"@1.b');
    expect(await rows("checkpoints", threadId)).toBe(0);
    expect(await rows("checkpoint_blobs", threadId)).toBe(0);
    expect(rec.of("conflict")).toEqual([]);
    expect(rec.of("parentMissing")).toEqual([expect.objectContaining({ checkpointId: c.cp.id, missing: [{ channel: "y", version: "1.b" }] })]);
  });

  it("a put whose parent was never stored commits when every value it refers to is written by it or stored", async () => {
    const rec = recorder();
    const saver = new PostgresSaver(pool, { onEvent: rec.onEvent });
    const threadId = uuid6(-3);
    const rootCp = makeCheckpoint({ x: "root", y: "kept" }, { x: "1.a", y: "1.b" });
    const h = await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, rootCp, meta(-1), rootCp.channel_versions);
    // Its parent never reached the database (a run with durability "exit"), but y's value is stored.
    const c = child("new", { y: { version: "1.b", value: "kept" } });
    const unknownParent = { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: uuid6(-3) } };
    const saved = await saver.put(unknownParent, c.cp, meta(0), c.versions);
    const tuple = await saver.getTuple(saved);
    expect(tuple?.checkpoint.channel_values).toEqual({ x: "new", y: "kept" });
    expect(tuple?.parentConfig?.configurable?.checkpoint_id).toBe(unknownParent.configurable.checkpoint_id);
    expect(await heads(threadId)).toEqual([c.cp.id]);
    expect(rec.of("fork")).toEqual([expect.objectContaining({ checkpointId: c.cp.id, displacedHead: h.configurable!.checkpoint_id })]);
    // In linear mode the same put is refused: its parent must be the head.
    const linear = new PostgresSaver(pool, { lineage: "linear" });
    const d = child("linear", { y: { version: "1.b", value: "kept" } });
    await expect(linear.put(unknownParent, d.cp, meta(0), d.versions)).rejects.toMatchObject({ code: "CHECKPOINT_PARENT_MISSING", missing: [] });
    // Unless the invocation forks deliberately: then it is a branch put.
    const forked = await linear.put({ configurable: { ...unknownParent.configurable, allow_fork: true } }, d.cp, meta(0), d.versions);
    expect((await linear.getTuple(forked))?.checkpoint.channel_values).toEqual({ x: "linear", y: "kept" });
  });

  it("a put whose parent was never stored refers to no row for a channel it holds no value of (consumed, as a trigger is)", async () => {
    const saver = new PostgresSaver(pool);
    const threadId = uuid6(-3);
    const rootCp = makeCheckpoint({ x: "root" }, { x: "1.a" });
    await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, rootCp, meta(-1), rootCp.channel_versions);
    // "branch:to:n" is at a version no put stored a row for: it holds no value there, so nothing is missing.
    const c = child("new");
    c.cp.channel_versions["branch:to:n"] = `${String(3).padStart(32, "0")}.0`;
    const unknownParent = { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: uuid6(-3) } };
    const saved = await saver.put(unknownParent, c.cp, meta(0), c.versions);
    expect((await saver.getTuple(saved))?.checkpoint.channel_values).toEqual({ x: "new" });
    // A channel it holds a value of, at a version no row stores, is missing: refused, naming it.
    const d = child("other", { y: { version: "9.z", value: "lost" } });
    await expect(saver.put(unknownParent, d.cp, meta(0), d.versions)).rejects.toMatchObject({ code: "CHECKPOINT_PARENT_MISSING", missing: [{ channel: "y", version: "9.z" }] });
  });

  it("a parent that arrives after its child is stored, and the head stays on the child", async () => {
    // LangGraph 1.4 puts an "exit" run's stub parent without waiting for it, so the
    // final checkpoint (naming the stub) can commit first.
    const rec = recorder();
    const saver = new PostgresSaver(pool, { onEvent: rec.onEvent });
    const threadId = uuid6(-3);
    const stub = makeCheckpoint();
    const final = child("final");
    const cfg = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
    await saver.put({ configurable: { ...cfg.configurable, checkpoint_id: stub.id } }, final.cp, meta(0), final.versions);
    await saver.put(cfg, stub, meta(-2), {});
    expect(await heads(threadId)).toEqual([final.cp.id]);
    expect((await saver.getTuple(cfg))?.checkpoint.channel_values).toEqual({ x: "final" });
    expect((await saver.getTuple({ configurable: { ...cfg.configurable, checkpoint_id: stub.id } }))?.checkpoint.id).toBe(stub.id);
    expect(rec.of("fork")).toEqual([]);
    // Any other root put into the lineage is a fork, as before.
    const other = makeCheckpoint({ x: "other" }, { x: "1.other" });
    await saver.put(cfg, other, meta(-1), other.channel_versions);
    expect(await heads(threadId)).toEqual([other.id]);
    expect(rec.of("fork")).toEqual([expect.objectContaining({ checkpointId: other.id, displacedHead: final.cp.id })]);
  });

  it("the database itself refuses a second head", async () => {
    const saver = new PostgresSaver(pool);
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    const a = child("a");
    await saver.put(h, a.cp, meta(0), a.versions);
    const err = (await db.pool
      .query("INSERT INTO checkpoint_heads (thread_id, checkpoint_ns, checkpoint_id) VALUES ($1, '', $2)", [threadId, h.configurable!.checkpoint_id])
      .catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe("23505");
    // _p<n>: partitioned (TEST_PARTITIONS); _<n>: a Citus shard, named in the message only (a worker's error).
    expect(err.constraint ?? err.message).toMatch(/\bcheckpoint_heads(_p\d+)?_pkey(_\d+)?\b/);
  });
});

/** Waits until `n` of our writer connections wait on a lock; returns their pids. */
async function lockWaiters(n: number): Promise<number[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { rows } = await db.pool.query(
      `SELECT pid FROM ${lockWaitingSql()} a WHERE a.application_name = 'lineage-writers' AND a.pid <> pg_backend_pid()`,
    );
    if (rows.length >= n) return rows.map((r) => r.pid as number);
    if (Date.now() > deadline) throw new Error(`fewer than ${n} connections waiting on a lock after 30 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("deleteThread under a running graph", () => {
  it("a put in flight commits first, then the whole thread is gone, that put's checkpoint and blobs included", async () => {
    const saver = new PostgresSaver(pool);
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    // Hold the head's row lock, so the next put waits inside its statement.
    const blocker = await pool.connect();
    const c = child("in-flight");
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
      const put = saver.put(h, c.cp, meta(0), c.versions);
      await lockWaiters(1);
      // Deleted by another process (this saver would first wait for its own put in flight).
      const deleted = new PostgresSaver(pool).deleteThread(threadId);
      await lockWaiters(2);
      await blocker.query("ROLLBACK");
      await expect(put).resolves.toMatchObject({ configurable: { checkpoint_id: c.cp.id } });
      await deleted;
    } finally {
      await blocker.query("ROLLBACK").catch(() => undefined);
      blocker.release();
    }
    for (const table of ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_heads"]) expect(await rows(table, threadId), table).toBe(0);
    // The graph's next step continues the deleted thread: a typed error, nothing written (its tombstone, tombstones.ts).
    const next = child("after", { y: { version: c.cp.channel_versions.x as string, value: c.cp.channel_values.x } });
    await expect(saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: c.cp.id } }, next.cp, meta(1), next.versions)).rejects.toMatchObject({
      code: "THREAD_DELETED",
      reason: "history",
    });
    expect(await rows("checkpoints", threadId)).toBe(0);
  });
});

describe("a connection killed in the middle of a put", () => {
  it("leaves no partial rows, fails with a retryable typed error, and the next put succeeds", async () => {
    const saver = new PostgresSaver(pool);
    const threadId = uuid6(-3);
    const h = await start(saver, threadId);
    // Hold the head's row lock so the put blocks inside its statement.
    const blocker = await pool.connect();
    await blocker.query("BEGIN");
    await blocker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
    const c = child("doomed");
    const pending = saver.put(h, c.cp, meta(0), c.versions).catch((e: unknown) => e);
    const [victim] = await lockWaiters(1);
    expect(victim).toBeDefined();
    await db.pool.query("SELECT pg_terminate_backend($1::int)", [victim]); // ::int: Citus adds a bigint (global pid) overload
    const err = await pending;
    expect(err).toBeInstanceOf(DatabaseOperationError);
    expect((err as DatabaseOperationError).retryable).toBe(true);
    await blocker.query("ROLLBACK");
    blocker.release();
    expect(await rows("checkpoints", threadId)).toBe(1);
    expect(await rows("checkpoint_blobs", threadId)).toBe(1);
    const again = child("retried");
    const done = await saver.put(h, again.cp, meta(0), again.versions);
    expect((await saver.getTuple(done))?.checkpoint.channel_values).toEqual({ x: "retried" });
  });
});

// A chat-like graph: each invocation appends its message and a reply.
const Chat = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

function chatGraph(checkpointer: PostgresSaver | MemorySaver) {
  return new StateGraph(Chat)
    .addNode("think", async (s) => {
      await new Promise((r) => setTimeout(r, 2));
      return { log: [`thought after ${s.log.length}`] };
    })
    .addNode("reply", (s) => ({ log: [`reply to ${s.log[s.log.length - 2]}`] }))
    .addEdge(START, "think")
    .addEdge("think", "reply")
    .addEdge("reply", END)
    .compile({ checkpointer });
}

/** Every checkpoint of the thread's root namespace, oldest first, checked to be one parent-linked chain. */
async function assertOneChain(saver: PostgresSaver, threadId: string): Promise<number> {
  const tuples = [];
  for await (const t of saver.list({ configurable: { thread_id: threadId, checkpoint_ns: "" } })) tuples.push(t);
  tuples.reverse();
  expect(tuples[0]!.parentConfig).toBeUndefined();
  for (let i = 1; i < tuples.length; i++) {
    expect(tuples[i]!.parentConfig?.configurable?.checkpoint_id).toBe(tuples[i - 1]!.checkpoint.id);
  }
  return tuples.length;
}

describe("linear mode with real graphs", () => {
  for (const n of [2, 8, 16]) {
    it(`${n} concurrent invokes on one thread with withConflictRetry: every message exactly once, one chain`, async () => {
      const rec = recorder();
      const saver = new PostgresSaver(pool, { lineage: "linear", onEvent: rec.onEvent });
      const graph = chatGraph(saver);
      const threadId = uuid6(-3);
      const config = { configurable: { thread_id: threadId } };
      let retries = 0;
      await Promise.all(
        Array.from({ length: n }, (_, i) =>
          withConflictRetry(() => graph.invoke({ log: [`msg-${i}`] }, config), {
            attempts: 200,
            baseDelayMs: 5,
            maxDelayMs: 100,
            onRetry: () => retries++,
          }),
        ),
      );
      const state = await graph.getState(config);
      const log = state.values.log as string[];
      for (let i = 0; i < n; i++) expect(log.filter((m) => m === `msg-${i}`)).toHaveLength(1);
      expect(log).toHaveLength(3 * n);
      const length = await assertOneChain(saver, threadId);
      expect(length).toBe(4 * n); // per invoke: the input checkpoint and one per step (start, think, reply)
      console.log(`[lineage] linear, ${n} concurrent invokes: ${rec.of("conflict").length} conflicts, ${retries} retries, ${length} checkpoints in one chain`);
      if (n >= 8) expect(retries).toBeGreaterThan(0);
      expect(rec.of("fork")).toHaveLength(0);
    });
  }

  it("without retry every loser rejects with CheckpointConflictError and leaves no visible checkpoint", async () => {
    const saver = new PostgresSaver(pool, { lineage: "linear" });
    const graph = chatGraph(saver);
    const threadId = uuid6(-3);
    const config = { configurable: { thread_id: threadId } };
    await graph.invoke({ log: ["first"] }, config);
    const before = await rows("checkpoints", threadId);
    const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => graph.invoke({ log: [`race-${i}`] }, config)));
    const winners = results.filter((r) => r.status === "fulfilled").length;
    const losers = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(winners).toBeGreaterThanOrEqual(1);
    expect(losers.length).toBe(6 - winners);
    for (const l of losers) expect(l.reason).toBeInstanceOf(CheckpointConflictError);
    // Each winner added exactly its four checkpoints; losers added none.
    expect(await rows("checkpoints", threadId)).toBe(before + 4 * winners);
    const log = (await graph.getState(config)).values.log as string[];
    expect(log.filter((m) => m.startsWith("race-"))).toHaveLength(winners);
    await assertOneChain(saver, threadId);
  });
});

describe("branch mode with real graphs", () => {
  it("the same race commits every run and reports each displaced head with a fork event", async () => {
    const rec = recorder();
    const saver = new PostgresSaver(pool, { onEvent: rec.onEvent });
    const graph = chatGraph(saver);
    const threadId = uuid6(-3);
    const config = { configurable: { thread_id: threadId } };
    await graph.invoke({ log: ["first"] }, config);
    await Promise.all(Array.from({ length: 4 }, (_, i) => graph.invoke({ log: [`race-${i}`] }, config)));
    const forks = rec.of("fork") as Extract<SaverEvent, { type: "fork" }>[];
    expect(forks.length).toBeGreaterThan(0);
    const { rows: all } = await db.pool.query("SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1", [threadId]);
    const ids = new Set(all.map((r) => r.checkpoint_id));
    for (const f of forks) expect(ids.has(f.displacedHead)).toBe(true);
    expect(await heads(threadId)).toHaveLength(1);
    expect(ids.size).toBe(4 * 5);
  });

  it("time travel and updateState on an old checkpoint behave as with the in-memory saver", async () => {
    const run = async (saver: PostgresSaver | MemorySaver) => {
      const graph = chatGraph(saver);
      const config = { configurable: { thread_id: "tt" + Math.random() } };
      await graph.invoke({ log: ["one"] }, config);
      await graph.invoke({ log: ["two"] }, config);
      const history = [];
      for await (const s of graph.getStateHistory(config)) history.push(s);
      const old = history.find((s) => (s.values.log as string[]).length === 3)!; // after the first run
      await graph.invoke(null, old.config); // replay from there: a new branch
      const afterReplay = (await graph.getState(config)).values.log;
      const updated = await graph.updateState(old.config, { log: ["edited"] });
      await graph.invoke({ log: ["three"] }, updated);
      const final = (await graph.getState(config)).values.log;
      let count = 0;
      for await (const _ of graph.getStateHistory(config)) count++;
      return { afterReplay, final, count };
    };
    expect(await run(new PostgresSaver(pool))).toEqual(await run(new MemorySaver()));
  });
});

describe("linear mode and deliberate forks in a graph", () => {
  it("time travel without the flag is a conflict; with configurable.allow_fork it forks", async () => {
    const saver = new PostgresSaver(pool, { lineage: "linear" });
    const graph = chatGraph(saver);
    const config = { configurable: { thread_id: uuid6(-3) } };
    await graph.invoke({ log: ["one"] }, config);
    await graph.invoke({ log: ["two"] }, config);
    const history = [];
    for await (const s of graph.getStateHistory(config)) history.push(s);
    const old = history.find((s) => (s.values.log as string[]).length === 3)!;
    await expect(graph.updateState(old.config, { log: ["edited"] })).rejects.toBeInstanceOf(CheckpointConflictError);
    const forked = await graph.updateState({ configurable: { ...old.config.configurable, allow_fork: true } }, { log: ["edited"] });
    expect((await graph.getState(config)).values.log).toEqual([...(old.values.log as string[]), "edited"]);
    expect(forked.configurable?.checkpoint_id).toBeDefined();
  });
});
