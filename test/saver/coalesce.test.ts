/**
 * Write coalescing (src/saver/threads.ts): while a write of a lineage is in flight,
 * its next putWrites calls wait and go out together in one statement. Each call
 * still settles only once its rows are stored, with the outcome it would have
 * had alone; reads wait for queued writes; results come in call order.
 *
 * A put is held in flight by locking its lineage's head row from another
 * connection (the put statement locks it FOR UPDATE first).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { uuid6, type PendingWrite } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DatabaseOperationError, migrate, PostgresSaver, ThreadDeletedError } from "../../src/index.js";
import { MAX_WAIT_MS } from "../../src/saver/threads.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";
import { recordStatements, type Sent } from "../helpers/statements.js";

const db = withTestDatabase("coalesce");
let pool: pg.Pool;
let saver: PostgresSaver;
/** Statements the saver ran (one pool checkout each). */
let statements = 0;
/** Every statement the saver's clients sent, newest last. */
let sent: Sent[];
/** Whether a statement sent is a put carrying writes (src/saver/sql/put.ts `putWithWrites`). */
const carries = (s: Sent) => s.text.includes("carried AS");

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 10 });
  pool.on("acquire", () => statements++);
  sent = recordStatements(pool);
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

/** A row trigger running `body` before each insert into checkpoint_writes; returns what drops it. */
async function writesTrigger(name: string, body: string): Promise<() => Promise<void>> {
  await db.pool.query(`CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body} RETURN NEW; END $$`);
  await db.pool.query(`CREATE TRIGGER ${name} BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION ${name}()`);
  return async () => {
    await db.pool.query(`DROP TRIGGER ${name} ON checkpoint_writes`);
  };
}

