/**
 * Tombstones (src/saver/tombstones.ts): after deleteThread, a put or putWrites
 * that continues the deleted history is refused with ThreadDeletedError and
 * writes nothing, in both lineage modes; a new conversation on the same id
 * starts cleanly; a deletion and a write racing each other never leave the
 * write's rows behind (the gate's lock, forced here with real connections).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { migrate, MsgpackSerializer, PostgresSaver, ThreadDeletedError, withConflictRetry, withRetry, type SaverEvent } from "../../src/index.js";
import { deleteLockName } from "../../src/saver/sql/gate.js";
import { Threads } from "../../src/saver/threads.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("tombstones");
let pool: pg.Pool;
let statements = 0;
const events: SaverEvent[] = [];
const savers: Record<"branch" | "linear", PostgresSaver> = {} as never;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 10 });
  pool.on("acquire", () => statements++);
  savers.branch = new PostgresSaver(pool, { onEvent: (e) => void events.push(e) });
  savers.linear = new PostgresSaver(pool, { lineage: "linear" });
});
afterAll(async () => {
  await pool?.end();
});

const cfg = (thread_id: string, checkpoint_id?: string, checkpoint_ns = ""): RunnableConfig => ({
  configurable: { thread_id, checkpoint_ns, ...(checkpoint_id ? { checkpoint_id } : {}) },
});

/** A thread of two checkpoints (with a write on the second); returns their configs. */
async function conversation(saver: PostgresSaver, threadId: string) {
  const first = await saver.put(cfg(threadId), makeCheckpoint({ x: 1 }, { x: "-a1.00000001" }), meta(-1), { x: "-a1.00000001" });
  const second = await saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000001" }), meta(0), { x: "-a2.00000001" });
  await saver.putWrites(second, [["x", 3]], "task-1");
  return { first, second };
}

async function rowsOf(threadId: string): Promise<Record<string, number>> {
  const count = async (table: string) => Number((await db.pool.query(`SELECT count(*) AS n FROM ${table} WHERE thread_id = $1`, [threadId])).rows[0].n);
  return {
    checkpoints: await count("checkpoints"),
    writes: await count("checkpoint_writes"),
    blobs: await count("checkpoint_blobs"),
    heads: await count("checkpoint_heads"),
  };
}
const NONE = { checkpoints: 0, writes: 0, blobs: 0, heads: 0 };

async function refusal(p: Promise<unknown>): Promise<ThreadDeletedError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ThreadDeletedError);
  return err as ThreadDeletedError;
}

