/**
 * Values stored by content (src/saver/stored.ts, src/saver/elements.ts,
 * issues #21 and #27): each message once per thread, whatever holds it (a
 * list version, a task's write, LangGraph's input object), a large value once
 * however many rows hold it; reads exactly what was written, a put sends only
 * what its parent does not refer to, prune keeps what remaining values and
 * writes name. Compared with MemorySaver where a graph runs.
 */
import { randomBytes } from "node:crypto";
import { AIMessage, HumanMessage, RemoveMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { type BaseCheckpointSaver, type Checkpoint, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { DeserializationError, EncryptedSerializer, InvalidInputError, migrate, PayloadTooLargeError, PostgresSaver, prune } from "../../src/index.js";
import { queryKnowingElements, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("elements");
/** The default since issue 27, spelled out. */
const ON = { elementStorage: true } as const;
let saver: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool, ON);
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });

/** A chat graph: each turn's input gets one AI reply that names it. */
function chat(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("ai", (s) => ({ messages: [new AIMessage({ content: `reply to ${String(s.messages.at(-1)!.content).slice(0, 40)}`, id: `ai-${s.messages.at(-1)!.id}` })] }))
    .addEdge(START, "ai")
    .addEdge("ai", END)
    .compile({ checkpointer });
}

const human = (i: number) => new HumanMessage({ content: `turn ${i}: ${"words ".repeat(40)}`, id: `h-${i}` });
const plain = (messages: BaseMessage[]) => messages.map((m) => ({ type: m.getType(), id: m.id, content: m.content }));

/** Element rows of a thread, chunks (rows of 32 hashes) not counted. */
async function elementRows(threadId: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__' AND type <> 'pg:refs'",
    [threadId],
  );
  return rows[0]!.n;
}

/** Bytes of every put statement's values while `fn` runs, on a saver of its own whose pool records them. */
async function recordingSaver(): Promise<{ saver: PostgresSaver; sent: number[]; pool: pg.Pool }> {
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  const sent: number[] = [];
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const q = args[0] as { text?: string; values?: unknown[] } | string;
      const text = typeof q === "string" ? q : q.text ?? "";
      const values = (typeof q === "object" && q.values) || (Array.isArray(args[1]) ? (args[1] as unknown[]) : undefined);
      if (/INSERT INTO .*checkpoint_heads/s.test(text) && values) {
        sent.push(values.reduce<number>((n, v) => n + (Buffer.isBuffer(v) ? v.byteLength : 0), 0));
      }
      return query(...args);
    };
  });
  return { saver: new PostgresSaver(pool, ON), sent, pool };
}

