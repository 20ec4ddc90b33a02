import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { ERROR, INTERRUPT, TASKS, uuid6 } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import { beforeAll, describe, expect, it } from "vitest";
import { InvalidInputError, migrate, PostgresSaver } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("saver");
let saver: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool);
});

async function count(table: string, threadId: string): Promise<number> {
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE thread_id = $1`, [threadId]);
  return rows[0].n;
}

async function root(threadId: string, ns = "", values: Record<string, unknown> = {}) {
  const cp = makeCheckpoint(values);
  const config = await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: ns } }, cp, meta(-1), cp.channel_versions);
  return { cp, config };
}

describe("putWrites", () => {
  it("returns writes in (task_path, task_id, idx) order whatever the insertion order", async () => {
    const { config } = await root(uuid6(-3));
    await saver.putWrites(config, [["b", 1], ["b", 2]], "task-z", "~__pregel_pull, z");
    await saver.putWrites(config, [["a", 3]], "task-y", "~__pregel_pull, b");
    await saver.putWrites(config, [["a", 4]], "task-x", "~__pregel_pull, b");
    await saver.putWrites(config, [["input", 5]], "task-w"); // no path: sorts first
    const tuple = await saver.getTuple(config);
    expect(tuple?.pendingWrites).toEqual([
      ["task-w", "input", 5],
      ["task-x", "a", 4],
      ["task-y", "a", 3],
      ["task-z", "b", 1],
      ["task-z", "b", 2],
    ]);
  });

  it("orders task paths by code point, not by locale", async () => {
    const { config } = await root(uuid6(-3));
    await saver.putWrites(config, [["c", "upper"]], "t1", "B");
    await saver.putWrites(config, [["c", "lower"]], "t2", "a");
    await saver.putWrites(config, [["c", "astral"]], "t3", "\u{1F600}");
    await saver.putWrites(config, [["c", "bmp-high"]], "t4", "\uFF5E");
    const tuple = await saver.getTuple(config);
    expect(tuple?.pendingWrites?.map((w) => w[2])).toEqual(["upper", "lower", "bmp-high", "astral"]);
  });

  it("ordinary writes are idempotent: a repeated (task, idx) keeps the first value", async () => {
    const { config } = await root(uuid6(-3));
    await saver.putWrites(config, [["messages", "first"]], "task-1");
    await saver.putWrites(config, [["messages", "second"]], "task-1");
    const tuple = await saver.getTuple(config);
    expect(tuple?.pendingWrites).toEqual([["task-1", "messages", "first"]]);
  });

  it("special writes (error, interrupt) replace their previous value and bump row_version", async () => {
    const threadId = uuid6(-3);
    const { config } = await root(threadId);
    await saver.putWrites(config, [[ERROR, { message: "boom 1" }]], "task-1");
    await saver.putWrites(config, [[ERROR, { message: "boom 2" }]], "task-1");
    await saver.putWrites(config, [[INTERRUPT, [{ value: "q1" }]]], "task-2");
    await saver.putWrites(config, [[INTERRUPT, [{ value: "q2" }]]], "task-2");
    const tuple = await saver.getTuple(config);
    expect(tuple?.pendingWrites).toEqual([
      ["task-1", ERROR, { message: "boom 2" }],
      ["task-2", INTERRUPT, [{ value: "q2" }]],
    ]);
    const { rows } = await db.pool.query("SELECT idx, row_version::int AS rv FROM checkpoint_writes WHERE thread_id = $1 ORDER BY idx", [threadId]);
    expect(rows.every((r) => r.idx < 0 && r.rv === 2)).toBe(true);
  });

  it("stores writes that arrive before their checkpoint (async durability)", async () => {
    const threadId = uuid6(-3);
    const cp = makeCheckpoint({ x: 1 });
    const config = { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: cp.id } };
    await saver.putWrites(config, [["x", 2]], "early-task");
    expect(await saver.getTuple(config)).toBeUndefined();
    await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
    expect((await saver.getTuple(config))?.pendingWrites).toEqual([["early-task", "x", 2]]);
  });

  it("round-trips rich values (messages, bytes, undefined, null) and keeps namespaces apart", async () => {
    const threadId = uuid6(-3);
    const a = await root(threadId, "");
    const b = await root(threadId, "child:1");
    const msg = new AIMessage({ content: "hi", tool_calls: [{ id: "c1", name: "lookup", args: { q: "x" } }] });
    await saver.putWrites(a.config, [["messages", [new HumanMessage("hello"), msg]], ["bytes", new Uint8Array([1, 2, 3])]], "t");
    await saver.putWrites(b.config, [["nothing", undefined], ["null", null]], "t");
    const ta = await saver.getTuple(a.config);
    const tb = await saver.getTuple(b.config);
    const [, , messages] = ta!.pendingWrites![0]!;
    expect((messages as unknown[])[0]).toBeInstanceOf(HumanMessage);
    expect((messages as AIMessage[])[1]!.tool_calls).toEqual(msg.tool_calls);
    expect(ta!.pendingWrites![1]![2]).toEqual(new Uint8Array([1, 2, 3]));
    expect(tb!.pendingWrites).toEqual([
      ["t", "nothing", undefined],
      ["t", "null", null],
    ]);
  });

  it("an empty write list writes nothing", async () => {
    const threadId = uuid6(-3);
    const { config } = await root(threadId);
    await saver.putWrites(config, [], "t");
    expect(await count("checkpoint_writes", threadId)).toBe(0);
  });

  it("rejects bad input before any SQL, naming the field", async () => {
    const threadId = uuid6(-3);
    const { config } = await root(threadId);
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => saver.putWrites({ configurable: { thread_id: threadId } }, [["a", 1]], "t"), /checkpoint_id/],
      [() => saver.putWrites({}, [["a", 1]], "t"), /configurable/],
      [() => saver.putWrites(config, [["a", 1]], 7 as unknown as string), /taskId/],
      [() => saver.putWrites(config, "nope" as never, "t"), /writes/],
      [() => saver.putWrites(config, [[1 as unknown as string, 1]], "t"), /writes\[0\]\[0\]/],
      [() => saver.putWrites(config, [["a\u0000b", 1]], "t"), /NUL/],
    ];
    for (const [call, field] of cases) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as Error).message).toMatch(field);
    }
    expect(await count("checkpoint_writes", threadId)).toBe(0);
  });
});

describe("input validation", () => {
  it("names the field for missing or mistyped ids, and says the limit for long ones", async () => {
    const cp = makeCheckpoint();
    const put = (configurable: Record<string, unknown>) => saver.put({ configurable }, cp, meta(-1), {});
    await expect(put({})).rejects.toThrow(/thread_id.*missing/);
    await expect(put({ thread_id: 4.2 })).rejects.toThrow(/thread_id: expected a string or a safe integer, got a number that is not one/);
    await expect(put({ thread_id: 2 ** 53 })).rejects.toThrow(/thread_id: expected a string or a safe integer/);
    await expect(put({ thread_id: 42n })).rejects.toThrow(/thread_id: expected a string or a safe integer, got bigint/);
    await expect(put({ thread_id: "x".repeat(513) })).rejects.toThrow(/513 bytes long; the limit is 512 bytes/);
    await expect(put({ thread_id: "é".repeat(300) })).rejects.toThrow(/600 bytes long/);
    await expect(put({ thread_id: "a\u0000b" })).rejects.toThrow(/NUL/);
    await expect(put({ thread_id: "t", checkpoint_ns: "n".repeat(2000) })).rejects.toThrow(/checkpoint_ns.*limit is 1024/);
    await expect(saver.getTuple({ configurable: { thread_id: ["a"] } })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(saver.deleteThread(Number.NaN)).rejects.toThrow(/deleteThread threadId: expected a string or a safe integer/);
    await expect(saver.deleteThread({} as unknown as string)).rejects.toThrow(/deleteThread threadId: expected a string or a safe integer, got object/);
    await expect(saver.list({}, { limit: -1 }).next()).rejects.toThrow(/limit/);
  });

  it("accepts ids at the limit, unicode and SQL-looking text, and reads them back exactly", async () => {
    for (const threadId of ["x".repeat(512), "'; DROP TABLE checkpoints; --", "emoji 🧵 \u202Eright-to-left", 'quo"te\\back']) {
      const { config } = await root(threadId, "ns|with:odd\"chars'");
      const tuple = await saver.getTuple(config);
      expect(tuple?.config.configurable?.thread_id).toBe(threadId);
      expect(tuple?.config.configurable?.checkpoint_ns).toBe("ns|with:odd\"chars'");
    }
  });
});

describe("a numeric thread_id", () => {
  /** The official saver's tables, beside ours: it stores `thread_id: 42` as pg sends a number, its decimal text. */
  const OFFICIAL = "official_numeric";

  it("is its decimal string everywhere an id is taken: put, putWrites, getTuple, list, getDeltaChannelHistory, deleteThread", async () => {
    const n = 4_200_000_000 + Math.floor(Math.random() * 1e6);
    const id = String(n);
    const cp = makeCheckpoint({ a: 1 });
    const stored = await saver.put({ configurable: { thread_id: n, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
    expect(stored.configurable?.thread_id).toBe(id);
    await saver.putWrites({ configurable: { thread_id: n, checkpoint_ns: "", checkpoint_id: cp.id } }, [["a", 2]], "task-1");
    const { rows } = await db.pool.query("SELECT thread_id FROM checkpoints WHERE thread_id = $1 UNION ALL SELECT thread_id FROM checkpoint_writes WHERE thread_id = $1", [id]);
    expect(rows).toEqual([{ thread_id: id }, { thread_id: id }]);
    // The number and its string name one thread.
    for (const thread_id of [n, id]) {
      const tuple = await saver.getTuple({ configurable: { thread_id } });
      expect(tuple?.checkpoint.channel_values).toEqual({ a: 1 });
      expect(tuple?.pendingWrites).toEqual([["task-1", "a", 2]]);
      expect(tuple?.config.configurable?.thread_id).toBe(id);
      const listed = [];
      for await (const t of saver.list({ configurable: { thread_id } })) listed.push(t.checkpoint.id);
      expect(listed).toEqual([cp.id]);
      expect(await saver.getDeltaChannelHistory({ config: { configurable: { thread_id, checkpoint_id: cp.id } }, channels: ["a"] })).toBeDefined();
    }
    await saver.deleteThread(n);
    expect(await saver.getTuple({ configurable: { thread_id: id } })).toBeUndefined();
    expect(await count("checkpoint_writes", id)).toBe(0);
    // Negative and zero are integers too.
    for (const m of [0, -7]) {
      await saver.put({ configurable: { thread_id: m } }, makeCheckpoint(), meta(-1), {});
      expect((await saver.getTuple({ configurable: { thread_id: String(m) } }))?.config.configurable?.thread_id).toBe(String(m));
    }
  });

  it("is stored as the official saver stores it", async () => {
    const pool = testPool({ connectionString: db.url, max: 2 });
    try {
      const official = new OfficialSaver(pool, undefined, { schema: OFFICIAL });
      await official.setup();
      const cp = makeCheckpoint({ a: 1 });
      await official.put({ configurable: { thread_id: 4343, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
      await saver.put({ configurable: { thread_id: 4343, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
      const { rows } = await db.pool.query(
        `SELECT (SELECT array_agg(thread_id) FROM ${OFFICIAL}.checkpoints) AS official, (SELECT array_agg(thread_id) FROM public.checkpoints WHERE thread_id = '4343') AS ours`,
      );
      expect(rows[0]).toEqual({ official: ["4343"], ours: ["4343"] });
    } finally {
      await pool.end();
    }
  });
});

describe("metadata", () => {
  it("keeps NUL characters, undefined, dates and bigints exactly, and stays filterable", async () => {
    const threadId = uuid6(-3);
    const odd = { source: "input", step: -1, parents: {}, note: "a\u0000b", when: new Date(5), n: 10n, u: undefined } as never;
    const cp = makeCheckpoint();
    const config = await saver.put({ configurable: { thread_id: threadId } }, cp, odd, {});
    const tuple = await saver.getTuple(config);
    expect(tuple?.metadata).toEqual(odd);
    expect(Object.prototype.hasOwnProperty.call(tuple?.metadata, "u")).toBe(true);
    const found = [];
    for await (const t of saver.list({ configurable: { thread_id: threadId } }, { filter: { note: "a\u0000b" } })) found.push(t);
    expect(found).toHaveLength(1);
  });

  it("stores plain metadata as JSONB only (no raw copy)", async () => {
    const threadId = uuid6(-3);
    const cp = makeCheckpoint();
    await saver.put({ configurable: { thread_id: threadId } }, cp, meta(-1, { user: { id: 7 } }), {});
    const { rows } = await db.pool.query("SELECT metadata, metadata_raw FROM checkpoints WHERE thread_id = $1", [threadId]);
    expect(rows[0].metadata).toEqual({ source: "input", step: -1, parents: {}, user: { id: 7 } });
    expect(rows[0].metadata_raw).toBeNull();
  });

  it("filters by exact value on nested objects, not containment", async () => {
    const threadId = uuid6(-3);
    await saver.put({ configurable: { thread_id: threadId } }, makeCheckpoint(), meta(-1, { tags: ["a", "b"] }), {});
    const matches = async (filter: Record<string, unknown>) => {
      let n = 0;
      for await (const _ of saver.list({ configurable: { thread_id: threadId } }, { filter })) n++;
      return n;
    };
    expect(await matches({ tags: ["a", "b"] })).toBe(1);
    expect(await matches({ tags: ["a"] })).toBe(0);
    expect(await matches({ step: -1, source: "input" })).toBe(1);
    expect(await matches({ step: 0 })).toBe(0);
  });
});

describe("channel values", () => {
  it("an empty list comes back as stored, and a channel absent from the values has no row and reads as no value", async () => {
    const threadId = uuid6(-3);
    const cp = makeCheckpoint({ [TASKS]: [], name: "x" }, { [TASKS]: "1", name: "1", gone: "1" });
    const config = await saver.put({ configurable: { thread_id: threadId } }, cp, meta(-1), cp.channel_versions);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.channel_values).toEqual({ [TASKS]: [], name: "x" });
    const { rows } = await db.pool.query("SELECT channel, type, value FROM checkpoint_blobs WHERE thread_id = $1 ORDER BY channel", [threadId]);
    expect(rows.map((r) => r.channel)).toEqual(["__pregel_tasks", "name"].sort());
  });

  it("values without a version (LangGraph's `__pregel_tasks: []`, a reducer's default) come back as stored, kept with the row", async () => {
    const threadId = uuid6(-3);
    const cp = makeCheckpoint({ [TASKS]: [], messages: [], name: "x", when: new Date(0) }, { name: "1" });
    const config = await saver.put({ configurable: { thread_id: threadId } }, cp, meta(-1), { name: "1" });
    const expected = { [TASKS]: [], messages: [], name: "x", when: new Date(0) };
    expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual(expected);
    expect((await saver.getTuple({ configurable: { thread_id: threadId } }))?.checkpoint.channel_values).toEqual(expected);
    const listed = [];
    for await (const t of saver.list({ configurable: { thread_id: threadId } })) listed.push(t.checkpoint.channel_values);
    expect(listed).toEqual([expected]);
    // One blob (the versioned channel); the others are one serialized map on the checkpoint row.
    expect(await count("checkpoint_blobs", threadId)).toBe(1);
    const { rows } = await db.pool.query("SELECT checkpoint, unversioned_type FROM checkpoints WHERE thread_id = $1", [threadId]);
    expect(rows[0].unversioned_type).toBe("msgpack");
    expect(rows[0].checkpoint).not.toHaveProperty("channel_values");
    // A child that versions one of them reads it from its blob, and still holds the rest.
    const child = makeCheckpoint({ [TASKS]: [], messages: ["hi"], name: "x" }, { name: "1", messages: "2" });
    const c2 = await saver.put(config, child, meta(0), { messages: "2" });
    expect((await saver.getTuple(c2))?.checkpoint.channel_values).toEqual({ [TASKS]: [], messages: ["hi"], name: "x" });
    // None at all: the columns stay NULL.
    const plain = makeCheckpoint({ name: "y" }, { name: "3" });
    const c3 = await saver.put(c2, plain, meta(1), { name: "3" });
    const { rows: r3 } = await db.pool.query("SELECT unversioned_type, unversioned_values FROM checkpoints WHERE thread_id = $1 AND checkpoint_id = $2", [
      threadId,
      c3.configurable!.checkpoint_id,
    ]);
    expect(r3[0]).toEqual({ unversioned_type: null, unversioned_values: null });
  });

  it("rebuilds values from blobs written by ancestors", async () => {
    const threadId = uuid6(-3);
    const first = makeCheckpoint({ a: "from-root", b: "b1" }, { a: "1", b: "1" });
    const c1 = await saver.put({ configurable: { thread_id: threadId } }, first, meta(-1), { a: "1", b: "1" });
    const second = { ...makeCheckpoint({ a: "from-root", b: "b2" }, { a: "1", b: "2" }) };
    const c2 = await saver.put(c1, second, meta(0), { b: "2" });
    const tuple = await saver.getTuple(c2);
    expect(tuple?.checkpoint.channel_values).toEqual({ a: "from-root", b: "b2" });
    expect(await count("checkpoint_blobs", threadId)).toBe(3);
  });

  it("getNextVersion: short counter plus random part, sorting after its input", () => {
    const next = (v: string | number | undefined) => String(saver.getNextVersion(v));
    const v1 = next(undefined);
    expect(v1).toMatch(/^-a1\.[0-9][0-9a-z]{7}$/);
    const v2 = next(v1);
    expect(v2.startsWith("-a2.")).toBe(true);
    expect(v2 > v1).toBe(true);
    expect(next(v1)).not.toBe(next(v1));
    // Integer versions (threads adopted from the official JS saver) stay numbers: LangGraph compares with `>`.
    const adopted = saver.getNextVersion(7);
    expect(typeof adopted).toBe("number");
    expect(Math.floor(adopted)).toBe(8);
    expect(adopted - 8).toBeLessThan(0.5);
  });
});

describe("list", () => {
  it("pages through a long thread newest first without losing or repeating a checkpoint", async () => {
    const threadId = uuid6(-3);
    let config = (await root(threadId)).config;
    const ids = [config.configurable!.checkpoint_id as string];
    for (let i = 0; i < 249; i++) {
      const cp = makeCheckpoint();
      config = await saver.put(config, cp, meta(i), {});
      ids.push(cp.id);
    }
    const seen: string[] = [];
    for await (const t of saver.list({ configurable: { thread_id: threadId } })) seen.push(t.checkpoint.id);
    expect(seen).toEqual([...ids].reverse());
    const limited: string[] = [];
    for await (const t of saver.list({ configurable: { thread_id: threadId } }, { limit: 120, before: { configurable: { checkpoint_id: ids[200] } } })) {
      limited.push(t.checkpoint.id);
    }
    expect(limited).toEqual(ids.slice(80, 200).reverse());
  });
});

describe("deleteThread", () => {
  it("removes checkpoints, writes and blobs of every namespace of that thread only", async () => {
    const doomed = uuid6(-3);
    const kept = uuid6(-3);
    for (const t of [doomed, kept]) {
      for (const ns of ["", "sub:1"]) {
        const { config } = await root(t, ns, { v: 1 });
        await saver.putWrites(config, [["v", 2]], "task");
      }
    }
    await saver.deleteThread(doomed);
    for (const table of ["checkpoints", "checkpoint_writes", "checkpoint_blobs"]) {
      expect(await count(table, doomed)).toBe(0);
      expect(await count(table, kept)).toBe(2);
    }
  });
});
