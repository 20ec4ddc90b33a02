/**
 * compact (src/ops/compact.ts, issues #21 and #27): threads written with whole
 * values (`elementStorage: false`), converted into the forms element storage
 * gives them, in blobs and pending writes alike (lists, objects holding lists,
 * large values; special writes stay whole): stored as a saver with element
 * storage stores the same run, read back exactly as before (from a saver with
 * element storage and from one without), each message stored once per thread
 * and namespace, fewer bytes; a dry run changes nothing and counts the same; a
 * second run changes nothing; the thread goes on; prune keeps what the
 * remaining checkpoints and writes need.
 */
import { randomBytes } from "node:crypto";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { emptyCheckpoint, INTERRUPT, ERROR, type BaseCheckpointSaver, type Checkpoint, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { beforeAll, describe, expect, it } from "vitest";
import { compact, EncryptedSerializer, InvalidOptionsError, migrate, PostgresSaver, prune, type CompactResult } from "../../src/index.js";
import { waitForLockWait, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("compact");
let whole: PostgresSaver;
let elements: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  // What compact is for: threads written with element storage off (or by an earlier commit, or adopted).
  whole = new PostgresSaver(db.pool, { elementStorage: false });
  elements = new PostgresSaver(db.pool);
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });

/** A chat with a counter (not a list) and a list channel that stays empty. */
const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  turns: Annotation<number>({ reducer: (_, b) => b, default: () => 0 }),
  empty: Annotation<string[]>({ reducer: (_, b) => b, default: () => [] }),
});

function chat(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(State)
    .addNode("ai", (s) => ({
      messages: [new AIMessage({ content: `reply to ${String(s.messages.at(-1)!.content).slice(0, 30)} ${"text ".repeat(60)}`, id: `ai-${s.messages.at(-1)!.id}` })],
      turns: s.turns + 1,
      empty: [],
    }))
    .addEdge(START, "ai")
    .addEdge("ai", END)
    .compile({ checkpointer });
}

const human = (i: number) => new HumanMessage({ content: `turn ${i}: ${"words ".repeat(50)}`, id: `h-${i}` });

/** A thread of `turns` turns written with whole values (or by `saver`): 2 x turns messages. */
async function wholeThread(prefix: string, turns: number, saver: BaseCheckpointSaver = whole): Promise<string> {
  const thread = tid(prefix);
  const graph = chat(saver);
  for (let i = 0; i < turns; i++) await graph.invoke({ messages: [human(i)] }, cfg(thread));
  return thread;
}

/** Everything a saver reads of a thread: list(), getTuple() of each checkpoint and of the head, getStateHistory(). */
async function readAll(saver: PostgresSaver, thread: string) {
  const listed: CheckpointTuple[] = [];
  for await (const t of saver.list(cfg(thread))) listed.push(t);
  const byId = await Promise.all(listed.map((t) => saver.getTuple(t.config)));
  const head = await saver.getTuple(cfg(thread));
  const history = [];
  for await (const s of chat(saver).getStateHistory(cfg(thread))) history.push(s);
  return { listed, byId, head, history };
}