describe("a conversation stores each message once", () => {
  it("200 messages read back exactly as on MemorySaver, with one element row per message", async () => {
    const thread = tid("chat");
    const memory = new MemorySaver();
    const [ours, theirs] = [chat(saver), chat(memory)];
    for (let i = 0; i < 100; i++) {
      await ours.invoke({ messages: [human(i)] }, cfg(thread));
      await theirs.invoke({ messages: [human(i)] }, cfg("m"));
    }
    const [a, b] = [await ours.getState(cfg(thread)), await theirs.getState(cfg("m"))];
    expect(a.values.messages).toHaveLength(200);
    expect(plain(a.values.messages)).toEqual(plain(b.values.messages));
    expect(await elementRows(thread)).toBe(200);
    // Every checkpoint in the history reads back as on MemorySaver (time travel).
    const ours10: unknown[] = [];
    const theirs10: unknown[] = [];
    for await (const s of ours.getStateHistory(cfg(thread), { limit: 10 })) ours10.push(plain(s.values.messages ?? []));
    for await (const s of theirs.getStateHistory(cfg("m"), { limit: 10 })) theirs10.push(plain(s.values.messages ?? []));
    expect(ours10).toEqual(theirs10);
  });

  it("a put sends only the messages its parent does not hold, also from a saver that only read the thread (a restarted process)", async () => {
    const thread = tid("sent");
    const big = (i: number) => new HumanMessage({ content: `turn ${i} ${randomBytes(3000).toString("hex")}`, id: `big-${i}` });
    const first = await recordingSaver();
    const graph = chat(first.saver);
    for (let i = 0; i < 20; i++) await graph.invoke({ messages: [big(i)] }, cfg(thread));
    const early = first.sent.slice(0, 6);
    const late = first.sent.slice(-6);
    // Each put carries its new message (6 kB), never the thread's whole history (20 x 6 kB).
    expect(Math.max(...late)).toBeLessThan(20_000);
    expect(Math.max(...late)).toBeLessThan(Math.max(...early) * 2);
    await first.pool.end();
    const second = await recordingSaver();
    await chat(second.saver).invoke({ messages: [big(20)] }, cfg(thread));
    expect(Math.max(...second.sent)).toBeLessThan(20_000);
    expect((await chat(saver).getState(cfg(thread))).values.messages).toHaveLength(42);
    await second.pool.end();
  });

  it("a message changed in place and handed back (as LangGraph's own tests do) is stored as changed", async () => {
    const thread = tid("mutate");
    const graph = chat(saver);
    await graph.invoke({ messages: [human(1)] }, cfg(thread));
    const state = await graph.getState(cfg(thread));
    const reply = state.values.messages.at(-1) as AIMessage;
    reply.content = "edited in place";
    await graph.updateState(cfg(thread), { messages: [reply] });
    const back = await new PostgresSaver(db.pool, ON).getTuple(cfg(thread));
    expect((back!.checkpoint.channel_values.messages as BaseMessage[]).at(-1)!.content).toBe("edited in place");
  });

  it("an image in each message is stored once, not once per step", async () => {
    const thread = tid("image");
    const images = Array.from({ length: 5 }, () => `data:image/png;base64,${randomBytes(75_000).toString("base64")}`);
    const image = (i: number) => images[i]!;
    const graph = chat(saver);
    for (let i = 0; i < 5; i++) {
      await graph.invoke({ messages: [new HumanMessage({ id: `img-${i}`, content: [{ type: "text", text: `look ${i}` }, { type: "image_url", image_url: { url: image(i) } }] })] }, cfg(thread));
    }
    // Rows holding each image: its message's element row alone (the input channel of its turn and the
    // input's pending write name that row, issue 27). The first image lived through five turns and is in
    // no more rows than the last.
    for (const i of [0, 4]) {
      const marker = image(i).slice(22, 86);
      const { rows } = await db.pool.query<{ channel: string }>(
        `SELECT 'blob ' || channel AS channel FROM checkpoint_blobs WHERE thread_id = $1 AND position(convert_to($2, 'UTF8') in value) > 0
         UNION ALL SELECT 'write ' || channel FROM checkpoint_writes WHERE thread_id = $1 AND position(convert_to($2, 'UTF8') in value) > 0`,
        [thread, marker],
      );
      expect(rows.map((r) => r.channel)).toEqual(["blob __elements__"]);
    }
    const state = await graph.getState(cfg(thread));
    expect(state.values.messages).toHaveLength(10);
  });
});

