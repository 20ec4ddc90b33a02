/**
 * Encryption at rest: EncryptedSerializer on its own (round trip, rotation,
 * wrong key, tampering, planted plaintext) and as the saver's serde in a real
 * graph run, checking the bytes in the tables.
 */
import { createSecretKey, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { beforeAll, describe, expect, it } from "vitest";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import {
  DeserializationError,
  EncryptedSerializer,
  exportThread,
  InvalidOptionsError,
  migrate,
  MsgpackSerializer,
  PostgresSaver,
  reencrypt,
  show,
  type ValueRow,
} from "../../src/index.js";
import { runCli, ROOT } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { approvalGraph, chatGraph, mapReduceGraph, tid } from "../helpers/graphs.js";

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

  /**
   * What a stored value's type says of its encryption: the key of a sealed value (`enc:k1`, also for an
   * object whose lists are stored by their elements, `pg:obj:enc:k1:...`), or `refs` for the keyed hashes
   * and tag of a value stored by content (its elements are sealed in their own rows).
   */
  const sealing = (type: string) => (type === "pg:refs" || type === "pg:val" ? "refs" : /^(?:pg:obj:)?(enc:[^:]+):/.exec(type)?.[1] ?? type);

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
        expect(["enc:k1", "refs"]).toContain(sealing(r.type));
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
    const types = new Set((await storedValues(thread)).map((r) => sealing(r.type)));
    expect(types).toEqual(new Set(["enc:k1", "enc:k2", "refs"]));
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

    // Now plant a plaintext message over an encrypted one (an element of the messages list).
    const [type, bytes] = await new MsgpackSerializer().dumpsTyped(new AIMessage("planted"));
    const { rowCount } = await db.pool.query(
      "UPDATE checkpoint_blobs SET type = $2, value = $3 WHERE thread_id = $1 AND channel = '__elements__' AND type LIKE 'enc:%'",
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
      expect(["enc:k1", "refs"]).toContain(sealing(r.type));
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

describe("EncryptedSerializer bound to its row (issue #15, row 5)", () => {
  const db = withTestDatabase("encryption-rows");
  beforeAll(async () => {
    await migrate({ pool: db.pool });
  });
  const blob = (threadId: string, channel = "messages", version = "1"): ValueRow => ({ table: "checkpoint_blobs", threadId, checkpointNs: "", channel, version });

  it("a value reads back only in the row it was written for; loadsTyped without a row refuses it", async () => {
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const row: ValueRow = { table: "checkpoint_writes", threadId: "t", checkpointNs: "", checkpointId: "c", taskId: "task", idx: 0 };
    const [type, bytes] = await serde.dumpsTypedForRow(rich(), row);
    expect(type).toBe("enc:k1:msgpack");
    expect(bytes[0]).toBe(2);
    expect(await serde.loadsTypedForRow(type, bytes, row)).toEqual(rich());
    const elsewhere: ValueRow[] = [
      { ...row, threadId: "t2" },
      { ...row, checkpointNs: "sub" },
      { ...row, checkpointId: "c2" },
      { ...row, taskId: "other" },
      { ...row, idx: 1 },
      { table: "checkpoints", threadId: "t", checkpointNs: "", checkpointId: "c" },
      blob("t", "task", "0"),
    ];
    for (const other of elsewhere) await rejects(serde.loadsTypedForRow(type, bytes, other), /moved from another row/);
    await rejects(serde.loadsTyped(type, bytes), /bound to the row that stores it/);
    // The format byte is authenticated too: claiming format 1 does not strip the binding.
    const downgraded = Uint8Array.from(bytes);
    downgraded[0] = 1;
    await rejects(serde.loadsTypedForRow(type, downgraded, row), /Could not decrypt/);
    await rejects(serde.loadsTyped(type, downgraded), /Could not decrypt/);
  });

  async function encryptedThread(saver: PostgresSaver, name: string) {
    const thread = tid(name);
    await chatGraph(saver).invoke({ messages: [new HumanMessage(`${SECRET} (${name})`)] }, { configurable: { thread_id: thread } });
    await chatGraph(saver).invoke({ messages: [new HumanMessage("second turn")] }, { configurable: { thread_id: thread } });
    return thread;
  }

  it("the saver binds every value to its row: a blob, a write or a checkpoint's values moved or swapped with SQL fail with DeserializationError", async () => {
    const saver = new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    const victim = await encryptedThread(saver, "bound-victim");
    const source = await encryptedThread(saver, "bound-source");
    const config = { configurable: { thread_id: victim } };
    expect((await saver.getTuple(config))?.checkpoint.channel_values.messages).toHaveLength(4);
    const { rows: formats } = await db.pool.query(
      `SELECT DISTINCT get_byte(value, 0) AS f FROM checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL AND type LIKE 'enc:%'
       UNION SELECT get_byte(value, 0) FROM checkpoint_writes WHERE thread_id = $1 AND type LIKE 'enc:%'
       UNION SELECT get_byte(unversioned_values, 0) FROM checkpoints WHERE thread_id = $1 AND unversioned_values IS NOT NULL`,
      [victim],
    );
    expect(formats).toEqual([{ f: 2 }]);

    const head = (await db.pool.query("SELECT checkpoint_id FROM checkpoint_heads WHERE thread_id = $1", [victim])).rows[0].checkpoint_id as string;
    const headVersion = (await saver.getTuple(config))!.checkpoint.channel_versions.messages as unknown as string;
    const attempts: [string, string, unknown[]][] = [
      // Another thread's value for the same channel.
      [
        "blob from another thread",
        `UPDATE checkpoint_blobs b SET value = s.value FROM (SELECT value FROM checkpoint_blobs WHERE thread_id = $2 AND channel = 'messages' AND value IS NOT NULL LIMIT 1) s
          WHERE b.thread_id = $1 AND b.channel = 'messages' AND b.version = $3`,
        [victim, source, headVersion],
      ],
      // An older version of the same channel, same thread (a swap back in time).
      [
        "older version, same thread",
        `UPDATE checkpoint_blobs b SET value = s.value FROM (SELECT value FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'messages' AND version <> $2 AND value IS NOT NULL LIMIT 1) s
          WHERE b.thread_id = $1 AND b.channel = 'messages' AND b.version = $2`,
        [victim, headVersion],
      ],
    ];
    for (const [what, sql, params] of attempts) {
      const { rows: saved } = await db.pool.query("SELECT value FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'messages' AND version = $2", [victim, headVersion]);
      expect((await db.pool.query(sql, params)).rowCount, what).toBe(1);
      await rejects(saver.getTuple(config), /moved from another row/);
      await db.pool.query("UPDATE checkpoint_blobs SET value = $3 WHERE thread_id = $1 AND channel = 'messages' AND version = $2", [victim, headVersion, saved[0].value]);
      expect((await saver.getTuple(config))?.checkpoint.channel_values.messages, what).toHaveLength(4);
    }

    // A pending write moved to another task of the checkpoint: put one there first.
    const writeConfig = { configurable: { thread_id: victim, checkpoint_ns: "", checkpoint_id: head } };
    await saver.putWrites(writeConfig, [["messages", [new HumanMessage("w1")]]], "task-a");
    await saver.putWrites(writeConfig, [["messages", [new HumanMessage("w2")]]], "task-b");
    await db.pool.query(
      `UPDATE checkpoint_writes SET value = (SELECT value FROM checkpoint_writes WHERE thread_id = $1 AND task_id = 'task-a')
        WHERE thread_id = $1 AND task_id = 'task-b'`,
      [victim],
    );
    await rejects(saver.getTuple(config), /moved from another row/);
    await db.pool.query("DELETE FROM checkpoint_writes WHERE thread_id = $1 AND task_id IN ('task-a', 'task-b')", [victim]);

    // The values without a version of one checkpoint copied into another.
    const { rowCount } = await db.pool.query(
      `UPDATE checkpoints c SET unversioned_values = s.unversioned_values, unversioned_type = s.unversioned_type
         FROM (SELECT unversioned_values, unversioned_type FROM checkpoints WHERE thread_id = $2 AND unversioned_values IS NOT NULL LIMIT 1) s
        WHERE c.thread_id = $1 AND c.checkpoint_id = $3`,
      [victim, source, head],
    );
    expect(rowCount).toBe(1);
    await rejects(saver.getTuple(config), /moved from another row/);
  });

  it("rows written before row binding (format 1) still read; reencrypt rewrites them (and old keys' rows) bound, under the current key", async () => {
    const old = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    // What earlier releases wrote: the serializer never saw a row.
    const unbound: SerializerProtocol = { dumpsTyped: (v) => old.dumpsTyped(v), loadsTyped: (t, d) => old.loadsTyped(t, d) };
    const schema = "format_1";
    await migrate({ pool: db.pool, schema });
    const thread = await encryptedThread(new PostgresSaver(db.pool, { schema, serde: unbound }), "format-1");
    const config = { configurable: { thread_id: thread } };
    const serde = new EncryptedSerializer({ keys: { k2, k1 }, current: "k2" });
    const saver = new PostgresSaver(db.pool, { schema, serde });
    const before = (await saver.getTuple(config))!;
    expect(before.checkpoint.channel_values.messages).toHaveLength(4);
    // A format-1 value can still be moved: allowUnbound: false refuses it.
    const strict = new PostgresSaver(db.pool, { schema, serde: new EncryptedSerializer({ keys: { k2, k1 }, current: "k2", allowUnbound: false }) });
    await rejects(strict.getTuple(config), /not bound to its row/);

    const forms = async () =>
      (
        await db.pool.query(
          `SELECT DISTINCT type, get_byte(value, 0) AS f FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL
           UNION SELECT type, get_byte(value, 0) FROM ${schema}.checkpoint_writes WHERE thread_id = $1
           UNION SELECT unversioned_type, get_byte(unversioned_values, 0) FROM ${schema}.checkpoints WHERE thread_id = $1 AND unversioned_values IS NOT NULL`,
          [thread],
        )
      ).rows;
    expect(await forms()).toEqual([{ type: "enc:k1:msgpack", f: 1 }]);
    const dry = await reencrypt({ pool: db.pool, schema, serde, dryRun: true });
    expect(dry.blobs).toBeGreaterThan(0);
    expect(dry.writes).toBeGreaterThan(0);
    expect(dry.checkpoints).toBeGreaterThan(0);
    expect(await forms()).toEqual([{ type: "enc:k1:msgpack", f: 1 }]);
    const progress: number[] = [];
    const done = await reencrypt({ pool: db.pool, schema, serde, batchSize: 3, onProgress: (p) => progress.push(p.blobs + p.writes + p.checkpoints) });
    expect({ blobs: done.blobs, writes: done.writes, checkpoints: done.checkpoints }).toEqual({ blobs: dry.blobs, writes: dry.writes, checkpoints: dry.checkpoints });
    expect(progress.length).toBeGreaterThan(3);
    expect(await forms()).toEqual([{ type: "enc:k2:msgpack", f: 2 }]);
    // Same values, now readable without k1 and without format 1.
    const after = await new PostgresSaver(db.pool, { schema, serde: new EncryptedSerializer({ keys: { k2 }, current: "k2", allowUnbound: false }) }).getTuple(config);
    expect(after?.checkpoint).toEqual(before.checkpoint);
    expect(after?.pendingWrites).toEqual(before.pendingWrites);
    const again = await reencrypt({ pool: db.pool, schema, serde });
    expect({ blobs: again.blobs, writes: again.writes, checkpoints: again.checkpoints }).toEqual({ blobs: 0, writes: 0, checkpoints: 0 });
  });

  it("the CLI: reencrypt --module <file> (--dry-run counts, then rewrites)", async () => {
    const schema = "cli_reencrypt";
    await migrate({ pool: db.pool, schema });
    const old = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const unbound: SerializerProtocol = { dumpsTyped: (v) => old.dumpsTyped(v), loadsTyped: (t, d) => old.loadsTyped(t, d) };
    const thread = await encryptedThread(new PostgresSaver(db.pool, { schema, serde: unbound }), "cli-format-1");
    const dir = mkdtempSync(join(tmpdir(), "reencrypt-"));
    const module = join(dir, "serde.ts");
    writeFileSync(
      module,
      `import { EncryptedSerializer } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
        `export const serde = new EncryptedSerializer({ keys: { k1: Buffer.from("${k1.toString("hex")}", "hex") }, current: "k1" });\n`,
    );
    const args = ["reencrypt", "--module", module, "--database-url", db.url, "--schema", schema, "--json"];
    const dry = await runCli([...args, "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, blobs: expect.any(Number) });
    expect(JSON.parse(dry.stdout).blobs).toBeGreaterThan(0);
    const real = await runCli(args);
    expect(real.code, real.stderr).toBe(0);
    expect(JSON.parse(real.stdout).blobs).toBe(JSON.parse(dry.stdout).blobs);
    const { rows } = await db.pool.query(`SELECT DISTINCT get_byte(value, 0) AS f FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL`, [thread]);
    expect(rows).toEqual([{ f: 2 }]);
    expect((await runCli(["reencrypt", "--database-url", db.url])).code).toBe(2);
  });

  it("reencrypt encrypts rows written before encryption only with allowPlaintext", async () => {
    const schema = "plain_era";
    await migrate({ pool: db.pool, schema });
    const thread = await encryptedThread(new PostgresSaver(db.pool, { schema }), "plain-era");
    const config = { configurable: { thread_id: thread } };
    const strict = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const skipped = await reencrypt({ pool: db.pool, schema, serde: strict, dryRun: true });
    expect(skipped).toMatchObject({ byContent: 0, blobs: 0, writes: 0, checkpoints: 0 });
    const migrating = new EncryptedSerializer({ keys: { k1 }, current: "k1", allowPlaintext: true });
    const planned = await reencrypt({ pool: db.pool, schema, serde: migrating, dryRun: true });
    expect(planned.blobs).toBeGreaterThan(0);
    // The messages lists (channel values and the tasks' writes) are stored by their elements: unkeyed hashes, no tag.
    expect(planned.byContent).toBeGreaterThan(0);
    await reencrypt({ pool: db.pool, schema, serde: migrating });
    // Nothing is left in plaintext or under no key: every value is encrypted under k1, or names its
    // elements by k1's keyed hashes under a k1 tag (the strict reads below refuse anything else).
    const { rows } = await db.pool.query(
      `SELECT DISTINCT type FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL
       UNION SELECT DISTINCT type FROM ${schema}.checkpoint_writes WHERE thread_id = $1 ORDER BY 1`,
      [thread],
    );
    expect(rows).toEqual([{ type: "enc:k1:msgpack" }, { type: "pg:refs" }]);
    const { rows: values } = await db.pool.query(
      `SELECT value FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL UNION ALL SELECT value FROM ${schema}.checkpoint_writes WHERE thread_id = $1`,
      [thread],
    );
    for (const v of values) expect(Buffer.from(v.value).includes(Buffer.from(SECRET))).toBe(false);
    const strictSaver = new PostgresSaver(db.pool, { schema, serde: strict });
    expect((await strictSaver.getTuple(config))?.checkpoint.channel_values.messages).toHaveLength(4);
    let writes = 0;
    for await (const t of strictSaver.list(config)) writes += t.pendingWrites?.length ?? 0;
    expect(writes).toBeGreaterThan(0);
    expect(await reencrypt({ pool: db.pool, schema, serde: migrating, dryRun: true })).toMatchObject({ byContent: 0, blobs: 0, writes: 0, checkpoints: 0 });
  });

  it("delta history, show and export decrypt bound values", async () => {
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const saver = new PostgresSaver(db.pool, { serde });
    const thread = await encryptedThread(saver, "bound-read");
    const head = (await saver.getTuple({ configurable: { thread_id: thread } }))!;
    const history = await saver.getDeltaChannelHistory({ config: head.config, channels: ["messages"] });
    expect(history.messages?.seed).toHaveLength(3);
    const shown = await show({ pool: db.pool, threadId: thread, serde });
    expect(shown?.channels.find((c) => c.channel === "messages")?.value).toHaveLength(4);
    const records = await exportThread({ pool: db.pool, threadId: thread, serde, decoded: true });
    expect(JSON.stringify(records)).toContain('"decoded"');
    expect(JSON.stringify(records)).not.toContain("undecodable");
  });
});