describe.each(["branch", "linear"] as const)("after deleteThread (%s lineage)", (mode) => {
  it("leaves a tombstone holding the greatest checkpoint id, and the thread reads as absent", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    const { second } = await conversation(saver, threadId);
    // A write keyed to a checkpoint never stored (async durability) counts too.
    const later = uuid6(-3);
    await saver.putWrites(cfg(threadId, later), [["x", 4]], "task-2");
    await saver.deleteThread(threadId);
    const { rows } = await db.pool.query("SELECT last_checkpoint_id, deleted_at FROM checkpoint_tombstones WHERE thread_id = $1", [threadId]);
    expect(rows).toHaveLength(1);
    expect(rows[0].last_checkpoint_id).toBe(later > second.configurable!.checkpoint_id ? later : second.configurable!.checkpoint_id);
    expect(await rowsOf(threadId)).toEqual(NONE);
    expect(await saver.getTuple(cfg(threadId))).toBeUndefined();
    const listed = [];
    for await (const t of saver.list(cfg(threadId))) listed.push(t);
    expect(listed).toEqual([]);
  });

  it("refuses a put continuing the deleted history (its parent), and writes nothing", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    const { second } = await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    // It carries every value it refers to: branch mode would otherwise accept it without its parent.
    const err = await refusal(saver.put(second, makeCheckpoint({ x: 5 }, { x: "-a3.00000001" }), meta(1), { x: "-a3.00000001" }));
    expect(err).toMatchObject({ code: "THREAD_DELETED", retryable: false, threadId, operation: "put", reason: "history" });
    expect(await rowsOf(threadId)).toEqual(NONE);
  });

  it("refuses writes to a checkpoint of the deleted history, and writes nothing", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    const { second } = await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    const err = await refusal(saver.putWrites(second, [["x", 6]], "task-3"));
    expect(err).toMatchObject({ operation: "putWrites", reason: "history", checkpointId: second.configurable!.checkpoint_id });
    expect(await rowsOf(threadId)).toEqual(NONE);
  });

  it("refuses what a run made after the deletion while nothing has started the thread again: writes, a put with a parent, a subgraph's input checkpoint", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    const fresh = uuid6(-3); // newer than every id of the deleted history, never stored
    expect((await refusal(saver.putWrites(cfg(threadId, fresh), [["x", 7]], "task-4"))).reason).toBe("thread");
    expect((await refusal(saver.put(cfg(threadId, fresh), makeCheckpoint({ x: 8 }, { x: "-a9.00000001" }), meta(5), { x: "-a9.00000001" }))).reason).toBe("thread");
    // With sync or async durability a subgraph stores its input checkpoint first, naming a root checkpoint the
    // deleted run never got to store (LangGraph makes no put after a refused one).
    const sub = cfg(threadId, undefined, `child:${uuid6(-3)}`);
    const subMeta = meta(-1, { parents: { "": fresh } });
    expect((await refusal(saver.put(sub, makeCheckpoint({ y: 1 }, { y: "-a1.00000001" }), subMeta, { y: "-a1.00000001" }))).reason).toBe("thread");
    expect(await rowsOf(threadId)).toEqual(NONE);
  });

  it("a lineage in another namespace naming no enclosing graph (not LangGraph's subgraph) starts on a deleted thread, as it did before it", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    const ns = cfg(threadId, undefined, "notes");
    const first = await saver.put(ns, makeCheckpoint({ y: 1 }, { y: "-a1.00000001" }), meta(-1), { y: "-a1.00000001" });
    expect((await saver.getTuple(ns))?.checkpoint.id).toBe(first.configurable!.checkpoint_id);
  });

  it("refuses a subgraph's checkpoint that names a root checkpoint of the deleted history", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    const { second } = await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    const sub = cfg(threadId, undefined, `child:${uuid6(-3)}`);
    const subMeta = meta(1, { parents: { "": second.configurable!.checkpoint_id } });
    expect((await refusal(saver.put(sub, makeCheckpoint({ y: 1 }, { y: "-a1.00000001" }), subMeta, { y: "-a1.00000001" }))).reason).toBe("history");
    expect(await rowsOf(threadId)).toEqual(NONE);
  });

  it("keeps a subgraph's checkpoint put before the root checkpoint it names (exit durability); when that root put is refused, what was stored under it goes", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    const { second } = await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    // A run that outlived the deletion, with exit durability: a subgraph's last checkpoint (source "loop", no
    // parent) comes first, naming the root checkpoint the run puts last. Nothing yet tells it from a new
    // conversation's: it is stored.
    const root = makeCheckpoint({ x: 10 }, { x: "-a3.00000001" });
    const ns = `child:${uuid6(-3)}`;
    const subLast = await saver.put(cfg(threadId, undefined, ns), makeCheckpoint({ y: 1 }, { y: "-a1.00000001" }), meta(1, { parents: { "": root.id } }), {
      y: "-a1.00000001",
    });
    await saver.putWrites(subLast, [["y", 2]], "task-7");
    const nested = cfg(threadId, undefined, `${ns}|grandchild:${uuid6(-3)}`);
    await saver.put(nested, makeCheckpoint({ z: 1 }, { z: "-a1.00000001" }), meta(0, { parents: { "": root.id, [ns]: subLast.configurable!.checkpoint_id } }), {
      z: "-a1.00000001",
    });
    await saver.putWrites(cfg(threadId, root.id), [["x", 11]], "task-8"); // the root's pending writes find the subgraph's head
    expect((await rowsOf(threadId)).checkpoints).toBe(2);
    // The root put continues the deleted history: refused, and it takes along what was stored under it.
    expect((await refusal(saver.put(second, root, meta(1), { x: "-a3.00000001" }))).reason).toBe("history");
    expect(await rowsOf(threadId)).toEqual(NONE);
    expect((await refusal(saver.putWrites(subLast, [["y", 3]], "task-9"))).reason).toBe("thread");
    expect(await rowsOf(threadId)).toEqual(NONE);
  });

  it("a new conversation's subgraph checkpoint put before its root (exit durability) is kept, with its writes", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    const root = makeCheckpoint({ x: 1 }, { x: "-a1.00000002" });
    const sub = cfg(threadId, undefined, `child:${uuid6(-3)}`);
    const subLast = await saver.put(sub, makeCheckpoint({ y: 1 }, { y: "-a1.00000001" }), meta(1, { parents: { "": root.id } }), { y: "-a1.00000001" });
    await saver.putWrites(subLast, [["y", 2]], "task-10");
    await saver.put(cfg(threadId), root, meta(1), { x: "-a1.00000002" });
    expect((await saver.getTuple(sub))?.pendingWrites).toEqual([["task-10", "y", 2]]);
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.id).toBe(root.id);
    expect((await rowsOf(threadId)).checkpoints).toBe(2);
  });

  it("lets a new conversation start on the same id, and carry on in every namespace", async () => {
    const saver = savers[mode];
    const threadId = tid("tomb");
    const old = await conversation(saver, threadId);
    await saver.deleteThread(threadId);
    const again = await conversation(saver, threadId);
    const sub = cfg(threadId, undefined, `child:${uuid6(-3)}`);
    const subFirst = await saver.put(sub, makeCheckpoint({ y: 1 }, { y: "-a1.00000001" }), meta(-1, { parents: { "": again.second.configurable!.checkpoint_id } }), {
      y: "-a1.00000001",
    });
    await saver.putWrites(subFirst, [["y", 2]], "task-5");
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.id).toBe(again.second.configurable!.checkpoint_id);
    expect((await saver.getTuple(sub))?.pendingWrites).toEqual([["task-5", "y", 2]]);
    // The deleted history stays refused meanwhile.
    expect((await refusal(saver.putWrites(old.second, [["x", 9]], "task-6"))).reason).toBe("history");
    expect((await rowsOf(threadId)).checkpoints).toBe(3);
  });
});

