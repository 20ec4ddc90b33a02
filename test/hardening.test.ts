/**
 * Issue #15: no role, input or failing handler can escalate, crash the process
 * or corrupt a thread. One describe per row of the table; rows that
 * need real roles are elsewhere (row 1 in test/db/trust.test.ts, row 11 in
 * test/db/privileges.test.ts), and row 5, encryption bound to its row, is in
 * test/serde/encryption.test.ts. Real Postgres throughout; crash tests run a child
 * process and check its exit.
 */
import { HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { Annotation, DeltaValue, END, START, StateGraph, StateSchema } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { CheckpointConflictError, DatabaseOperationError, history, HistoryCorruptError, InvalidInputError, InvalidOptionsError, migrate, MsgpackSerializer, PayloadTooLargeError, PostgresSaver, prune, type SaverEvent } from "../src/index.js";
import { makeCheckpoint, meta } from "./helpers/checkpoints.js";
import { runScript } from "./helpers/cli.js";
import { testPool, withTestDatabase } from "./helpers/db.js";

const db = withTestDatabase("hardening");
let saver: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool);
});

const cfg = (thread_id: string, checkpoint_ns = ""): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns } });

/** A one-checkpoint thread whose channel `big` holds `text` as a stored "json" value (as the official saver wrote it). */
async function threadWithJsonBlob(text: string): Promise<string> {
  const thread = `json-${uuid6(-3)}`;
  const cp = makeCheckpoint({ big: "placeholder" }, { big: "v1" });
  await saver.put(cfg(thread), cp, meta(-1), cp.channel_versions);
  await db.pool.query("UPDATE checkpoint_blobs SET type = 'json', value = convert_to($2, 'UTF8') WHERE thread_id = $1 AND channel = 'big'", [thread, text]);
  return thread;
}