/** "stored", or the error the call failed with. */
const settle = (p: Promise<unknown>): Promise<unknown> => p.then(() => "stored", (e: unknown) => e);

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
    // No lock: the put's statement has left (a turn of the event loop later); the writes called
    // meanwhile queue behind it, and go out together once it is done (or at once if it already is).
    const put = saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000002" }), meta(0), { x: "-a2.00000002" });
    await new Promise((r) => setImmediate(r));
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
    const dropTrigger = await writesTrigger("refuse_boom", "IF NEW.channel = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF;");
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
      await dropTrigger();
    }
  });

  it("a lost connection under the batch: each call fails with it, retryable, and none is sent again", async () => {
    const { threadId, first } = await thread("lost");
    // A trigger holds the batch's statement until its backend is terminated.
    const dropTrigger = await writesTrigger("hold_slow", "IF NEW.channel = 'slow' THEN PERFORM pg_sleep(60); END IF;");
    try {
      const release = await holdHead(threadId);
      const put = saver.put(first, makeCheckpoint({ x: 2 }, { x: "-a2.00000007" }), meta(0), { x: "-a2.00000007" });
      await untilWaiting(release);
      const before = statements;
      const calls = [saver.putWrites(first, [["slow", 1]], "w-1"), saver.putWrites(first, [["a", 2]], "w-2")].map(settle);
      const sleeping = async () =>
        (await db.pool.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'")).rows.map((r: { pid: number }) => r.pid);
      await until(async () => (await sleeping()).length === 1);
      await db.pool.query("SELECT pg_terminate_backend($1)", [(await sleeping())[0]]);
      await release();
      await put;
      for (const err of await Promise.all(calls)) {
        expect(err).toBeInstanceOf(DatabaseOperationError);
        expect(err).toMatchObject({ operation: "putWrites", retryable: true, sqlState: "57P01" });
      }
      expect(statements - before).toBe(1);
      expect(await storedWrites(threadId)).toEqual([]);
    } finally {
      await dropTrigger();
    }
  });

  it("do not queue behind other writes: parallel tasks' writes called together go out together, at once", async () => {
    const { threadId, first } = await thread("side-by-side");
    const before = statements;
    await Promise.all([0, 1, 2].map((i) => saver.putWrites(first, [["a", i]], `p-${i}`)));
    expect(statements - before).toBe(1);
    expect((await storedWrites(threadId)).length).toBe(3);
    // One after another, each goes on its own (nothing waits for a write that may never come).
    for (const i of [3, 4]) await saver.putWrites(first, [["a", i]], `p-${i}`);
    expect(statements - before).toBe(3);
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

describe("putWrites followed by a put of the lineage (a step's writes, then its checkpoint)", () => {
  const next = (n: number) => makeCheckpoint({ x: n }, { x: `-a${n}.0000000${n}` });

  it("go out in the put's statement, each stored, the put stored", async () => {
    const { threadId, first } = await thread("carried");
    const before = statements;
    const writes = [saver.putWrites(first, [["a", 1], ["b", "one"]], "t1", "~p1"), saver.putWrites(first, [["a", 2]], "t2", "~p2")];
    const put = saver.put(first, next(2), meta(0), { x: "-a2.00000002" });
    await Promise.all([put, ...writes]);
    expect(statements - before).toBe(1);
    const tuple = await saver.getTuple(first);
    expect(tuple?.pendingWrites).toEqual([
      ["t1", "a", 1],
      ["t1", "b", "one"],
      ["t2", "a", 2],
    ]);
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ x: 2 });
  });

  it("a write's list by its elements, and the put's list holding the same elements: each element row once, both read back", async () => {
    const { threadId, first } = await thread("carried-elements");
    const messages = Array.from({ length: 5 }, (_, i) => ({ role: "user", text: `message ${i} `.repeat(40) }));
    const before = statements;
    const writes = saver.putWrites(first, [["messages", messages.slice(3)]], "t1");
    const cp = makeCheckpoint({ messages }, { messages: "-a2.00000002" });
    const put = saver.put(first, cp, meta(0), { messages: "-a2.00000002" });
    await Promise.all([put, writes]);
    expect(statements - before).toBe(1);
    const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__'", [threadId]);
    expect(rows[0]!.n).toBe(5);
    expect((await saver.getTuple(first))?.pendingWrites).toEqual([["t1", "messages", messages.slice(3)]]);
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ messages });
  });

  it("keep their own outcome when the put conflicts: the writes stored, the put refused", async () => {
    const { threadId, first } = await thread("carried-conflict");
    const linear = new PostgresSaver(pool, { lineage: "linear" });
    // The head moves on: a put on `first` is now a fork, which linear mode refuses.
    const second = await linear.put(first, next(2), meta(0), { x: "-a2.00000002" });
    const writes = linear.putWrites(first, [["a", 1]], "t1");
    const put = linear.put(first, next(3), meta(1), { x: "-a3.00000003" });
    await expect(put).rejects.toMatchObject({ name: "CheckpointConflictError" });
    await writes;
    expect((await linear.getTuple(first))?.pendingWrites).toEqual([["t1", "a", 1]]);
    expect((await linear.getTuple(cfg(threadId)))?.config.configurable?.checkpoint_id).toBe(second.configurable?.checkpoint_id);
  });

  it("give each call its own outcome when the statement fails, and the put its own", async () => {
    const { threadId, first } = await thread("carried-fail");
    const dropTrigger = await writesTrigger("refuse_boom", "IF NEW.channel = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF;");
    try {
      const ok = saver.putWrites(first, [["a", 1]], "ok-1");
      const bad = saver.putWrites(first, [["boom", 1]], "bad");
      const put = saver.put(first, next(2), meta(0), { x: "-a2.00000002" });
      await expect(bad).rejects.toMatchObject({ name: "DatabaseOperationError" });
      await Promise.all([ok, put]);
      expect((await storedWrites(threadId)).map((w) => w.task_id)).toEqual(["ok-1"]);
      expect((await saver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ x: 2 });
    } finally {
      await dropTrigger();
    }
  });

  it("a lost connection under the statement: the put and each write fail with it, retryable, and none is sent again", async () => {
    const { threadId, first } = await thread("carried-lost");
    const release = await holdHead(threadId);
    const before = statements;
    const writes = [saver.putWrites(first, [["a", 1]], "t1"), saver.putWrites(first, [["a", 2]], "t2")].map(settle);
    const put = settle(saver.put(first, next(2), meta(0), { x: "-a2.00000002" }));
    await untilWaiting(release);
    // What a crashed or restarted primary does to the statement waiting there.
    await db.pool.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%checkpoint_heads%'",
    );
    await release();
    const putError = await put;
    expect(putError).toBeInstanceOf(DatabaseOperationError);
    expect(putError).toMatchObject({ operation: "put", retryable: true, sqlState: "57P01" });
    for (const err of await Promise.all(writes)) {
      expect(err).toBeInstanceOf(DatabaseOperationError);
      expect(err).toMatchObject({ operation: "putWrites", retryable: true, sqlState: "57P01" });
    }
    // Sent again after its caller had failed, a put could land after a retry of the run read the
    // thread (the failover test's fork): the one statement was all.
    expect(statements - before).toBe(1);
    expect(await storedWrites(threadId)).toEqual([]);
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ x: 1 });
  });

  it("refused by the thread's tombstone: each call sent again alone, for its own outcome; the put stored", async () => {
    const { threadId, first } = await thread("carried-refused");
    await saver.deleteThread(threadId);
    const before = statements;
    // A write to the deleted history (refused for good), and one to a checkpoint made after the
    // deletion (refused until something starts the thread again: the put below does).
    const old = saver.putWrites(first, [["a", 1]], "old");
    const later = saver.putWrites(cfg(threadId, uuid6(-3)), [["a", 2]], "later");
    const put = saver.put(cfg(threadId), next(9), meta(-1), { x: "-a9.00000009" });
    const err = await old.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ThreadDeletedError);
    expect(err).toMatchObject({ operation: "putWrites", reason: "history" });
    await Promise.all([later, put]);
    // The put carrying both (the gate refused them, the put stored), then each write alone.
    expect(statements - before).toBe(3);
    expect((await storedWrites(threadId)).map((w) => w.task_id)).toEqual(["later"]);
    expect((await saver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ x: 9 });
  });

  it("element rows of the put and of its writes: each once, in key order, and those already stored touched (row_version + 1)", async () => {
    const { threadId, first } = await thread("carried-keys");
    const messages = (tag: string) => Array.from({ length: 6 }, (_, i) => ({ role: "user", text: `${tag} message ${i} `.repeat(40) }));
    const old = messages("old");
    // Stored by a write first: its element rows exist before the carrying statement.
    await saver.putWrites(first, [["messages", old]], "t0");
    const rowVersions = async () =>
      new Map(
        (
          await db.pool.query<{ version: string; row_version: number }>(
            "SELECT version, row_version FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__'",
            [threadId],
          )
        ).rows.map((r) => [r.version, Number(r.row_version)]),
      );
    const stored = await rowVersions();
    expect(stored.size).toBe(6);
    // Another saver (another process): it does not know these element rows are stored, so it sends them.
    const other = new PostgresSaver(pool);
    await other.getTuple(first); // its first statement checks the schema
    const fresh = messages("new");
    const before = statements;
    const from = sent.length;
    const writes = other.putWrites(first, [["messages", [...old, ...fresh.slice(0, 2)]]], "t1");
    const put = other.put(first, makeCheckpoint({ messages: fresh }, { messages: "-a2.00000002" }), meta(0), { messages: "-a2.00000002" });
    await Promise.all([writes, put]);
    expect(statements - before).toBe(1);
    const carrying = sent.slice(from).filter(carries);
    expect(carrying).toHaveLength(1);
    const [channels, versions] = [carrying[0]!.values[8] as string[], carrying[0]!.values[9] as string[]];
    const hashes = versions.filter((_, i) => channels[i] === "__elements__");
    expect(hashes).toEqual([...new Set(hashes)].sort());
    // The 6 old, and the 6 new (2 of them named by the write too).
    expect(hashes).toHaveLength(12);
    const after = await rowVersions();
    expect(after.size).toBe(12);
    for (const [hash, v] of stored) expect(after.get(hash)).toBe(v + 1);
    expect((await saver.getTuple(first))?.pendingWrites?.find(([task]) => task === "t1")?.[2]).toHaveLength(8);
  });
});