it("a refusal is reported as an event, and neither withRetry nor withConflictRetry retries it", async () => {
  const saver = savers.branch;
  const threadId = tid("tomb");
  const { second } = await conversation(saver, threadId);
  await saver.deleteThread(threadId);
  expect(events).toContainEqual(expect.objectContaining({ type: "deleteThread", threadId, checkpoints: 2, writes: 1, blobs: 2 }));
  let calls = 0;
  const attempt = () => {
    calls++;
    return saver.putWrites(second, [["x", 1]], "task-7");
  };
  await refusal(withRetry(attempt, { initialDelayMs: 1 }));
  await refusal(withConflictRetry(attempt, { baseDelayMs: 1 }));
  expect(calls).toBe(2);
  expect(events).toContainEqual(expect.objectContaining({ type: "deletedThreadWrite", threadId, operation: "putWrites", reason: "history" }));
});

it("a thread that never held anything gets a tombstone too, and a new conversation on it starts", async () => {
  const saver = savers.branch;
  const threadId = tid("tomb");
  await saver.deleteThread(threadId);
  const { rows } = await db.pool.query("SELECT last_checkpoint_id FROM checkpoint_tombstones WHERE thread_id = $1", [threadId]);
  expect(rows).toEqual([{ last_checkpoint_id: null }]);
  expect((await refusal(saver.putWrites(cfg(threadId, uuid6(-3)), [["x", 1]], "t"))).reason).toBe("thread");
  await conversation(saver, threadId);
  expect((await rowsOf(threadId)).checkpoints).toBe(2);
});

it("put and putWrites stay one statement each, on a thread with a tombstone and without", async () => {
  const saver = savers.branch;
  for (const deleted of [false, true]) {
    const threadId = tid("tomb");
    if (deleted) {
      await conversation(saver, threadId);
      await saver.deleteThread(threadId);
    }
    let before = statements;
    const first = await saver.put(cfg(threadId), makeCheckpoint({ x: 1 }, { x: "-a1.00000001" }), meta(-1), { x: "-a1.00000001" });
    expect(statements - before).toBe(1);
    before = statements;
    const second = await saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000001" }), meta(0), { x: "-a2.00000001" });
    expect(statements - before).toBe(1);
    before = statements;
    await saver.putWrites(second, [["x", 3]], "task");
    expect(statements - before).toBe(1);
  }
});