/** The bytes of the threads' values: blobs and pending writes. */
async function valueBytes(threads: string[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(
    `SELECT (SELECT coalesce(sum(octet_length(value)), 0) FROM checkpoint_blobs WHERE thread_id = ANY($1))
          + (SELECT coalesce(sum(octet_length(value)), 0) FROM checkpoint_writes WHERE thread_id = ANY($1)) AS n`,
    [threads],
  );
  return Number(rows[0]!.n);
}

/**
 * How a thread's values are stored, ids aside: each blob's channel and type, each write's channel,
 * idx and type (sorted), and the element rows (hash and type). Two runs of the same inputs stored
 * the same way give the same answer (element hashes depend on content only).
 */
async function layout(thread: string) {
  const q = async (sql: string) => (await db.pool.query(sql, [thread])).rows.map((r) => Object.values(r).join(" "));
  return {
    blobs: await q("SELECT channel, type FROM checkpoint_blobs WHERE thread_id = $1 AND channel <> '__elements__' ORDER BY 1, 2"),
    writes: await q("SELECT channel, idx, type FROM checkpoint_writes WHERE thread_id = $1 ORDER BY 1, 2, 3"),
    elements: await q("SELECT version, type FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__' ORDER BY 1, 2"),
  };
}

/** Rows of the threads stored by content (either table, element rows aside). */
async function byContentRows(threads: string[]): Promise<number> {
  const byContent = "(type IN ('pg:refs', 'pg:val') OR type LIKE 'pg:obj:%')";
  const { rows } = await db.pool.query(
    `SELECT (SELECT count(*) FROM checkpoint_blobs WHERE thread_id = ANY($1) AND channel <> '__elements__' AND ${byContent})
          + (SELECT count(*) FROM checkpoint_writes WHERE thread_id = ANY($1) AND ${byContent}) AS n`,
    [threads],
  );
  return Number(rows[0].n);
}

/** Element rows per namespace: elements and chunks. */
async function elementRows(thread: string): Promise<{ ns: string; elements: number; chunks: number }[]> {
  const { rows } = await db.pool.query<{ ns: string; elements: number; chunks: number }>(
    `SELECT checkpoint_ns AS ns, count(*) FILTER (WHERE type <> 'pg:refs')::int AS elements, count(*) FILTER (WHERE type = 'pg:refs')::int AS chunks
       FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__' GROUP BY 1 ORDER BY 1`,
    [thread],
  );
  return rows;
}

/** Every blob and write row of the threads, every column, as text: what a dry run must leave as it is. */
async function rowDump(threads: string[]): Promise<string> {
  const { rows } = await db.pool.query<{ d: string | null }>(
    `SELECT (SELECT string_agg(to_jsonb(b)::text, E'\\n' ORDER BY thread_id, checkpoint_ns, channel, version) FROM checkpoint_blobs b WHERE thread_id = ANY($1))
            || E'\\n' || (SELECT string_agg(to_jsonb(w)::text, E'\\n' ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx) FROM checkpoint_writes w WHERE thread_id = ANY($1)) AS d`,
    [threads],
  );
  return rows[0]!.d ?? "";
}

const counts = (r: CompactResult) => ({
  threads: r.threads,
  threadsCompacted: r.threadsCompacted,
  values: r.values,
  writes: r.writes,
  elementRows: r.elementRows,
  bytesBefore: r.bytesBefore,
  bytesAfter: r.bytesAfter,
  valuesSkipped: r.valuesSkipped,
  undecodable: r.undecodable,
});

/** Rows stored whole whose value element storage keeps whole: what compact must leave exactly as they are. */
async function wholeRows(threads: string[]): Promise<string[]> {
  const { rows } = await db.pool.query(
    `SELECT to_jsonb(b)::text AS r FROM checkpoint_blobs b WHERE thread_id = ANY($1) AND channel IN ('turns', 'empty', 'branch:to:ai')
     UNION ALL SELECT to_jsonb(w)::text FROM checkpoint_writes w WHERE thread_id = ANY($1) AND channel IN ('turns', 'empty', 'branch:to:ai') ORDER BY 1`,
    [threads],
  );
  return rows.map((r) => r.r as string);
}

describe("compact converts values stored whole", () => {
  it("stores them as element storage stores the same run, blobs and writes; reads back exactly as before, each message once, fewer bytes; a dry run counts the same and changes nothing; a second run changes nothing", async () => {
    // 20 turns: 40 messages (more than a chunk of 32), over 41 checkpoints; and a short thread.
    const threads = [await wholeThread("long", 20), await wholeThread("short", 2)];
    // The same runs with element storage (the default): how compact must leave the threads.
    const references = [await wholeThread("long-ref", 20, elements), await wholeThread("short-ref", 2, elements)];
    const before = await Promise.all(threads.map((t) => readAll(whole, t)));
    expect(before[0]!.head!.checkpoint.channel_values.messages).toHaveLength(40);
    expect(before[0]!.head!.checkpoint.channel_values.empty).toEqual([]);
    expect(before[0]!.head!.checkpoint.channel_values.turns).toBe(20);
    expect(before[0]!.head!.pendingWrites).toEqual([]);
    expect(before[0]!.listed.some((t) => (t.pendingWrites?.length ?? 0) > 0)).toBe(true);
    expect(await elementRows(threads[0]!)).toEqual([]);
    expect(await byContentRows(threads)).toBe(0);
    const bytesBefore = await valueBytes(threads);
    const dump = await rowDump(threads);
    const untouched = await wholeRows(threads);
    expect(untouched.length).toBeGreaterThan(20);

    const dry = await compact({ pool: db.pool, threadIds: threads, dryRun: true, batchSize: 7 });
    expect(dry.dryRun).toBe(true);
    expect(await rowDump(threads)).toBe(dump);
    expect(dry.values).toBeGreaterThan(40);
    expect(dry.writes).toBeGreaterThan(20);

    const progress: number[] = [];
    const done = await compact({ pool: db.pool, threadIds: threads, batchSize: 7, onProgress: (p) => void progress.push(p.values) });
    expect(done.dryRun).toBe(false);
    expect(counts(done)).toEqual(counts(dry));
    expect(done).toMatchObject({ threads: 2, threadsCompacted: 2, valuesSkipped: 0, undecodable: 0 });
    expect(progress.at(-1)).toBe(done.values);
    expect(await byContentRows(threads)).toBe(done.values);

    // Stored as element storage stores the same runs: the same forms per channel, in blobs and writes
    // (lists by their elements, the input object by its list, the branch and the counter whole), the same element rows.
    // (Objects and large values in writes: the next test.)
    for (const [i, thread] of threads.entries()) expect(await layout(thread)).toEqual(await layout(references[i]!));
    const mine = await layout(threads[0]!);
    expect(mine.blobs).toContain("messages pg:refs");
    expect(mine.blobs).toContain("__start__ pg:obj:msgpack");
    expect(mine.writes).toContain("messages 0 pg:refs");
    // What element storage keeps whole is exactly as it was (not even rewritten).
    expect(await wholeRows(threads)).toEqual(untouched);

    // Each message once per thread and namespace; the 32 first in one chunk.
    expect(await elementRows(threads[0]!)).toEqual([{ ns: "", elements: 40, chunks: 1 }]);
    expect(await elementRows(threads[1]!)).toEqual([{ ns: "", elements: 4, chunks: 0 }]);
    expect(done.elementRows).toBe(40 + 1 + 4);

    // The bytes compact reports, and what the tables hold.
    const bytesAfter = await valueBytes(threads);
    expect(done.bytesAfter).toBeLessThan(done.bytesBefore);
    expect(bytesBefore - bytesAfter).toBe(done.bytesBefore - done.bytesAfter);
    expect(bytesAfter).toBeLessThan(bytesBefore / 3);

    // The same reads, from a saver with element storage and from one without.
    for (const saver of [whole, elements, new PostgresSaver(db.pool, { elementStorage: true })]) {
      const after = await Promise.all(threads.map((t) => readAll(saver, t)));
      expect(after).toStrictEqual(before);
    }

    const again = await compact({ pool: db.pool, threadIds: threads });
    expect(again).toMatchObject({ threads: 2, threadsCompacted: 0, values: 0, writes: 0, elementRows: 0, bytesBefore: 0, bytesAfter: 0 });
    const dryAgain = await compact({ pool: db.pool, threadIds: threads, dryRun: true });
    expect(dryAgain).toMatchObject({ values: 0, elementRows: 0 });
  });

  it("large values by content, objects by their lists, writes of each kind: as element storage stores them; special writes stay whole", async () => {
    const big = (tag: string) => `${tag}: ${"a large tool result ".repeat(40)}`;
    const msgs = (n: number) => Array.from({ length: n }, (_, i) => new HumanMessage({ id: `m${i}`, content: big(`message ${i}`) }));
    /** The same checkpoint and writes through `saver`: a value of each form, and special writes. */
    const write = async (saver: PostgresSaver, thread: string) => {
      // A list whose elements are worth their rows (`items`), and one whose are not (`few`: stored whole, issue 40).
      const values = { doc: big("doc"), small: "hi", items: [big("a"), big("b")], few: ["a", "b"], input: { messages: msgs(2), n: 1 }, tiny: { messages: ["x"] } };
      const versions = Object.fromEntries(Object.keys(values).map((k) => [k, "-a1.00000001"]));
      const checkpoint: Checkpoint = { ...emptyCheckpoint(), id: "1", channel_values: values, channel_versions: versions };
      const config = await saver.put(cfg(thread), checkpoint, { source: "input", step: -1, parents: {} }, versions);
      await saver.putWrites(config, [["items", [big("c")]], ["doc", big("again")], ["small", 1], ["input", { messages: msgs(3) }], ["few", ["c"]]], "task-1");
      await saver.putWrites(config, [[INTERRUPT, [{ value: big("question"), id: "i1" }]], [ERROR, { message: big("failed") }]], "task-2");
      return config;
    };
    const thread = tid("forms");
    const reference = tid("forms-ref");
    const config = await write(whole, thread);
    await write(elements, reference);
    const before = await whole.getTuple(config);
    expect(before!.pendingWrites).toHaveLength(7);

    const result = await compact({ pool: db.pool, threadIds: [thread] });
    // Blobs: doc (by content), items, input; writes: items, doc, input. small, few, tiny and the special writes stay whole.
    expect(result).toMatchObject({ values: 6, writes: 3, valuesSkipped: 0, undecodable: 0 });
    const forms = await layout(thread);
    expect(forms).toEqual(await layout(reference));
    expect(forms.blobs).toEqual(["doc pg:val", "few msgpack", "input pg:obj:msgpack", "items pg:refs", "small msgpack", "tiny msgpack"]);
    expect(forms.writes).toEqual(["__error__ -1 msgpack", "__interrupt__ -3 msgpack", "doc 1 pg:val", "few 4 msgpack", "input 3 pg:obj:msgpack", "items 0 pg:refs", "small 2 msgpack"]);
    for (const saver of [whole, elements]) expect(await saver.getTuple(config)).toStrictEqual(before);
  });

  it("readers running meanwhile see each list whole: before or after, never half converted", async () => {
    const thread = await wholeThread("readers", 12);
    const expected = new Map<string, number>();
    for await (const t of whole.list(cfg(thread))) expected.set(t.checkpoint.id, (t.checkpoint.channel_values.messages as unknown[] | undefined)?.length ?? 0);
    let done = false;
    let reads = 0;
    const reader = async (saver: PostgresSaver) => {
      while (!done) {
        for await (const t of saver.list(cfg(thread))) {
          expect((t.checkpoint.channel_values.messages as unknown[] | undefined)?.length ?? 0).toBe(expected.get(t.checkpoint.id));
        }
        reads += 1;
      }
    };
    const readers = [reader(whole), reader(elements)];
    // One list per transaction: many commits for the readers to fall between.
    const result = await compact({ pool: db.pool, threadIds: [thread], batchSize: 1 }).finally(() => (done = true));
    await Promise.all(readers);
    expect(result.values).toBeGreaterThan(24);
    expect(await byContentRows([thread])).toBe(result.values);
    expect(reads).toBeGreaterThan(1);
  });

  it("every thread of the schema when no threadIds are given; a thread of another schema is left alone", async () => {
    await migrate({ pool: db.pool, schema: "other" });
    const other = new PostgresSaver(db.pool, { schema: "other", elementStorage: false });
    const thread = tid("other");
    for (let i = 0; i < 3; i++) await chat(other).invoke({ messages: [human(i)] }, cfg(thread));
    const mine = await wholeThread("all", 3);
    const result = await compact({ pool: db.pool });
    expect(result.threads).toBeGreaterThanOrEqual(2);
    expect(result.threadsCompacted).toBeGreaterThanOrEqual(1);
    expect((await elementRows(mine))[0]!.elements).toBe(6);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM other.checkpoint_blobs WHERE channel = '__elements__' OR type = 'pg:refs'");
    expect(rows[0].n).toBe(0);
    expect(await compact({ pool: db.pool })).toMatchObject({ values: 0, elementRows: 0 });
    const inOther = await compact({ pool: db.pool, schema: "other", dryRun: true });
    expect(inOther).toMatchObject({ threads: 1, threadsCompacted: 1 });
    expect(inOther.values).toBeGreaterThan(0);
  });

  it("a converted thread goes on, with and without element storage, and reads as a thread never converted", async () => {
    const converted = await wholeThread("goes-on", 5);
    const reference = await wholeThread("reference", 5);
    await compact({ pool: db.pool, threadIds: [converted] });
    await chat(elements).invoke({ messages: [human(5)] }, cfg(converted));
    await chat(whole).invoke({ messages: [human(6)] }, cfg(converted));
    await chat(whole).invoke({ messages: [human(5)] }, cfg(reference));
    await chat(whole).invoke({ messages: [human(6)] }, cfg(reference));
    const [a, b] = [await chat(whole).getState(cfg(converted)), await chat(whole).getState(cfg(reference))];
    expect(a.values.messages).toHaveLength(14);
    expect(a.values).toStrictEqual(b.values);
    // The put with element storage stored only the two new messages.
    expect((await elementRows(converted))[0]!.elements).toBe(12);
    // What the whole-valued saver wrote after it is whole again, and converts; then nothing is left to.
    const wholeAgain = await compact({ pool: db.pool, threadIds: [converted], dryRun: true });
    expect(wholeAgain.values).toBeGreaterThan(2);
    expect(await compact({ pool: db.pool, threadIds: [converted] })).toMatchObject({ values: wholeAgain.values, elementRows: 2 });
    expect(await compact({ pool: db.pool, threadIds: [converted], dryRun: true })).toMatchObject({ values: 0 });
    expect((await elementRows(converted))[0]!.elements).toBe(14);
    expect((await chat(elements).getState(cfg(converted))).values).toStrictEqual(b.values);
  });

  it("prune after compact keeps every element the remaining checkpoints name; what they read is intact", async () => {
    const thread = await wholeThread("prune", 20);
    const before = await readAll(whole, thread);
    await compact({ pool: db.pool, threadIds: [thread] });
    const result = await prune({ pool: db.pool, threadIds: [thread], keepLast: 5, grace: 0 });
    expect(result.checkpoints).toBe(before.listed.length - 5);
    const after = await readAll(elements, thread);
    expect(after.listed).toHaveLength(5);
    expect(after.listed).toStrictEqual(before.listed.slice(0, 5));
    expect(after.head).toStrictEqual(before.head);
    // Every remaining list holds all 40 messages (the checkpoints pruned named no others): none went.
    expect((await elementRows(thread))[0]!.elements).toBe(40);
    await chat(elements).invoke({ messages: [human(20)] }, cfg(thread));
    expect((await chat(whole).getState(cfg(thread))).values.messages).toHaveLength(42);
  });

  it("a deleteThread racing it leaves nothing of the thread: its element rows included (issue 26 row 6)", async () => {
    // A whole list and, first in key order, a value deleteThread meets first: held here, it stops the
    // deletion after its snapshot, while compact runs.
    const thread = tid("deleted");
    await whole.put(cfg(thread), { v: 4, id: "1", ts: new Date().toISOString(), channel_values: { "!first": "x", items: ["a", "b", "c"] }, channel_versions: { "!first": "-a1.00000001", items: "-a1.00000001" }, versions_seen: {} }, { source: "input", step: -1, parents: {} }, { "!first": "-a1.00000001", items: "-a1.00000001" });
    const locker = await db.pool.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '!first' FOR KEY SHARE", [thread]);
      const deletion = new PostgresSaver(db.pool).deleteThread(thread);
      await waitForLockWait(db.pool, "), tomb AS (");
      let settled = false;
      const compacting = compact({ pool: db.pool, threadIds: [thread] }).finally(() => void (settled = true));
      // compact either waits for the deletion (its lock) or, were it not to, finishes before it.
      for (;;) {
        if (settled) break;
        const { rows } = await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%compact: lock%'");
        if (rows.length > 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      await locker.query("COMMIT");
      await deletion;
      await compacting;
      const { rows } = await db.pool.query("SELECT channel, version FROM checkpoint_blobs WHERE thread_id = $1", [thread]);
      expect(rows).toEqual([]);
    } finally {
      await locker.query("ROLLBACK").catch(() => undefined);
      locker.release();
    }
  });

  it("refuses a serializer that binds values to their rows but cannot seal elements, and bad options, before any SQL", async () => {
    const noSql = { query: () => Promise.reject(new Error("no SQL may run")) } as never;
    const sealing = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });
    // Row-bound without sealing (an EncryptedSerializer seals: elements-trust.test.ts).
    const encrypted = { dumpsTyped: sealing.dumpsTyped.bind(sealing), loadsTyped: sealing.loadsTyped.bind(sealing), dumpsTypedForRow: sealing.dumpsTypedForRow.bind(sealing), loadsTypedForRow: sealing.loadsTypedForRow.bind(sealing) };
    const cases: [Parameters<typeof compact>[0], string][] = [
      [{ pool: noSql, serde: encrypted }, "serde"],
      [{ pool: noSql, serde: {} as never }, "serde"],
      [{ pool: noSql, batchSize: 0 }, "batchSize"],
      [{ pool: noSql, batchSize: 1.5 }, "batchSize"],
      [{ pool: noSql, threadIds: [] }, "threadIds"],
      [{ pool: noSql, threadIds: "t" as never }, "threadIds"],
      [{ pool: noSql, threadIds: ["ok", "nul\u0000"] }, "threadIds[1]"],
      [{ pool: noSql, schema: "" }, "schema"],
      [{ pool: noSql, dryRun: "yes" as never }, "dryRun"],
      [{ pool: noSql, onProgress: 1 as never }, "onProgress"],
      [{ pool: noSql, connectionString: db.url }, "pool/connectionString"],
      [{}, "pool/connectionString"],
      [{ pool: {} as never }, "pool"],
      [null as never, "options"],
    ];
    for (const [options, option] of cases) {
      const err = await compact(options).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, option).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).option).toBe(option);
    }
  });
});