describe("row 2: JSON values of any size read back (iterative walks)", () => {
  it("a 300,000-element array, a 300,000-key object and 100,000 levels of nesting, read through the saver", async () => {
    const n = 300_000;
    const array = Array.from({ length: n }, (_, i) => i);
    const object: Record<string, number> = {};
    for (let i = 0; i < n; i++) object[`k${i}`] = i;
    const depth = 100_000;
    const text = `{"array":${JSON.stringify(array)},"object":${JSON.stringify(object)},"deep":${"[".repeat(depth)}1${"]".repeat(depth)}}`;
    const thread = await threadWithJsonBlob(text);
    const value = (await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.big as { array: number[]; object: Record<string, number>; deep: unknown };
    expect(value.array).toHaveLength(n);
    expect(value.array[n - 1]).toBe(n - 1);
    expect(Object.keys(value.object)).toHaveLength(n);
    expect(value.object[`k${n - 1}`]).toBe(n - 1);
    let level = 0;
    let node: unknown = value.deep;
    while (Array.isArray(node)) {
      level++;
      node = node[0];
    }
    expect({ level, leaf: node }).toEqual({ level: depth, leaf: 1 });
  });
});

describe("row 8: JSON rows with a __proto__ key come back as plain objects", () => {
  const serde = new MsgpackSerializer();
  const human = { lc: 1, type: "constructor", id: ["langchain_core", "messages", "HumanMessage"], kwargs: { content: "hi" } };

  it("a __proto__ key holding a LangChain record is an own property, never the prototype", async () => {
    const thread = await threadWithJsonBlob(`{"__proto__":${JSON.stringify(human)},"a":1}`);
    const value = (await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.big as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(value).not.toBeInstanceOf(HumanMessage);
    expect(Object.prototype.hasOwnProperty.call(value, "__proto__")).toBe(true);
    // The value under the key is revived from the documented form, as data.
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")!.value).toBeInstanceOf(HumanMessage);
    expect(value.a).toBe(1);
  });

  it("inside a message's kwargs, in lc:2 records and in escaped data alike", async () => {
    const text = `[
      {"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],
       "kwargs":{"content":"hi","additional_kwargs":{"__proto__":{"polluted":true},"x":{"__lc_escaped__":{"__proto__":{"lc":2,"type":"constructor","id":["Map"],"args":[[]]}}}}}},
      {"__proto__":{"lc":2,"type":"constructor","id":["Map"],"args":[[]]}},
      {"__proto__":[1,2]}
    ]`;
    const [message, map, array] = (await serde.loadsTyped("json", text)) as [HumanMessage, Record<string, unknown>, Record<string, unknown>];
    expect(message).toBeInstanceOf(HumanMessage);
    const extra = message.additional_kwargs as Record<string, unknown>;
    expect(Object.getPrototypeOf(extra)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(extra, "__proto__")!.value).toEqual({ polluted: true });
    expect(Object.getPrototypeOf(extra.x)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(map)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(map, "__proto__")!.value).toBeInstanceOf(Map);
    expect(Array.isArray(array)).toBe(false);
    expect(Object.getPrototypeOf(array)).toBe(Object.prototype);
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it("LangChain secrets in kwargs are refused, never looked up", async () => {
    const text = JSON.stringify({ ...human, kwargs: { content: { lc: 1, type: "secret", id: ["PATH"] } } });
    await expect(serde.loadsTyped("json", text)).rejects.toMatchObject({ code: "DESERIALIZATION_FAILED" });
  });
});

describe("row 10: prune({ threadIds }) validates ids like every other id", () => {
  it("a lone surrogate is a typed error naming the option, and nothing is pruned (not the U+FFFD thread either)", async () => {
    const thread = "\uFFFD";
    let config = cfg(thread);
    for (let step = -1; step < 3; step++) {
      const cp = makeCheckpoint({ x: step }, { x: `${String(step + 2).padStart(32, "0")}.5` });
      config = await saver.put(config, cp, meta(step), cp.channel_versions);
    }
    const count = async () => Number((await db.pool.query("SELECT count(*) FROM checkpoints WHERE thread_id = $1", [thread])).rows[0].count);
    expect(await count()).toBe(4);
    const error = await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: ["ok", "\uD800"] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as InvalidOptionsError).option).toBe("threadIds[1]");
    expect(await count()).toBe(4);
  });
});

/** Polls `probe` until it returns a value (not undefined); fails after `timeoutMs`. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("row 3: a connection the library opened dies: a typed, retryable rejection, never a crash", () => {
  it("migrate({ connectionString }) killed while queued on the migration lock (child process)", async () => {
    const schema = "lock_wait";
    const holder = await db.pool.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock(hashtext('langgraph-checkpoint-pg:migrate'), hashtext(current_database() || '.' || $1))", [schema]);
      const child = runScript("test/fixtures/hardening/migrate.ts", [db.url, schema]);
      const pid = await waitFor("the child's migration to queue on the lock", async () => {
        const { rows } = await db.pool.query(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'langgraph-checkpoint-pg:migrate' AND wait_event_type = 'Lock'",
        );
        return rows[0]?.pid as number | undefined;
      });
      await db.pool.query("SELECT pg_terminate_backend($1)", [pid]);
      const run = await child;
      expect(run.stderr).not.toMatch(/Unhandled|uncaught/i);
      expect({ code: run.code, result: JSON.parse(run.stdout.trim()) }).toEqual({
        code: 0,
        result: { ok: false, name: "MigrationError", code: "MIGRATION_FAILED", retryable: true },
      });
    } finally {
      await holder.query("ROLLBACK");
      holder.release();
    }
    // Nothing was applied; a retry succeeds.
    expect((await migrate({ pool: db.pool, schema })).fromVersion).toBe(0);
  });
});

describe("row 4: onEvent / onProgress handlers that throw or reject are contained", () => {
  it("the operations' outcomes are unchanged, the process does not crash, stderr reports each handler once (child process)", async () => {
    const run = await runScript("test/fixtures/hardening/handlers.ts", [db.url, "handlers"]);
    expect(run.stderr).not.toMatch(/Unhandled|uncaught/i);
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout.trim()) as { results: unknown[]; received: string[]; count: number };
    // migrate, then each saver's put/putWrites/getTuple (one pending write), prune's threads, upgradeState's rewrites.
    expect(out.results).toEqual([expect.any(Number), 1, 1, 1, 1, 4, 0]);
    // onHandlerError got every failure of its saver's handler (a put and a putWrites event), each with its event type.
    expect(out.received).toEqual(["onEvent:put:reported onEvent failed", "onEvent:putWrites:reported onEvent failed"]);
    expect(out.count).toBe(2);
    // Without onHandlerError: one warning per failing handler, however often it failed.
    const warnings = run.stderr.split("\n").filter((line) => line.includes("CheckpointerHandlerWarning"));
    const about = (text: string) => warnings.filter((w) => w.includes(text)).length;
    expect(about("migrate onEvent failed")).toBe(1);
    expect(about("saver onEvent failed")).toBe(1); // failed on 6 events of two puts
    expect(about("sync onEvent failed")).toBe(1);
    expect(about("progress failed")).toBe(1); // prune's and upgradeState's: the same function
    expect(about("onHandlerError handler failed")).toBe(1);
    expect(warnings).toHaveLength(5);
  });
});

describe("row 7: list() metadata filters match exactly", () => {
  const thread = "filters";
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    // Oldest first: each impostor is newer than the row it imitates, so `limit: 1` meets it first.
    const metas: [string, Record<string, unknown>][] = [
      ["nul", { tag: "a\u0000b" }],
      ["fffd", { tag: "a\uFFFDb" }],
      ["lone", { tag: "a\uD800b" }],
      ["bigint", { tag: 5n }],
      ["five", { tag: "5" }],
      ["date", { when: new Date(0) }],
      ["iso", { when: new Date(0).toISOString() }],
      ["nulKey", { "k\u0000ey": 1 }],
      ["fffdKey", { "k\uFFFDey": 1 }],
    ];
    let config = cfg(thread);
    for (const [name, extra] of metas) {
      const cp = makeCheckpoint();
      ids[name] = cp.id;
      config = await saver.put(config, cp, meta(0, extra), {});
    }
  });
  const list = async (filter: Record<string, unknown>, limit?: number) => {
    const out: string[] = [];
    for await (const t of saver.list(cfg(thread), { filter, limit })) out.push(Object.keys(ids).find((k) => ids[k] === t.checkpoint.id)!);
    return out;
  };

  it("NUL, U+FFFD and lone surrogates in values are told apart, also with limit 1 (paging goes on past look-alikes)", async () => {
    expect(await list({ tag: "a\u0000b" }, 1)).toEqual(["nul"]);
    expect(await list({ tag: "a\u0000b" })).toEqual(["nul"]);
    expect(await list({ tag: "a\uFFFDb" })).toEqual(["fffd"]);
    expect(await list({ tag: "a\uD800b" }, 1)).toEqual(["lone"]);
  });

  it("a key holding NUL is matched exactly, without a SQLSTATE error", async () => {
    expect(await list({ "k\u0000ey": 1 })).toEqual(["nulKey"]);
    expect(await list({ "k\uFFFDey": 1 })).toEqual(["fffdKey"]);
  });

  it("a string never matches a bigint or a Date stored under the same key", async () => {
    expect(await list({ tag: "5" })).toEqual(["five"]);
    expect(await list({ when: new Date(0).toISOString() })).toEqual(["iso"]);
  });

  it("unsupported values and nesting beyond the limit are typed errors naming the key, before any SQL", async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const bad: [string, unknown][] = [
      ["tag", 5n],
      ["when", new Date(0)],
      ["f", () => 1],
      ["s", Symbol("x")],
      ["n", Number.NaN],
      ["m", new Map()],
      ["nested", { a: [1, { b: 2n }] }],
      ["deep", deep],
    ];
    for (const [key, value] of bad) {
      const error = await list({ [key]: value }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).field).toBe(`list options.filter[${JSON.stringify(key)}]`);
    }
    let ok: unknown = "x";
    for (let i = 0; i < 64; i++) ok = { k: ok };
    expect(await list({ tag: ok })).toEqual([]);
  });
});

describe("row 6: sizes are checked after serialization and before any SQL", () => {
  const MB = 1024 * 1024;
  /** Every value serializes to the same 400 MB of zeros (one buffer, shared: the test stays light). */
  class Huge implements SerializerProtocol {
    readonly bytes = new Uint8Array(400 * MB);
    async dumpsTyped(): Promise<[string, Uint8Array]> {
      return ["msgpack", this.bytes];
    }
    async loadsTyped(): Promise<unknown> {
      return null;
    }
  }

  it("a put or putWrites over 1 GiB in all: a non-retryable typed error naming the largest channels, no connection taken", async () => {
    // Whole values: the serializer gives every value the same bytes, which element storage would store once.
    const huge = new PostgresSaver(db.pool, { serde: new Huge(), maxValueBytes: 512 * MB, elementStorage: false });
    let checkouts = 0;
    const count = () => checkouts++;
    db.pool.on("acquire", count);
    try {
      const cp = makeCheckpoint({ a: 1, b: 2, c: 3, small: 4 }, { a: "1", b: "1", c: "1", small: "1" });
      const put = await huge.put(cfg("huge"), cp, meta(-1), { a: "1", b: "1", c: "1" }).catch((e: unknown) => e);
      expect(put).toBeInstanceOf(PayloadTooLargeError);
      const error = put as PayloadTooLargeError;
      expect(error).toMatchObject({ code: "INVALID_INPUT", retryable: false, field: "put checkpoint", limit: 1024 * MB - MB });
      expect(error.bytes).toBeGreaterThan(1200 * MB);
      expect(error.largest.slice(0, 3).map((p) => p.name).sort()).toEqual(['channel "a"', 'channel "b"', 'channel "c"']);
      expect(error.message).toMatch(/channel "a" \(419430400 bytes\)/);

      const writes = await huge.putWrites({ configurable: { thread_id: "huge", checkpoint_ns: "", checkpoint_id: cp.id } }, [["a", 1], ["b", 2], ["c", 3]], "task").catch((e: unknown) => e);
      expect(writes).toBeInstanceOf(PayloadTooLargeError);
      expect((writes as PayloadTooLargeError).largest.map((p) => p.name)).toContain('writes[2] (channel "c")');
      expect(checkouts).toBe(0);
    } finally {
      db.pool.off("acquire", count);
    }
    expect((await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = 'huge'")).rows[0].n).toBe(0);
  });

  it("maxValueBytes defaults to 64 MiB and cannot exceed what one statement carries", () => {
    expect(() => new PostgresSaver(db.pool, { maxValueBytes: 1024 * MB })).toThrow(InvalidOptionsError);
    expect(() => new PostgresSaver(db.pool, { maxValueBytes: 1024 * MB - MB })).not.toThrow();
  });
});

describe("row 9: walks over parent links are bounded; a cycle or a missing parent is a typed error naming the thread", () => {
  // Bounded statements, so that an unbounded walk fails (57014) instead of running forever.
  let pool: pg.Pool;
  let walker: PostgresSaver;
  beforeAll(() => {
    pool = testPool({ connectionString: db.url, statement_timeout: 20_000, max: 2 });
    walker = new PostgresSaver(pool);
  });
  afterAll(async () => {
    await pool.end();
  });

  /** A DeltaChannel that never snapshots: every read walks to the root. */
  function deltaGraph(checkpointer: BaseCheckpointSaver) {
    const State = new StateSchema({
      log: new DeltaValue(z.array(z.string()).default(() => []), {
        inputSchema: z.string(),
        reducer: (current: string[], writes: string[]) => [...current, ...writes],
        snapshotFrequency: 1000,
      }),
      word: z.string().optional(),
    });
    return new StateGraph(State)
      .addNode("a", (st) => ({ log: `a:${st.word}` }))
      .addEdge(START, "a")
      .addEdge("a", END)
      .compile({ checkpointer });
  }

  /** A thread of 3 runs whose root's parent link is then pointed at its head (a cycle) or at nothing. */
  async function broken(how: "cycle" | "missing-parent"): Promise<{ thread: string; ids: string[] }> {
    const thread = `walk-${how}-${uuid6(-3)}`;
    const graph = deltaGraph(walker);
    for (const word of ["x", "y", "z"]) await graph.invoke({ word }, cfg(thread));
    const { rows } = await db.pool.query<{ checkpoint_id: string; parent_checkpoint_id: string | null }>(
      "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' ORDER BY checkpoint_id",
      [thread],
    );
    const root = rows.find((r) => r.parent_checkpoint_id === null)!.checkpoint_id;
    const head = (await db.pool.query("SELECT checkpoint_id FROM checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns = ''", [thread])).rows[0].checkpoint_id as string;
    await db.pool.query("UPDATE checkpoints SET parent_checkpoint_id = $3 WHERE thread_id = $1 AND checkpoint_id = $2", [
      thread,
      root,
      how === "cycle" ? head : "no-such-checkpoint",
    ]);
    return { thread, ids: rows.map((r) => r.checkpoint_id) };
  }

  for (const how of ["cycle", "missing-parent"] as const) {
    it(`${how}: getDeltaChannelHistory (and so getState) throws HistoryCorruptError naming the thread`, async () => {
      const { thread } = await broken(how);
      const error = await walker.getDeltaChannelHistory({ config: cfg(thread), channels: ["log"] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HistoryCorruptError);
      expect(error).toMatchObject({ code: "HISTORY_CORRUPT", threadId: thread, checkpointNs: "", reason: how, retryable: false });
      expect((error as Error).message).toContain(JSON.stringify(thread));
      await expect(deltaGraph(walker).getState(cfg(thread))).rejects.toBeInstanceOf(HistoryCorruptError);
    });

    it(`${how}: prune stops with HistoryCorruptError and deletes nothing`, async () => {
      const { thread, ids } = await broken(how);
      const error = await prune({ pool, keepLast: 1, grace: 0, threadIds: [thread] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HistoryCorruptError);
      expect(error).toMatchObject({ threadId: thread, reason: how });
      await expect(prune({ pool, keepLast: 1, grace: 0, threadIds: [thread], dryRun: true })).rejects.toBeInstanceOf(HistoryCorruptError);
      expect((await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [thread])).rows[0].n).toBe(ids.length);
    });
  }

  it("history(): a cycle is HistoryCorruptError; a parent that is not stored (pruned) is not", async () => {
    const { thread: cyclic } = await broken("cycle");
    await expect(history({ pool, threadId: cyclic })).rejects.toMatchObject({ code: "HISTORY_CORRUPT", threadId: cyclic, reason: "cycle" });
    const { thread: orphaned, ids } = await broken("missing-parent");
    const [lineage] = await history({ pool, threadId: orphaned });
    expect(lineage!.checkpoints.map((c) => c.checkpointId)).toEqual(ids);
  });
});

describe("row 12: linear mode, a run that failed on a transient database error releases its lease", () => {
  it("new input is accepted right after the failure, not after runLeaseMs", async () => {
    const thread = `lease-${uuid6(-3)}`;
    // Lock waits give up after 300 ms: the failure under test is a lock timeout (55P03, retryable).
    const pool = testPool({ connectionString: db.url, lock_timeout: 300, max: 4 });
    const holder = await db.pool.connect();
    const events: SaverEvent[] = [];
    try {
      const saver = new PostgresSaver(pool, { lineage: "linear", onEvent: (e) => events.push(e) });
      const State = Annotation.Root({ n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
      let block = true;
      const graph = new StateGraph(State)
        .addNode("work", async () => {
          if (block) {
            // Another session holds the lineage's head row while the step's put arrives.
            await holder.query("BEGIN");
            await holder.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [thread]);
          }
          return { n: 1 };
        })
        .addEdge(START, "work")
        .addEdge("work", END)
        .compile({ checkpointer: saver });
      // "sync": the step's put is awaited, so its failure is the invocation's.
      const failed = await graph.invoke({ n: 1 }, { ...cfg(thread), durability: "sync" }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(DatabaseOperationError);
      expect(failed).toMatchObject({ sqlState: "55P03", retryable: true });
      await holder.query("ROLLBACK");
      // Released at once, or by a retry as soon as the row is free.
      const released = await waitFor("the lease to be released", async () => events.find((e) => e.type === "leaseReleased"));
      expect(released).toMatchObject({ threadId: thread, checkpointNs: "" });
      block = false;
      expect(await graph.invoke({ n: 10 }, cfg(thread))).toEqual({ n: 12 });
      await saver.end();
    } finally {
      holder.release();
      await pool.end();
    }
  });

  it("a conflict (another run holds the lineage) releases nothing", async () => {
    const thread = `lease-conflict-${uuid6(-3)}`;
    const saver = new PostgresSaver(db.pool, { lineage: "linear" });
    const root = makeCheckpoint({ __start__: { n: 1 } }, { __start__: "00000000000000000000000000000001.1" });
    const head = await saver.put(cfg(thread), root, meta(-1), root.channel_versions);
    // A second run's input on top of the unfinished first one is refused, and the first keeps its lease.
    const intruder = makeCheckpoint({ __start__: { n: 2 } }, { __start__: "00000000000000000000000000000002.1" });
    await expect(saver.put(head, intruder, meta(-1), intruder.channel_versions)).rejects.toBeInstanceOf(CheckpointConflictError);
    const { rows } = await db.pool.query("SELECT moved_at > '-infinity' AS held FROM checkpoint_heads WHERE thread_id = $1", [thread]);
    expect(rows).toEqual([{ held: true }]);
  });
});