describe("other values stored by content (issue 27)", () => {
  it("a large value a task writes and its channel then holds is one element row, read back exactly, as on MemorySaver", async () => {
    const State = Annotation.Root({ result: Annotation<string>, n: Annotation<number> });
    const graph = (checkpointer: BaseCheckpointSaver) =>
      new StateGraph(State)
        .addNode("tool", (s) => ({ result: `${"tool output ".repeat(4000)}#${s.n}`, n: s.n + 1 }))
        .addEdge(START, "tool")
        .addEdge("tool", END)
        .compile({ checkpointer });
    const thread = tid("large");
    const ours = graph(saver);
    const theirs = graph(new MemorySaver());
    for (let i = 0; i < 3; i++) {
      const a = await ours.invoke({ n: i }, cfg(thread));
      expect(a).toEqual(await theirs.invoke({ n: i }, cfg(thread)));
    }
    for (let i = 0; i < 3; i++) {
      const marker = `#${i}`;
      const { rows } = await db.pool.query(
        `SELECT 'blob ' || channel || ' ' || type AS at FROM checkpoint_blobs WHERE thread_id = $1 AND position(convert_to($2, 'UTF8') in value) > 0
         UNION ALL SELECT 'write ' || channel FROM checkpoint_writes WHERE thread_id = $1 AND position(convert_to($2, 'UTF8') in value) > 0`,
        [thread, `output tool output ${marker}`],
      );
      expect(rows.map((r) => r.at)).toEqual(["blob __elements__ msgpack"]);
    }
    const types = await db.pool.query("SELECT DISTINCT type FROM checkpoint_writes WHERE thread_id = $1 AND channel = 'result' UNION SELECT DISTINCT type FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'result'", [thread]);
    expect(types.rows.map((r) => r.type)).toEqual(["pg:val"]);
    expect((await ours.getState(cfg(thread))).values).toEqual((await theirs.getState(cfg(thread))).values);
  });

  it("an object holding lists comes back with its keys in order, its other fields and a __proto__ key as its own", async () => {
    const thread = tid("object");
    const messages = Array.from({ length: 3 }, (_, i) => new HumanMessage({ id: `m${i}`, content: `message ${i} ${"text ".repeat(30)}` }));
    const value = JSON.parse(`{"first": 1, "messages": [], "__proto__": {"x": 1}, "tags": ["a"], "last": "end"}`) as Record<string, unknown>;
    value.messages = messages;
    const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { input: value }, channel_versions: { input: 1 } };
    const put = await saver.put(cfg(thread), cp, { source: "input", step: -1, parents: {} }, { input: 1 });
    const { rows } = await db.pool.query("SELECT type FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'input'", [thread]);
    expect(rows[0].type).toBe("pg:obj:msgpack");
    const back = (await new PostgresSaver(db.pool, ON).getTuple(put))!.checkpoint.channel_values.input as Record<string, unknown>;
    expect(Object.keys(back)).toEqual(["first", "messages", "__proto__", "tags", "last"]);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(back, "__proto__")?.value).toEqual({ x: 1 });
    expect(back.tags).toEqual(["a"]);
    expect(plain(back.messages as BaseMessage[])).toEqual(plain(messages));
  });
});