describe("a deletion and a write at the same time (real connections, forced orders)", () => {
  /** Wait until `n` locks on the thread's deletion lock are `granted` (or waited for) in `mode`. */
  async function deletionLocks(threadId: string, n: number, granted: boolean, mode = "%"): Promise<void> {
    for (;;) {
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND classid::int = hashtext($1) AND objid::int = hashtext($2) AND objsubid = 2 AND granted = $3 AND mode LIKE $4`,
        [deleteLockName("public"), threadId, granted, mode],
      );
      if (rows[0].n >= n) return;
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  const advisoryWaiters = (threadId: string, n: number) => deletionLocks(threadId, n, false);

  /**
   * A deletion of `threadId` by another process, holding the thread's deletion lock as deleteThread
   * does; `finish()` writes the tombstone, deletes the rows and commits; `end()` releases the connection.
   */
  async function holdDeletion(threadId: string) {
    const deleter = await db.pool.connect();
    await deleter.query("BEGIN");
    await deleter.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [deleteLockName("public"), threadId]);
    return {
      deleter,
      async finish(): Promise<void> {
        await deleter.query(
          "INSERT INTO checkpoint_tombstones (thread_id, last_checkpoint_id) SELECT $1, max(checkpoint_id) FROM checkpoints WHERE thread_id = $1",
          [threadId],
        );
        for (const table of ["checkpoint_heads", "checkpoint_writes", "checkpoint_blobs", "checkpoints"]) {
          await deleter.query(`DELETE FROM ${table} WHERE thread_id = $1`, [threadId]);
        }
        await deleter.query("COMMIT");
      },
      async end(): Promise<void> {
        await deleter.query("ROLLBACK").catch(() => undefined);
        deleter.release();
      },
    };
  }

  it("a write that reaches its lock while a deletion holds the thread waits, then sees the tombstone; it held no row lock meanwhile", async () => {
    const saver = savers.branch;
    const threadId = tid("race");
    const { second } = await conversation(saver, threadId);
    const deletion = await holdDeletion(threadId);
    try {
      // The write first, on its own (a put called with it would carry it: the test below).
      const writes = saver.putWrites(second, [["x", 6]], "task-race");
      await advisoryWaiters(threadId, 1);
      const put = saver.put(second, makeCheckpoint({ x: 5 }, { x: "-a3.00000001" }), meta(1), { x: "-a3.00000001" });
      const settled = Promise.allSettled([put, writes]);
      await advisoryWaiters(threadId, 2);
      // The waiting put holds no lock on the head row: the deletion can take it (no deadlock).
      await deletion.deleter.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE NOWAIT", [threadId]);
      await deletion.finish();
      const [p, w] = await settled;
      expect(p.status === "rejected" && p.reason).toBeInstanceOf(ThreadDeletedError);
      expect(w.status === "rejected" && w.reason).toBeInstanceOf(ThreadDeletedError);
      expect(await rowsOf(threadId)).toEqual(NONE);
    } finally {
      await deletion.end();
    }
  });

  it("a put carrying writes (threads.ts) that reaches its lock while a deletion holds the thread waits, then both see the tombstone", async () => {
    const saver = savers.branch;
    const threadId = tid("race");
    const { second } = await conversation(saver, threadId);
    const deletion = await holdDeletion(threadId);
    try {
      const before = statements;
      const writes = saver.putWrites(second, [["x", 6]], "task-race");
      const put = saver.put(second, makeCheckpoint({ x: 5 }, { x: "-a3.00000001" }), meta(1), { x: "-a3.00000001" });
      const settled = Promise.allSettled([put, writes]);
      await advisoryWaiters(threadId, 1);
      expect(statements - before).toBe(1);
      await deletion.finish();
      const [p, w] = await settled;
      expect(p.status === "rejected" && p.reason).toMatchObject({ name: "ThreadDeletedError", operation: "put", reason: "history" });
      // Refused in the put's statement, then sent alone for its own refusal.
      expect(w.status === "rejected" && w.reason).toMatchObject({ name: "ThreadDeletedError", operation: "putWrites", reason: "history" });
      expect(await rowsOf(threadId)).toEqual(NONE);
    } finally {
      await deletion.end();
    }
  });

  it("deleteThread waits for a write (of another process) that holds the thread's lock, then deletes what it stored", async () => {
    const saver = savers.branch;
    const threadId = tid("race");
    const { second } = await conversation(saver, threadId);
    // Hold a put in flight after its gate: it waits for the head row, locked here.
    const locker = await db.pool.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
      const put = saver.put(second, makeCheckpoint({ x: 5 }, { x: "-a3.00000001" }), meta(1), { x: "-a3.00000001" });
      await deletionLocks(threadId, 1, true, "ShareLock");
      // Another saver deletes (as another process would): this one would first wait for its own put.
      const deletion = new PostgresSaver(pool).deleteThread(threadId);
      await advisoryWaiters(threadId, 1);
      await locker.query("COMMIT");
      await put;
      await deletion;
      expect(await rowsOf(threadId)).toEqual(NONE);
      const { rows } = await db.pool.query("SELECT last_checkpoint_id FROM checkpoint_tombstones WHERE thread_id = $1", [threadId]);
      expect(rows).toHaveLength(1);
    } finally {
      await locker.query("ROLLBACK").catch(() => undefined);
      locker.release();
    }
  });

  it("deleteThread waits for this saver's writes already issued on the thread, also one not yet at the database (a conversation's first put)", async () => {
    // The put is held in its serializer: called, not yet sent. Were the deletion not to wait for it,
    // it would find nothing, and the put (a root: it starts a conversation) would land afterwards.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let serializing!: () => void;
    const reached = new Promise<void>((r) => (serializing = r));
    const inner = new MsgpackSerializer();
    const serde = {
      dumpsTyped: async (value: unknown) => {
        serializing();
        await held;
        return inner.dumpsTyped(value);
      },
      loadsTyped: (type: string, bytes: Uint8Array | string) => inner.loadsTyped(type, bytes),
    };
    const saver = new PostgresSaver(pool, { serde });
    const threadId = tid("unsent");
    const put = saver.put(cfg(threadId), makeCheckpoint({ x: 1 }, { x: "-a1.00000001" }), meta(-1), { x: "-a1.00000001" });
    await reached;
    let deleted = false;
    const deletion = saver.deleteThread(threadId).then(() => void (deleted = true));
    // The deletion is waiting for the put (it has not deleted anything, nor left a tombstone).
    await new Promise((r) => setImmediate(r));
    expect(deleted).toBe(false);
    release();
    await put;
    await deletion;
    expect(await rowsOf(threadId)).toEqual(NONE);
    const { rows } = await db.pool.query("SELECT last_checkpoint_id FROM checkpoint_tombstones WHERE thread_id = $1", [threadId]);
    expect(rows).toEqual([{ last_checkpoint_id: expect.any(String) }]);
  });

  it("stress: puts and writes racing deleteThread leave nothing of the deleted history", async () => {
    const saver = savers.branch;
    for (let round = 0; round < 20; round++) {
      const threadId = tid("stress");
      let config = (await conversation(saver, threadId)).second;
      const writer = (async () => {
        for (let i = 0; i < 20; i++) {
          const v = `-a${(i + 3).toString(36)}.00000001`;
          try {
            await saver.putWrites(config, [["x", i]], `t-${i}`);
            config = await saver.put(config, makeCheckpoint({ x: i }, { x: v }), meta(i + 1), { x: v });
          } catch (err) {
            expect(err).toBeInstanceOf(ThreadDeletedError);
            return;
          }
        }
      })();
      await new Promise((r) => setTimeout(r, round % 5));
      await saver.deleteThread(threadId);
      await writer;
      expect(await rowsOf(threadId)).toEqual(NONE);
    }
  });
});

/**
 * A new conversation's writes refused ('thread') because the put that starts it had not committed
 * when they were gated are sent again: when that put was still in flight as the refusal came back,
 * and also when it settled in between (a put slower than the writes' wait behind it, as on Citus,
 * where a deleted-run test met it). The rule, on the saver's ordering object itself: the timing it
 * needs cannot be held open from outside.
 */
describe("writes refused for a thread not yet started again", () => {
  const cfg = (thread_id: string) => ({ configurable: { thread_id, checkpoint_ns: "" } });

  it("are sent again when a put of the thread settled after they were called, not when none did", async () => {
    const threads = new Threads(async () => undefined);
    // The refused write, still in flight (as it is while its refusal is handled).
    let settle!: () => void;
    const write = threads.write(cfg("t"), () => new Promise<void>((resolve) => (settle = resolve)));
    const since = threads.putsDone("t");
    void threads.put(cfg("t"), async () => "stored");
    await vi.waitFor(() => expect(threads.putsDone("t")).toBe(since + 1));
    // Nothing in flight now, but a put settled since the write was called: try again.
    expect(await threads.putsSettled("t", since)).toBe(true);
    // No put since: nothing has started the thread for it.
    expect(await threads.putsSettled("t", threads.putsDone("t"))).toBe(false);
    settle();
    await write;
  });
});
