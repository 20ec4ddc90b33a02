/**
 * Encryption at rest: EncryptedSerializer on its own (round trip, rotation,
 * wrong key, tampering, planted plaintext) and as the saver's serde in a real
 * graph run, checking the bytes in the tables.
 */
import { createSecretKey, randomBytes } from "node:crypto";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { beforeAll, describe, expect, it } from "vitest";
import {
  DeserializationError,
  EncryptedSerializer,
  InvalidOptionsError,
  migrate,
  MsgpackSerializer,
  PostgresSaver,
} from "../src/index.js";
import { withTestDatabase } from "./helpers/db.js";
import { approvalGraph, chatGraph, mapReduceGraph, tid } from "./helpers/graphs.js";

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const SECRET = "the launch code is 0000";

const rich = () => ({
  text: SECRET,
  messages: [new HumanMessage({ id: "h1", content: SECRET }), new AIMessage({ id: "a1", content: "ok" })],
  when: new Date(1_700_000_000_000),
  tags: new Set(["a", "b"]),
  big: 12345678901234567890n,
  bytes: new Uint8Array([1, 2, 3]),
  nothing: undefined,
});

async function rejects(p: Promise<unknown>, pattern: RegExp) {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DeserializationError);
  expect((error as Error).message).toMatch(pattern);
  return error as DeserializationError;
}