describe("statements per 10-node graph invoke", () => {
  const State = Annotation.Root({ items: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const builder: any = new StateGraph(State);
  for (let i = 0; i < 10; i++) builder.addNode(`n${i}`, () => ({ items: [`n${i}`] }));
  builder.addEdge(START, "n0");
  for (let i = 1; i < 10; i++) builder.addEdge(`n${i - 1}`, `n${i}`);
  builder.addEdge("n9", END);

  it("sync durability: each step's writes go out with the checkpoint that ends it (12 puts, 13 statements instead of 24)", async () => {
    const graph = builder.compile({ checkpointer: saver });
    await saver.getTuple(cfg(tid("warm"))); // the saver's schema check, once, before counting
    for (let run = 0; run < 3; run++) {
      const threadId = tid("graph-sync");
      const before = statements;
      const from = sent.length;
      const out = await graph.invoke({ items: [] }, { configurable: { thread_id: threadId }, durability: "sync" });
      expect(out.items).toHaveLength(10);
      const invoked = statements - before;
      const carrying = sent.slice(from).filter(carries).length;
      const history = [];
      for await (const t of saver.list(cfg(threadId))) history.push(t);
      expect(history).toHaveLength(12);
      // The read, 12 puts, and 11 putWrites calls. The ten nodes' writes are called with no put in
      // flight: each goes with the put that ends its step. The input's writes are called while the
      // input's put is in flight: they go with the next put, or alone if that put took longer than
      // the cap (MAX_WAIT_MS: a busy machine). So 13 statements, 14 at most.
      expect(carrying).toBeGreaterThanOrEqual(10);
      expect(invoked).toBe(1 + 12 + (11 - carrying));
    }
  });
});