describe("what lists are put back from", () => {
  const list = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ n: i, tag, text: `item ${i} of ${tag}` }));

  async function putList(s: BaseCheckpointSaver, thread: string, value: unknown[], parent?: string, version = 1): Promise<RunnableConfig> {
    const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { items: value }, channel_versions: { items: version } };
    const config = { configurable: { thread_id: thread, checkpoint_ns: "", ...(parent ? { checkpoint_id: parent } : {}) } };
    return s.put(config, cp, { source: "loop", step: version, parents: {} }, { items: version });
  }

  it("lists across chunk boundaries (0, 1, 31, 32, 33, 70 elements), repeated elements, and a first element removed, read back exactly", async () => {
    const thread = tid("chunks");
    let parent: string | undefined;
    let version = 1;
    for (const value of [list(1, "a"), list(31, "a"), list(32, "a"), list(33, "a"), list(70, "a"), list(70, "a").slice(1), [...list(3, "r"), ...list(3, "r")], []]) {
      const next = await putList(saver, thread, value, parent, version++);
      parent = next.configurable!.checkpoint_id as string;
      const back = await new PostgresSaver(db.pool, ON).getTuple(next);
      expect(back!.checkpoint.channel_values.items).toEqual(value);
    }
  });

  it("a fork from an older checkpoint, and a put whose parent is gone, read back exactly", async () => {
    const thread = tid("fork");
    const one = await putList(saver, thread, list(40, "x"));
    const two = await putList(saver, thread, [...list(40, "x"), ...list(5, "y")], one.configurable!.checkpoint_id as string, 2);
    const fork = await putList(saver, thread, [...list(40, "x"), ...list(2, "z")], one.configurable!.checkpoint_id as string, 3);
    expect((await saver.getTuple(two))!.checkpoint.channel_values.items).toHaveLength(45);
    expect((await saver.getTuple(fork))!.checkpoint.channel_values.items).toEqual([...list(40, "x"), ...list(2, "z")]);
    // The thread's rows gone (another process deleted it, and its tombstone was collected since), then a put
    // naming the checkpoint this saver wrote last: it must send every element again.
    for (const table of ["checkpoint_heads", "checkpoint_writes", "checkpoint_blobs", "checkpoints"]) await queryKnowingElements(db.pool, `DELETE FROM ${table} WHERE thread_id = $1`, [thread]);
    const again = await putList(saver, thread, [...list(40, "x"), ...list(3, "w")], fork.configurable!.checkpoint_id as string, 4);
    expect((await new PostgresSaver(db.pool, ON).getTuple(again))!.checkpoint.channel_values.items).toEqual([...list(40, "x"), ...list(3, "w")]);
  });

  it("a missing element row is an error naming the thread, the channel and the hash, never a shorter list", async () => {
    const thread = tid("missing");
    const put = await putList(saver, thread, list(3, "m"));
    await queryKnowingElements(db.pool, "DELETE FROM checkpoint_blobs WHERE ctid IN (SELECT ctid FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__' LIMIT 1)", [thread]);
    const err = await new PostgresSaver(db.pool, ON).getTuple(put).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeserializationError);
    expect((err as Error).message).toMatch(new RegExp(`channel "items".*thread "${thread}".*element [0-9a-f]{32} is not stored`));
  });

  it("getDeltaChannelHistory puts a list seed back together", async () => {
    const thread = tid("delta");
    const one = await putList(saver, thread, list(35, "d"));
    const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: {}, channel_versions: { items: 1 } };
    const two = await saver.put(one, cp, { source: "loop", step: 2, parents: {} }, {});
    const history = await saver.getDeltaChannelHistory({ config: two, channels: ["items"] });
    expect(history.items!.seed).toEqual(list(35, "d"));
  });

  it("the reserved channel name is refused before any SQL", async () => {
    const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { __elements__: [1] }, channel_versions: { __elements__: 1 } };
    const err = await saver.put(cfg(tid("reserved")), cp, { source: "loop", step: 1, parents: {} }, { __elements__: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as Error).message).toMatch(/__elements__/);
  });

  it("maxValueBytes counts a list stored by its elements as its whole value: all its elements together (issue 26 row 9)", async () => {
    const big = (n: number) => Array.from({ length: n }, (_, i) => ({ i, blob: `${i}:${"x".repeat(50_000)}` }));
    const encrypted = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });
    const savers = [
      new PostgresSaver(db.pool, { maxValueBytes: 1_000_000 }),
      new PostgresSaver(db.pool, { maxValueBytes: 1_000_000, ...ON }),
      new PostgresSaver(db.pool, { maxValueBytes: 1_000_000, ...ON, serde: encrypted }),
    ];
    for (const s of savers) {
      // 2 MB in all, each element 50 kB: refused, naming the channel, whatever the storage.
      const refused = tid("too-big");
      const error = await putList(s, refused, big(40)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(PayloadTooLargeError);
      expect((error as PayloadTooLargeError).field).toBe('put checkpoint.channel_values["items"]');
      expect((error as Error).message).toMatch(/serializes to 20\d{5} bytes; the limit \(maxValueBytes\) is 1000000/);
      expect(await elementRows(refused)).toBe(0);
      // 750 kB: accepted, and read back.
      const thread = tid("fits");
      const put = await putList(s, thread, big(15));
      expect((await s.getTuple(put))!.checkpoint.channel_values.items).toEqual(big(15));
    }
  });

  it("by default lists are stored by their elements; elementStorage: false stores them whole (an encrypting serializer's elements: elements-trust.test.ts)", async () => {
    for (const [s, rows] of [
      [new PostgresSaver(db.pool), 40],
      [new PostgresSaver(db.pool, { elementStorage: false }), 0],
    ] as const) {
      const thread = tid("default");
      const put = await putList(s, thread, list(40, "w"));
      expect(await elementRows(thread)).toBe(rows);
      expect((await s.getTuple(put))!.checkpoint.channel_values.items).toEqual(list(40, "w"));
    }
    expect(() => new PostgresSaver(db.pool, { elementStorage: "yes" as unknown as boolean })).toThrow(/elementStorage/);
  });

  it("whole values, and a warning, with a serializer that gives one value different bytes each time", async () => {
    const inner = new PostgresSaver(db.pool).serde;
    // Appends a random byte (as an encrypting wrapper's random IV would change every byte).
    const noisy = {
      dumpsTyped: async (v: unknown): Promise<[string, Uint8Array]> => {
        const [t, b] = await inner.dumpsTyped(v);
        return [`noisy:${t}`, Buffer.concat([b, randomBytes(1)])];
      },
      loadsTyped: (t: string, b: Uint8Array) => inner.loadsTyped(t.slice("noisy:".length), b.subarray(0, b.byteLength - 1)),
    };
    const warned = new Promise<Error>((resolve) => process.once("warning", resolve));
    const s = new PostgresSaver(db.pool, { ...ON, serde: noisy });
    const thread = tid("noisy");
    const put = await putList(s, thread, list(40, "n"));
    expect((await warned).message).toMatch(/elementStorage: the serializer gives the same value different bytes/);
    expect(await elementRows(thread)).toBe(0);
    expect((await s.getTuple(put))!.checkpoint.channel_values.items).toEqual(list(40, "n"));
  });
});