describe("EncryptedSerializer", () => {
  it("round-trips rich values; the tag names key and inner type; the bytes are not the plaintext", async () => {
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const [type, bytes] = await serde.dumpsTyped(rich());
    expect(type).toBe("enc:k1:msgpack");
    expect(Buffer.from(bytes).includes(Buffer.from(SECRET))).toBe(false);
    const back = await serde.loadsTyped(type, bytes);
    expect(back).toEqual(rich());
    expect(back.messages[0]).toBeInstanceOf(HumanMessage);
    // A fresh IV each time: equal values never give equal bytes.
    const [, again] = await serde.dumpsTyped(rich());
    expect(Buffer.from(again).equals(Buffer.from(bytes))).toBe(false);
  });

  it("wraps any inner serializer and keeps its type tag", async () => {
    const inner = { dumpsTyped: async (v: unknown) => ["json", new TextEncoder().encode(JSON.stringify(v))] as [string, Uint8Array], loadsTyped: async (_t: string, d: Uint8Array | string) => JSON.parse(typeof d === "string" ? d : new TextDecoder().decode(d)) };
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1", inner });
    const [type, bytes] = await serde.dumpsTyped({ a: [1, "x"] });
    expect(type).toBe("enc:k1:json");
    expect(await serde.loadsTyped(type, bytes)).toEqual({ a: [1, "x"] });
  });

  it("rotation: new values use the current key, old ones still decrypt; dropping a key still in use is an error naming it", async () => {
    const before = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const [oldType, oldBytes] = await before.dumpsTyped({ v: "old" });
    const rotated = new EncryptedSerializer({ keys: { k2, k1 }, current: "k2" });
    expect(rotated.currentKeyId).toBe("k2");
    const [newType, newBytes] = await rotated.dumpsTyped({ v: "new" });
    expect(newType).toBe("enc:k2:msgpack");
    expect(await rotated.loadsTyped(oldType, oldBytes)).toEqual({ v: "old" });
    expect(await rotated.loadsTyped(newType, newBytes)).toEqual({ v: "new" });
    const onlyNew = new EncryptedSerializer({ keys: { k2 }, current: "k2" });
    await rejects(onlyNew.loadsTyped(oldType, oldBytes), /key "k1", which is not configured/);
  });

  it("a wrong key under the right id fails to decrypt, with a typed error and no key material in it", async () => {
    const writer = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const [type, bytes] = await writer.dumpsTyped({ v: SECRET });
    const wrong = new EncryptedSerializer({ keys: { k1: k2 }, current: "k1" });
    const error = await rejects(wrong.loadsTyped(type, bytes), /Could not decrypt a value under key "k1": wrong key/);
    expect(error.message).not.toContain(k1.toString("hex"));
    expect(error.message).not.toContain(k2.toString("hex"));
    expect(JSON.stringify(error)).not.toContain(SECRET);
  });

  it("tampering with any byte, the length, or the type tag is detected", async () => {
    const serde = new EncryptedSerializer({ keys: { k1, k2 }, current: "k1" });
    const [type, bytes] = await serde.dumpsTyped({ v: SECRET, n: 42 });
    // Every single-bit flip: version, IV, ciphertext, tag.
    for (let i = 0; i < bytes.length; i++) {
      const bad = new Uint8Array(bytes);
      bad[i]! ^= 1 << i % 8;
      await expect(serde.loadsTyped(type, bad)).rejects.toBeInstanceOf(DeserializationError);
    }
    // Truncated, extended, emptied.
    for (const bad of [bytes.subarray(0, bytes.length - 1), bytes.subarray(0, 20), new Uint8Array([...bytes, 0]), new Uint8Array()]) {
      await expect(serde.loadsTyped(type, bad)).rejects.toBeInstanceOf(DeserializationError);
    }
    // The tag is authenticated: another key id or inner type does not decrypt.
    await rejects(serde.loadsTyped("enc:k2:msgpack", bytes), /wrong key, or the data or its type tag were altered/);
    await rejects(serde.loadsTyped("enc:k1:json", bytes), /wrong key, or the data or its type tag were altered/);
    for (const tag of ["enc:", "enc:k1", "enc:k1:", "enc::msgpack", "enc:bad id:msgpack"]) {
      await expect(serde.loadsTyped(tag, bytes)).rejects.toBeInstanceOf(DeserializationError);
    }
    await expect(serde.loadsTyped(type, "not bytes")).rejects.toBeInstanceOf(DeserializationError);
  });

  it("refuses plaintext values unless allowPlaintext (then reads them through the inner serializer)", async () => {
    const [plainType, plain] = await new MsgpackSerializer().dumpsTyped({ planted: true });
    const strict = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    await rejects(strict.loadsTyped(plainType, plain), /Refusing an unencrypted value \(type "msgpack"\)/);
    await rejects(strict.loadsTyped("json", new TextEncoder().encode("{}")), /Refusing an unencrypted value/);
    const lenient = new EncryptedSerializer({ keys: { k1 }, current: "k1", allowPlaintext: true });
    expect(await lenient.loadsTyped(plainType, plain)).toEqual({ planted: true });
    // Writing always encrypts.
    expect((await lenient.dumpsTyped({ x: 1 }))[0]).toBe("enc:k1:msgpack");
  });

  it("validates its options, naming the bad one", () => {
    const bad = (options: unknown, option: string) => {
      const make = () => new EncryptedSerializer(options as never);
      expect(make).toThrow(InvalidOptionsError);
      expect(make).toThrow(expect.objectContaining({ option }) as Error);
    };
    bad({ keys: {}, current: "k1" }, "keys");
    bad({ keys: { k1: randomBytes(16) }, current: "k1" }, 'keys["k1"]');
    bad({ keys: { "k:1": k1 }, current: "k:1" }, 'keys["k:1"]');
    bad({ keys: { k1 }, current: "k2" }, "current");
    bad({ keys: { k1 }, current: "k1", inner: {} }, "inner");
    bad({ keys: { k1: createSecretKey(randomBytes(24)) }, current: "k1" }, 'keys["k1"]');
    expect(new EncryptedSerializer({ keys: new Map([["k1", createSecretKey(k1)]]), current: "k1" }).currentKeyId).toBe("k1");
  });

  it("keeps its own copy of the key (a caller that zeroes its buffer does not break it)", async () => {
    const key = Buffer.from(k1);
    const serde = new EncryptedSerializer({ keys: { k1: key }, current: "k1" });
    const [type, bytes] = await serde.dumpsTyped("x");
    key.fill(0);
    expect(await serde.loadsTyped(type, bytes)).toBe("x");
    expect(Object.keys(serde)).toEqual([]); // nothing enumerable, nothing to leak by logging it
  });
});

