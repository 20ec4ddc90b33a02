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
import { longText } from "../helpers/checkpoints.js";
import { elementCodec, type ElementCodec } from "../../src/saver/element-codec.js";
import { encodeList, type EncodedList } from "../../src/saver/elements.js";
import { encodeStored } from "../../src/saver/stored.js";
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
    // Elements long enough to be stored by them (a list of small ones is stored whole: below).
    const put = await putList(saver, thread, [0, 1, 2].map((i) => ({ n: i, text: longText(`missing ${i}`) })));
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
    // Appends a byte that differs from call to call, as an encrypting wrapper's random IV changes every byte
    // (a random byte repeated itself once in 256 runs: the check saw one value the same twice, and no warning came).
    let calls = 0;
    const noisy = {
      dumpsTyped: async (v: unknown): Promise<[string, Uint8Array]> => {
        const [t, b] = await inner.dumpsTyped(v);
        return [`noisy:${t}`, Buffer.concat([b, Buffer.from([calls++ & 0xff])])];
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

describe("small lists are stored whole (issue 40)", () => {
  const cfgAt = (thread_id: string, checkpoint_id?: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) } });
  /** A text of `chars` characters (ASCII) beginning with `label`. */
  const sized = (label: string, chars: number) => `${label} `.padEnd(chars, ".");
  /** What a list's elements take serialized, each alone, as element storage weighs them (element-codec.ts `element(...).size`). */
  const elementBytes = async (list: unknown[]) => {
    let n = 0;
    for (const e of list) n += (await saver.serde.dumpsTyped(e))[1].byteLength;
    return n;
  };
  async function typeOf(thread: string, table: "checkpoint_blobs" | "checkpoint_writes", where: string, values: unknown[]): Promise<string[]> {
    const { rows } = await db.pool.query(`SELECT type FROM ${table} WHERE thread_id = $1 AND ${where} ORDER BY 1`, [thread, ...values]);
    return rows.map((r) => r.type as string);
  }

  it("a list whose elements take under 256 bytes is not stored by them: whole while it serializes to under 256 bytes; from 256 bytes of elements on, the same channel is stored by its elements; each checkpoint reads back", async () => {
    // msgpack writes a string of 32-255 characters with a 2-byte header, a list of up to 15 with a 1-byte one:
    // [125, 125 characters] is 127 + 127 = 254 bytes of elements, 255 whole; [125, 126] is 255 of elements and
    // 256 whole; [126, 126] is 256 of elements: either side of BY_CONTENT_MIN_BYTES, for the whole value and
    // for the elements.
    const small = [sized("first", 125), sized("second", 125)];
    const below = [sized("first", 125), sized("second", 126)];
    const at = [sized("first", 126), sized("second", 126)];
    const whole = async (list: unknown[]) => (await saver.serde.dumpsTyped(list))[1].byteLength;
    expect([await elementBytes(small), await whole(small)]).toEqual([254, 255]);
    expect([await elementBytes(below), await whole(below)]).toEqual([255, 256]);
    expect(await elementBytes(at)).toBe(256);
    const thread = tid("threshold");
    // The channel grows, shrinks below again, and grows back to elements already stored. [value, its blob's type,
    // the thread's element rows after it]: none while the lists are small (no element rows for a list stored
    // whole); a list of 255 bytes of elements is 256 bytes whole, so it is what any value of 256 bytes or more
    // is, a large value by content (`pg:val`: one element row holding the whole list), not a list by its elements.
    const steps: [unknown[], string, number][] = [
      [["hi"], "msgpack", 0],
      [small, "msgpack", 0],
      [below, "pg:val", 1],
      [at, "pg:refs", 3],
      [[...at, sized("third", 100)], "pg:refs", 4],
      [small, "msgpack", 4],
      [at, "pg:refs", 4],
    ];
    const puts: { config: RunnableConfig; items: unknown[] }[] = [];
    let parent: string | undefined;
    for (const [i, [items, type, rows]] of steps.entries()) {
      const version = i + 1;
      const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { items }, channel_versions: { items: version } };
      const config = await saver.put(cfgAt(thread, parent), cp, { source: "loop", step: version, parents: {} }, { items: version });
      parent = config.configurable!.checkpoint_id as string;
      // Its blob's type; the thread's element rows (none until a list is worth them: no rows for a list stored whole).
      expect(await typeOf(thread, "checkpoint_blobs", "channel = 'items' AND version = $2", [String(version)]), `step ${version}`).toEqual([type]);
      expect(await elementRows(thread), `step ${version}`).toBe(rows);
      puts.push({ config, items });
    }
    // Pending writes the same way: a small list whole, one at the boundary by its elements (stored already).
    await saver.putWrites(puts.at(-1)!.config, [["items", small], ["items", at]], "task-1");
    expect(await typeOf(thread, "checkpoint_writes", "channel = 'items'", [])).toEqual(["msgpack", "pg:refs"]);
    expect(await elementRows(thread)).toBe(4);
    // Read back by a saver that remembers nothing: each checkpoint (getTuple), and all of them (list()).
    const fresh = new PostgresSaver(db.pool, ON);
    for (const { config, items } of puts) expect((await fresh.getTuple(config))!.checkpoint.channel_values).toEqual({ items });
    expect((await fresh.getTuple(puts.at(-1)!.config))!.pendingWrites).toEqual([
      ["task-1", "items", small],
      ["task-1", "items", at],
    ]);
    const listed: unknown[] = [];
    for await (const t of fresh.list(cfgAt(thread))) listed.push(t.checkpoint.channel_values.items);
    expect(listed).toEqual(puts.map((p) => p.items).reverse());
  });

  it("one put whose channels hold the same elements (objects holding the list, the list itself) stores each element row once and reads back; so does one putWrites", async () => {
    // A put encodes its channels concurrently, each form against a copy of what the put sends already (a list
    // or an object too small for its element rows is stored whole, and sends none). A form chosen must then claim
    // only the rows no other channel sent meanwhile: before, the four objects (and the lists) each sent the
    // three elements, and the statement failed with SQLSTATE 21000 ("ON CONFLICT DO UPDATE command cannot
    // affect row a second time").
    const shared = [longText("shared 0"), longText("shared 1"), longText("shared 2")];
    const values = {
      a: { messages: shared },
      b: { messages: shared, n: 1 },
      c: { messages: [...shared] },
      d: { messages: shared, copy: shared },
      e: shared,
      f: [...shared],
    };
    const thread = tid("same-elements");
    const versions = Object.fromEntries(Object.keys(values).map((k) => [k, 1]));
    const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
    const put = await saver.put(cfg(thread), cp, { source: "input", step: -1, parents: {} }, versions);
    expect(await elementRows(thread)).toBe(3);
    const { rows } = await db.pool.query("SELECT channel, type FROM checkpoint_blobs WHERE thread_id = $1 AND channel <> '__elements__' ORDER BY 1", [thread]);
    expect(rows.map((r) => `${r.channel} ${r.type}`)).toEqual(["a pg:obj:msgpack", "b pg:obj:msgpack", "c pg:obj:msgpack", "d pg:obj:msgpack", "e pg:refs", "f pg:refs"]);
    expect((await new PostgresSaver(db.pool, ON).getTuple(put))!.checkpoint.channel_values).toEqual(values);

    // A putWrites sends every element its writes name (its checkpoint may not be stored yet): the same race, on a
    // thread holding none of them.
    const other = tid("same-writes");
    const empty: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1) };
    const config = await saver.put(cfg(other), empty, { source: "input", step: -1, parents: {} }, {});
    const writes: [string, unknown][] = Object.entries(values);
    await saver.putWrites(config, writes, "task-1");
    expect(await elementRows(other)).toBe(3);
    expect((await new PostgresSaver(db.pool, ON).getTuple(config))!.pendingWrites).toEqual(writes.map(([channel, value]) => ["task-1", channel, value]));
  });
});