describe("prune and element rows", () => {
  it("removes the elements no remaining checkpoint names, keeps the others; the thread reads back", async () => {
    const thread = tid("prune");
    const graph = chat(saver);
    for (let i = 0; i < 10; i++) await graph.invoke({ messages: [human(i)] }, cfg(thread));
    // Drop the first four messages from the state: only older checkpoints name them.
    const before = await graph.getState(cfg(thread));
    await graph.updateState(cfg(thread), { messages: before.values.messages.slice(0, 4).map((m: BaseMessage) => new RemoveMessage({ id: m.id! })) });
    // 20 messages, and the 4 RemoveMessage the update wrote.
    expect(await elementRows(thread)).toBe(24);
    const holding = async (id: string) =>
      Number((await db.pool.query("SELECT count(*) AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__' AND position(convert_to($2, 'UTF8') in value) > 0", [thread, id])).rows[0].n);
    await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [thread] });
    // The removed messages' rows went (RemoveMessage rows name the ids, and go or stay with the writes naming them).
    for (const m of before.values.messages.slice(0, 4) as BaseMessage[]) expect(await holding(`${m.content}`)).toBe(0);
    for (const m of before.values.messages.slice(4) as BaseMessage[]) expect(await holding(`${m.content}`)).toBe(1);
    const after = await new PostgresSaver(db.pool, ON).getTuple(cfg(thread));
    expect(plain(after!.checkpoint.channel_values.messages as BaseMessage[])).toEqual(plain(before.values.messages.slice(4)));
    // The next turn continues from what is left.
    await chat(new PostgresSaver(db.pool, ON)).invoke({ messages: [human(10)] }, cfg(thread));
    expect((await graph.getState(cfg(thread))).values.messages).toHaveLength(18);
  });
});