describe("EncryptedSerializer as the saver's serde", () => {
  const db = withTestDatabase("encryption");
  beforeAll(async () => {
    await migrate({ pool: db.pool });
  });

  async function storedValues(threadId: string) {
    const { rows } = await db.pool.query(
      `SELECT 'blob' AS kind, type, value FROM checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL
       UNION ALL SELECT 'write', type, value FROM checkpoint_writes WHERE thread_id = $1
       UNION ALL SELECT 'unversioned', unversioned_type, unversioned_values FROM checkpoints WHERE thread_id = $1 AND unversioned_values IS NOT NULL`,
      [threadId],
    );
    return rows as { kind: string; type: string; value: Buffer }[];
  }

  it("a graph run with messages and an interrupt: every stored value is ciphertext tagged enc:, and it all reads back", async () => {
    const saver = new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    const thread = tid("enc-chat");
    const chat = chatGraph(saver);
    await chat.invoke({ messages: [new HumanMessage(SECRET)] }, { configurable: { thread_id: thread } });
    const out = await chat.invoke({ messages: [new HumanMessage("again")] }, { configurable: { thread_id: thread } });
    expect(out.messages.map((m: { content: unknown }) => m.content)).toEqual([SECRET, `echo: ${SECRET}`, "again", "echo: again"]);

    const approval = approvalGraph(saver);
    const athread = tid("enc-approval");
    await approval.invoke({}, { configurable: { thread_id: athread } });
    const done = await approval.invoke(new Command({ resume: "yes" }), { configurable: { thread_id: athread } });
    expect(done).toEqual({ draft: "hello world", approved: "yes", published: true });

    for (const t of [thread, athread]) {
      const rows = await storedValues(t);
      expect(rows.length).toBeGreaterThan(3);
      expect(rows.filter((r) => r.kind === "write").length).toBeGreaterThan(0);
      expect(rows.filter((r) => r.kind === "unversioned").length).toBeGreaterThan(0);
      for (const r of rows) {
        expect(r.type).toBe("enc:k1:msgpack");
        expect(r.value.includes(Buffer.from(SECRET))).toBe(false);
        expect(r.value.includes(Buffer.from("publish?"))).toBe(false); // the interrupt's question
        expect(r.value.includes(Buffer.from("hello world"))).toBe(false);
      }
    }
    // A saver without the key cannot read the thread.
    await expect(new PostgresSaver(db.pool).getTuple({ configurable: { thread_id: thread } })).rejects.toBeInstanceOf(DeserializationError);
  });

  it("linear lineage mode works with encryption: a finished run (empty task list, encrypted) lets the next run start", async () => {
    // The linear-mode "settled head" check must not depend on reading plaintext blob bytes.
    const saver = new PostgresSaver(db.pool, { lineage: "linear", serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    const config = { configurable: { thread_id: tid("enc-linear") } };
    const graph = mapReduceGraph(saver, new Map());
    expect((await graph.invoke({ items: ["a", "b"] }, config)).total).toBe("A,B");
    expect((await graph.invoke({ items: ["c"] }, config)).total).toBe("A,B,C");
  });

  it("rotation with a real thread: old rows keep k1, new rows get k2, the whole history reads back", async () => {
    const thread = tid("enc-rotate");
    const config = { configurable: { thread_id: thread } };
    await chatGraph(new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) })).invoke({ messages: [new HumanMessage("one")] }, config);
    const rotated = new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k2, k1 }, current: "k2" }) });
    const out = await chatGraph(rotated).invoke({ messages: [new HumanMessage("two")] }, config);
    expect(out.messages.map((m: { content: unknown }) => m.content)).toEqual(["one", "echo: one", "two", "echo: two"]);
    const types = new Set((await storedValues(thread)).map((r) => r.type));
    expect(types).toEqual(new Set(["enc:k1:msgpack", "enc:k2:msgpack"]));
    let n = 0;
    for await (const t of rotated.list(config)) {
      expect(t.checkpoint.id).toBeTypeOf("string");
      n++;
    }
    expect(n).toBe(6);
  });

  it("a plaintext value planted by someone with write access is refused; allowPlaintext reads pre-encryption rows", async () => {
    const thread = tid("enc-plant");
    const config = { configurable: { thread_id: thread } };
    // Written before encryption was turned on.
    await chatGraph(new PostgresSaver(db.pool)).invoke({ messages: [new HumanMessage("plain era")] }, config);
    const strict = new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    await expect(strict.getTuple(config)).rejects.toThrow(/Refusing an unencrypted value/);
    const migrating = new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k1 }, current: "k1", allowPlaintext: true }) });
    const out = await chatGraph(migrating).invoke({ messages: [new HumanMessage("encrypted era")] }, config);
    expect(out.messages).toHaveLength(4);

    // Now plant a plaintext message over an encrypted value.
    const [type, bytes] = await new MsgpackSerializer().dumpsTyped([new AIMessage("planted")]);
    const { rowCount } = await db.pool.query(
      "UPDATE checkpoint_blobs SET type = $2, value = $3 WHERE thread_id = $1 AND channel = 'messages' AND type LIKE 'enc:%'",
      [thread, type, Buffer.from(bytes)],
    );
    expect(rowCount).toBeGreaterThan(0);
    await expect(strict.getTuple(config)).rejects.toThrow(/Refusing an unencrypted value/);
  });

  it("the official constructor shape new PostgresSaver(pool, serde, { schema }): that serde encrypts, in that schema; the pool stays open", async () => {
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    await migrate({ pool: db.pool, schema: "enc-three-args" });
    const saver = new PostgresSaver(db.pool, serde, { schema: "enc-three-args" });
    expect(saver.schema).toBe("enc-three-args");
    expect(saver.serde).toBe(serde);
    const thread = tid("enc-3");
    const config = { configurable: { thread_id: thread } };
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h", content: SECRET })] }, config);
    const { rows } = await db.pool.query(
      `SELECT type, value FROM "enc-three-args".checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL
       UNION ALL SELECT type, value FROM "enc-three-args".checkpoint_writes WHERE thread_id = $1`,
      [thread],
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.type).toMatch(/^enc:k1:/);
      expect(Buffer.from(r.value).includes(Buffer.from(SECRET))).toBe(false);
    }
    // Nothing went to the default schema.
    expect((await db.pool.query("SELECT count(*)::int AS n FROM public.checkpoints WHERE thread_id = $1", [thread])).rows[0].n).toBe(0);
    expect((await chatGraph(saver).getState(config)).values.messages.map((m: { content: unknown }) => m.content)).toEqual([SECRET, `echo: ${SECRET}`]);
    await expect(new PostgresSaver(db.pool, undefined, { schema: "enc-three-args" }).getTuple(config)).rejects.toBeInstanceOf(DeserializationError);
    // end() closes only what the saver opened: the caller's pool stays usable.
    await saver.end();
    expect((await db.pool.query("SELECT 1 AS one")).rows[0].one).toBe(1);
  });

  it("the three-argument form refuses what it cannot honour: unknown options, a serde given twice, a non-serializer second argument", () => {
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const other = new MsgpackSerializer();
    const cases: [() => unknown, string][] = [
      [() => new PostgresSaver(db.pool, serde, { schema: "s", tenant: "x" } as never), "tenant"],
      [() => new PostgresSaver(db.pool, serde, { serde: other }), "serde"],
      [() => new PostgresSaver(db.pool, { schema: "s" } as never, { schema: "t" }), "serde"],
      [() => new PostgresSaver(db.pool, { schema: "s", pool: {} } as never), "pool"],
      [() => new PostgresSaver(db.pool, { serde: {} as never }), "serde"],
    ];
    for (const [make, option] of cases) {
      let error: unknown;
      try {
        make();
      } catch (e) {
        error = e;
      }
      expect(error, option).toBeInstanceOf(InvalidOptionsError);
      expect((error as InvalidOptionsError).option, option).toBe(option);
    }
    // The same serde in both places is no conflict; undefined takes the default.
    expect(new PostgresSaver(db.pool, serde, { serde }).serde).toBe(serde);
    expect(new PostgresSaver(db.pool, undefined, { schema: "s" }).serde).toBeInstanceOf(MsgpackSerializer);
  });
});