describe("a list's elements are serialized in one pass; a value too small for them is not taken apart (issue 40)", () => {
  const row = { table: "checkpoint_blobs", threadId: "t", checkpointNs: "", channel: "messages", version: "1" } as const;

  it("stores what serializing element by element stores: the same refs, hashes, sizes and rows, across chunks, repeats and what is sent already", async () => {
    const codec = elementCodec(saver.serde)!;
    let passes = 0;
    const onePass: ElementCodec = { ...codec, each: (list, visit) => (passes++, codec.each!(list, visit)) };
    const byElement: ElementCodec = { ...codec, each: undefined };
    const messages = Array.from({ length: 70 }, (_, i) => new HumanMessage({ content: longText(i % 50), id: `m-${i % 50}` }));
    const first = await encodeList(byElement, messages.slice(0, 40), row, undefined, new Set());
    // Some elements stored already (known), one sent by another channel of the same put.
    const known = new Set(first!.hashes.slice(5, 20));
    for (const list of [messages.slice(0, 1), messages.slice(0, 33), messages]) {
      for (const knownSet of [undefined, known]) {
        const [a, b] = [new Set([first!.hashes[30]!]), new Set([first!.hashes[30]!])];
        // Bytes compared as bytes (one pass copies them into a Buffer, the serializer returns a Uint8Array).
        const plain = (e: EncodedList | undefined) => e && { ...e, rows: e.rows.map((r) => ({ ...r, bytes: Buffer.from(r.bytes) })) };
        const one = plain(await encodeList(onePass, list, row, knownSet, a));
        expect(one!.rows.length).toBeGreaterThan(0);
        expect(one).toEqual(plain(await encodeList(byElement, list, row, knownSet, b)));
        expect(a).toEqual(b);
      }
    }
    expect(passes).toBe(6);
  });

  it("a value certainly under 256 bytes (a short string, a few short items) is stored whole without its elements serialized: the same row as before", async () => {
    const codec = elementCodec(saver.serde)!;
    let small = 0;
    const bounded: ElementCodec = { ...codec, smallerThan: (value, bytes) => (codec.smallerThan!(value, bytes) ? (small++, true) : false) };
    const unbounded: ElementCodec = { ...codec, smallerThan: undefined };
    const values = ["hi", Array.from({ length: 10 }, (_, i) => `n${i}`), [1, 2.5, -0, null, undefined, true], ["\ud800 lone"], [[1, 2], [3]], "x".repeat(80)];
    for (const value of values) {
      const fast = await encodeStored({ serde: saver.serde, codec: bounded }, value, row, undefined, new Set());
      expect(fast.type).toBe("msgpack");
      expect(fast).toEqual(await encodeStored({ serde: saver.serde, codec: unbounded }, value, row, undefined, new Set()));
    }
    expect(small).toBe(values.length);
  });

  it("a list with an element msgpack cannot write as it is (a function in it) is stored whole, and reads back as on MemorySaver", async () => {
    const items = Array.from({ length: 4 }, (_, i) => ({ text: longText(i), ...(i === 2 ? { callback: () => i } : {}) }));
    const thread = tid("one-pass-whole");
    const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { items }, channel_versions: { items: 1 } };
    const meta = { source: "input", step: -1, parents: {} } as const;
    const config = await saver.put(cfg(thread), cp, meta, { items: 1 });
    const { rows } = await db.pool.query("SELECT type FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'items'", [thread]);
    expect(rows.map((r) => r.type)).toEqual(["msgpack"]);
    expect(await elementRows(thread)).toBe(0);
    const memory = new MemorySaver();
    const memoryConfig = await memory.put(cfg(thread), cp, meta);
    const expected = (await memory.getTuple(memoryConfig))!.checkpoint.channel_values;
    expect(expected.items).toHaveLength(4);
    expect((await new PostgresSaver(db.pool, ON).getTuple(config))!.checkpoint.channel_values).toEqual(expected);
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
