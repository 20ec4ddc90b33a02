/**
 * Issue 26 row 3: lists stored by their elements trust nothing they read
 * (src/saver/element-codec.ts). With an encrypting serializer a refs value is
 * accepted only when its tag authenticates it for its row, element hashes
 * are keyed, each element is sealed for its own row; with any serializer an
 * element or chunk that does not match its hash fails loudly. Every attack is
 * real SQL on the tables, as a role with write access would run it.
 * `reencrypt` re-keys lists (written before encryption, or under an old key).
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { MemorySaver } from "@langchain/langgraph";
import { type BaseCheckpointSaver, type Checkpoint, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { beforeAll, describe, expect, it } from "vitest";
import { compact, DeserializationError, EncryptedSerializer, migrate, MsgpackSerializer, PostgresSaver, prune, reencrypt, type ValueRow } from "../../src/index.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "../../src/saver/elements.js";
import { longText } from "../helpers/checkpoints.js";
import { runCli, ROOT } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { chatGraph, tid } from "../helpers/graphs.js";

const db = withTestDatabase("elements_trust");
const k1 = randomBytes(32);
const k2 = randomBytes(32);
const SECRET = "my card number is 4111";
const ON = { elementStorage: true } as const;

beforeAll(async () => {
  await migrate({ pool: db.pool });
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "" } });
const humans = (n: number, from = 0): BaseMessage[] => Array.from({ length: n }, (_, i) => new HumanMessage({ id: `h${from + i}`, content: `${SECRET} / question ${from + i}` }));
const items = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ n: i, tag, text: `${SECRET} item ${i}` }));

async function putValues(s: BaseCheckpointSaver, thread: string, values: Record<string, unknown>, version: number, parent?: string): Promise<RunnableConfig> {
  const versions = Object.fromEntries(Object.keys(values).map((k) => [k, version]));
  const cp: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
  return s.put({ configurable: { thread_id: thread, checkpoint_ns: "", ...(parent ? { checkpoint_id: parent } : {}) } }, cp, { source: "loop", step: version, parents: {} }, versions);
}

async function fails(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  const error = await p.then(
    (v) => ({ resolved: v }),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DeserializationError);
  expect((error as Error).message).toMatch(pattern);
}

/** The list channel `channel`'s refs value at the head of `thread`. */
async function headRefs(saver: PostgresSaver, thread: string, channel: string): Promise<{ version: string; value: Buffer }> {
  const version = String((await saver.getTuple(cfg(thread)))!.checkpoint.channel_versions[channel]);
  const { rows } = await db.pool.query("SELECT value FROM checkpoint_blobs WHERE thread_id = $1 AND channel = $2 AND version = $3 AND type = $4", [thread, channel, version, REFS_TYPE]);
  expect(rows, "the channel is stored by its elements").toHaveLength(1);
  return { version, value: rows[0].value };
}

const setRefs = (thread: string, channel: string, version: string, value: Buffer) =>
  db.pool.query("UPDATE checkpoint_blobs SET value = $4 WHERE thread_id = $1 AND channel = $2 AND version = $3", [thread, channel, version, value]);

/** Element rows of a thread: elements (not chunks), with type and bytes. */
async function elementRows(thread: string, schema = "public"): Promise<{ version: string; type: string; value: Buffer }[]> {
  const { rows } = await db.pool.query(`SELECT version, type, value FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = $2 AND type <> $3 ORDER BY version`, [
    thread,
    ELEMENTS_CHANNEL,
    REFS_TYPE,
  ]);
  return rows;
}

/** The unkeyed name of a value: what anyone can compute for a guess. */
async function unkeyedName(value: unknown): Promise<string> {
  const [type, bytes] = await new MsgpackSerializer().dumpsTyped(value);
  return createHash("sha256").update(type).update("\u0000").update(bytes).digest().subarray(0, 16).toString("hex");
}

describe("an encrypting serializer stores lists by their elements", () => {
  it("each element sealed for its own row under a keyed hash; reads back as MemorySaver does; a put sends only what is new", async () => {
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const saver = new PostgresSaver(db.pool, { ...ON, serde });
    const memory = new MemorySaver();
    const thread = tid("sealed");
    for (const s of [saver, memory]) {
      await chatGraph(s).invoke({ messages: humans(39) }, cfg(thread));
      await chatGraph(s).invoke({ messages: humans(1, 39) }, cfg(thread));
    }
    const rows = await elementRows(thread);
    // 42 messages, each once: stored by elements, not whole.
    expect(rows).toHaveLength(42);
    for (const r of rows) {
      expect(r.type).toBe("enc:k1:msgpack");
      expect(r.value[0]).toBe(2); // bound to its row
      expect(r.value.includes(Buffer.from(SECRET))).toBe(false);
    }
    const { rows: all } = await db.pool.query("SELECT value FROM checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL", [thread]);
    for (const r of all) expect(Buffer.from(r.value).includes(Buffer.from(SECRET))).toBe(false);
    // A guess is not confirmed by the names: the unkeyed hash of a stored message names no row here...
    const guess = await unkeyedName(new HumanMessage({ id: "h0", content: `${SECRET} / question 0` }));
    expect(rows.map((r) => r.version)).not.toContain(guess);
    // ...while plain element storage names exactly that row (the guess is right).
    const plainThread = tid("plain-guess");
    await chatGraph(new PostgresSaver(db.pool, ON)).invoke({ messages: humans(1) }, cfg(plainThread));
    expect((await elementRows(plainThread)).map((r) => r.version)).toContain(guess);
    // The list's refs value: its hashes and a 16-byte tag.
    const refs = await headRefs(saver, thread, "messages");
    expect(refs.value.byteLength).toBe(16 * (1 + 10) + 16); // a chunk, 10 more messages, the tag

    // Reads back as on MemorySaver, from this saver and from one that remembers nothing.
    const fresh = new PostgresSaver(db.pool, { ...ON, serde });
    for (const s of [saver, fresh]) {
      const got = (await chatGraph(s).getState(cfg(thread))).values.messages as BaseMessage[];
      const want = (await chatGraph(memory).getState(cfg(thread))).values.messages as BaseMessage[];
      expect(got.map((m) => [m.getType(), m.id, m.content])).toEqual(want.map((m) => [m.getType(), m.id, m.content]));
    }
    // The next turn adds its two messages only.
    await chatGraph(fresh).invoke({ messages: humans(1, 40) }, cfg(thread));
    // The head holds the whole list; each message has one element row.
    expect((await fresh.getTuple(cfg(thread)))!.checkpoint.channel_values.messages).toHaveLength(44);
    expect(await elementRows(thread)).toHaveLength(44);
    const history = await saver.getDeltaChannelHistory({ config: (await saver.getTuple(cfg(thread)))!.config, channels: ["messages"] });
    // The seed is the parent's list (the head's own came from the reply written on it).
    expect(history.messages!.seed).toHaveLength(43);
  });

  it("compact converts an encrypted thread's whole values into sealed elements that read back the same", async () => {
    const schema = "trust_compact";
    await migrate({ pool: db.pool, schema });
    const serde = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    const whole = new PostgresSaver(db.pool, { schema, serde, elementStorage: false });
    const thread = tid("compact");
    await chatGraph(whole).invoke({ messages: humans(35) }, cfg(thread));
    const before = [];
    for await (const t of whole.list(cfg(thread))) before.push(t);
    expect(before.some((t) => (t.pendingWrites?.length ?? 0) > 0)).toBe(true);
    // Without the saver's serializer nothing decodes: everything is left whole, and said so.
    expect(await compact({ pool: db.pool, schema, dryRun: true })).toMatchObject({ values: 0, undecodable: expect.any(Number) });
    const result = await compact({ pool: db.pool, schema, serde });
    expect(result.values).toBeGreaterThan(0);
    expect(result.writes).toBeGreaterThan(0);
    const { rows } = await db.pool.query(`SELECT DISTINCT type FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = $2 ORDER BY 1`, [thread, ELEMENTS_CHANNEL]);
    expect(rows.map((r) => r.type)).toEqual(["enc:k1:msgpack", REFS_TYPE]);
    // Values by content: refs tagged for their row; an object's outline sealed for its row; nothing in plaintext.
    const { rows: values } = await db.pool.query(
      `SELECT DISTINCT type FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel <> $2
       UNION SELECT DISTINCT type FROM ${schema}.checkpoint_writes WHERE thread_id = $1 ORDER BY 1`,
      [thread, ELEMENTS_CHANNEL],
    );
    expect(values.map((r) => r.type)).toEqual(["enc:k1:msgpack", "pg:obj:enc:k1:msgpack", REFS_TYPE]);
    const { rows: all } = await db.pool.query(
      `SELECT value FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL UNION ALL SELECT value FROM ${schema}.checkpoint_writes WHERE thread_id = $1`,
      [thread],
    );
    for (const r of all) expect(Buffer.from(r.value).includes(Buffer.from(SECRET))).toBe(false);
    const after = [];
    for await (const t of new PostgresSaver(db.pool, { schema, serde }).list(cfg(thread))) after.push(t);
    expect(after).toEqual(before);
    expect(after[0]!.checkpoint.channel_values.messages).toHaveLength(36);
  });

  it("whole values, said once, with a serializer that cannot seal elements, or whose inner bytes change each time", async () => {
    const encrypted = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    // Binds values to rows, but offers nothing to seal an element or key its hash.
    const bound = {
      dumpsTyped: (v: unknown) => encrypted.dumpsTyped(v),
      loadsTyped: (t: string, d: Uint8Array) => encrypted.loadsTyped(t, d),
      dumpsTypedForRow: (v: unknown, row: ValueRow) => encrypted.dumpsTypedForRow(v, row),
      loadsTypedForRow: (t: string, d: Uint8Array, row: ValueRow) => encrypted.loadsTypedForRow(t, d, row),
    };
    const msgpack = new MsgpackSerializer();
    // A byte that differs from call to call (a random one repeated itself once in 256 runs, and the check then
    // saw one value the same twice).
    let calls = 0;
    const noisyInner = {
      dumpsTyped: async (v: unknown): Promise<[string, Uint8Array]> => {
        const [t, b] = await msgpack.dumpsTyped(v);
        return [t, Buffer.concat([b, Buffer.from([calls++ & 0xff])])];
      },
      loadsTyped: (t: string, b: Uint8Array) => msgpack.loadsTyped(t, b.subarray(0, b.byteLength - 1)),
    };
    const noisy = new EncryptedSerializer({ keys: { k1 }, current: "k1", inner: noisyInner });
    for (const [serde, reason] of [
      [bound, /binds values to their rows but cannot seal/],
      [noisy, /gives the same value different bytes each time/],
    ] as const) {
      const warnings: Error[] = [];
      const listen = (w: Error) => warnings.push(w);
      process.on("warning", listen);
      try {
        const saver = new PostgresSaver(db.pool, { ...ON, serde });
        const thread = tid("whole");
        const one = await putValues(saver, thread, { items: items(3, "a") }, 1);
        await putValues(saver, thread, { items: items(4, "a") }, 2, one.configurable!.checkpoint_id as string);
        await new Promise((resolve) => setImmediate(resolve));
        expect((await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.items).toEqual(items(4, "a"));
        expect(await elementRows(thread)).toHaveLength(0);
        const ours = warnings.filter((w) => (w as { code?: string }).code === "LANGGRAPH_CHECKPOINT_PG_ELEMENTS");
        expect(ours).toHaveLength(1);
        expect(ours[0]!.message).toMatch(reason);
      } finally {
        process.off("warning", listen);
      }
    }
  });
});

describe("refs values and element rows altered with SQL fail loudly", () => {
  it("a strict encrypting saver refuses a value made into a refs value (false never reads as [])", async () => {
    const saver = new PostgresSaver(db.pool, { serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    const thread = tid("approved");
    await putValues(saver, thread, { approved: false }, 1);
    expect((await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.approved).toBe(false);
    const { rowCount } = await db.pool.query("UPDATE checkpoint_blobs SET type = $2, value = ''::bytea WHERE thread_id = $1 AND channel = 'approved'", [thread, REFS_TYPE]);
    expect(rowCount).toBe(1);
    await fails(saver.getTuple(cfg(thread)), /channel "approved".*refs value is not authenticated/);
    // A list whose hashes name elements someone planted: refused the same way (the tag is missing). Its elements
    // are long enough to be stored by them (a list of small ones is stored whole, issue 40).
    const planted = await putValues(new PostgresSaver(db.pool, ON), tid("planted"), { items: [longText("planted 0"), longText("planted 1")] }, 1);
    const { rows: plantedRows } = await db.pool.query("SELECT type FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'items'", [planted.configurable!.thread_id]);
    expect(plantedRows.map((r) => r.type)).toEqual([REFS_TYPE]);
    await fails(saver.getTuple(planted), /refs value is not authenticated/);
  });

  it("an encrypted list's refs value reordered, shortened, forged or moved from another row fails", async () => {
    const saver = new PostgresSaver(db.pool, { ...ON, serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    const thread = tid("refs");
    const one = await putValues(saver, thread, { items: items(5, "r") }, 1);
    await putValues(saver, thread, { items: items(6, "r") }, 2, one.configurable!.checkpoint_id as string);
    const other = tid("refs-other");
    await putValues(saver, other, { items: items(6, "r") }, 2);
    const { version, value } = await headRefs(saver, thread, "items");
    const block = (i: number) => value.subarray(i * 16, (i + 1) * 16);
    const tag = value.subarray(value.byteLength - 16);
    const older = (await db.pool.query("SELECT value FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'items' AND version <> $2", [thread, version])).rows[0].value as Buffer;
    const otherThread = (await db.pool.query("SELECT value FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'items'", [other])).rows[0].value as Buffer;
    expect(otherThread.equals(value)).toBe(false); // same content, another row: another tag
    const attempts: [string, Buffer][] = [
      ["two elements swapped", Buffer.concat([block(1), block(0), value.subarray(32)])],
      ["the last element dropped", Buffer.concat([value.subarray(0, value.byteLength - 32), tag])],
      ["the tag dropped", value.subarray(0, value.byteLength - 16)],
      ["emptied", Buffer.alloc(0)],
      ["an older version of the channel", older],
      ["the same list of another thread", otherThread],
    ];
    for (const [what, forged] of attempts) {
      await setRefs(thread, "items", version, forged);
      await fails(saver.getTuple(cfg(thread)), /refs value is not authenticated/).catch((e: unknown) => {
        throw new Error(`${what}: ${(e as Error).message}`);
      });
    }
    await setRefs(thread, "items", version, value);
    expect((await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.items).toEqual(items(6, "r"));
  });

  it("an element row swapped for another fails, sealed or plain; so does an altered chunk", async () => {
    const sealed = new PostgresSaver(db.pool, { ...ON, serde: new EncryptedSerializer({ keys: { k1 }, current: "k1" }) });
    const plain = new PostgresSaver(db.pool, ON);
    for (const [saver, pattern] of [
      [plain, /element [0-9a-f]{32} does not match its hash/],
      [sealed, /moved from another row/],
    ] as const) {
      const thread = tid("swap");
      await putValues(saver, thread, { items: items(40, "s") }, 1);
      const rows = await elementRows(thread);
      const [a, b] = [rows[0]!, rows[1]!];
      await db.pool.query("UPDATE checkpoint_blobs SET value = $3 WHERE thread_id = $1 AND channel = $2 AND version = $4", [thread, ELEMENTS_CHANNEL, b.value, a.version]);
      await fails(new PostgresSaver(db.pool, { serde: saver.serde }).getTuple(cfg(thread)), pattern);
      await db.pool.query("UPDATE checkpoint_blobs SET value = $3 WHERE thread_id = $1 AND channel = $2 AND version = $4", [thread, ELEMENTS_CHANNEL, a.value, a.version]);
      expect((await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.items).toEqual(items(40, "s"));
      // The chunk (elements 0-31) with two of its hashes swapped: the list would come back reordered.
      const { rows: chunks } = await db.pool.query("SELECT version, value FROM checkpoint_blobs WHERE thread_id = $1 AND channel = $2 AND type = $3", [
        thread,
        ELEMENTS_CHANNEL,
        REFS_TYPE,
      ]);
      expect(chunks).toHaveLength(1);
      const chunk = chunks[0].value as Buffer;
      const swapped = Buffer.concat([chunk.subarray(16, 32), chunk.subarray(0, 16), chunk.subarray(32)]);
      await db.pool.query("UPDATE checkpoint_blobs SET value = $3 WHERE thread_id = $1 AND channel = $2 AND version = $4", [thread, ELEMENTS_CHANNEL, swapped, chunks[0].version]);
      await fails(new PostgresSaver(db.pool, { serde: saver.serde }).getTuple(cfg(thread)), /chunk [0-9a-f]{32} does not match its hash/);
    }
  });
});

describe("reencrypt and lists stored by their elements", () => {
  it("lists written before encryption are re-keyed (allowPlaintext), then an old key's lists on rotation; no row needs the old key", async () => {
    const schema = "trust_rekey";
    await migrate({ pool: db.pool, schema });
    const thread = tid("rekey");
    await chatGraph(new PostgresSaver(db.pool, { schema, ...ON })).invoke({ messages: humans(35) }, cfg(thread));
    const want = (await new PostgresSaver(db.pool, { schema }).getTuple(cfg(thread)))!;
    // Values stored by content, in blobs and writes: lists by their elements, the input object by its list.
    const byContent = "(type IN ('pg:refs', 'pg:val') OR type LIKE 'pg:obj:%')";
    const { rows: lists } = await db.pool.query(
      `SELECT (SELECT count(*) FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel <> $2 AND ${byContent})::int
            + (SELECT count(*) FROM ${schema}.checkpoint_writes WHERE thread_id = $1 AND ${byContent})::int AS n,
              (SELECT count(*) FROM ${schema}.checkpoint_writes WHERE thread_id = $1 AND ${byContent})::int AS writes,
              (SELECT count(*) FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND type LIKE 'pg:obj:%')::int AS objects`,
      [thread, ELEMENTS_CHANNEL],
    );
    expect(lists[0].n).toBeGreaterThan(1);
    expect(lists[0].writes).toBeGreaterThan(0);
    expect(lists[0].objects).toBeGreaterThan(0);
    const strict1 = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    // Plaintext rows and plain refs are refused by a strict saver until reencrypt rewrites them.
    await fails(new PostgresSaver(db.pool, { schema, serde: strict1 }).getTuple(cfg(thread)), /Refusing an unencrypted value|not authenticated/);

    const migrating = new EncryptedSerializer({ keys: { k1 }, current: "k1", allowPlaintext: true });
    expect((await new PostgresSaver(db.pool, { schema, serde: migrating }).getTuple(cfg(thread)))!.checkpoint).toEqual(want.checkpoint);
    const dry = await reencrypt({ pool: db.pool, schema, serde: migrating, dryRun: true });
    expect(dry.byContent).toBe(lists[0].n);
    // The CLI says so too.
    const module = join(mkdtempSync(join(tmpdir(), "rekey-")), "serde.ts");
    writeFileSync(
      module,
      `import { EncryptedSerializer } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
        `export const serde = new EncryptedSerializer({ keys: { k1: Buffer.from("${k1.toString("hex")}", "hex") }, current: "k1", allowPlaintext: true });\n`,
    );
    const cli = await runCli(["reencrypt", "--module", module, "--database-url", db.url, "--schema", schema, "--dry-run"]);
    rmSync(dirname(module), { recursive: true, force: true });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(new RegExp(`^Would re-key ${lists[0].n} value\\(s\\) stored by content \\(lists by their elements, large values, objects holding lists\\) and rewrite ${dry.blobs} blob\\(s\\)`));
    const done = await reencrypt({ pool: db.pool, schema, serde: migrating, batchSize: 2 });
    expect(done.byContent).toBe(lists[0].n);
    const read = async (serde: EncryptedSerializer) => (await new PostgresSaver(db.pool, { schema, serde }).getTuple(cfg(thread)))!.checkpoint;
    expect(await read(strict1)).toEqual(want.checkpoint);
    expect(await reencrypt({ pool: db.pool, schema, serde: migrating, dryRun: true })).toMatchObject({ byContent: 0, blobs: 0, writes: 0, checkpoints: 0 });

    // Rotation: k2 current, k1 kept; new turns use k2; reencrypt moves every list and row to k2.
    const rotating = new EncryptedSerializer({ keys: { k2, k1 }, current: "k2" });
    await chatGraph(new PostgresSaver(db.pool, { schema, ...ON, serde: rotating })).invoke({ messages: humans(1, 35) }, cfg(thread));
    const after = await read(rotating);
    const rotated = await reencrypt({ pool: db.pool, schema, serde: rotating });
    expect(rotated.byContent).toBeGreaterThan(0);
    const only2 = new EncryptedSerializer({ keys: { k2 }, current: "k2", allowUnbound: false });
    expect(await read(only2)).toEqual(after);
    const all = await new PostgresSaver(db.pool, { schema, serde: only2 }).list(cfg(thread));
    let n = 0;
    for await (const t of all) n += t.checkpoint.channel_values.messages ? 1 : 0;
    expect(n).toBeGreaterThan(3);
    // No row needs k1: values, element rows and objects' outlines in both tables are under k2 (reading
    // every checkpoint and its writes with k2 alone, above, checked every refs tag and hash).
    const { rows: keys } = await db.pool.query(
      `SELECT DISTINCT type FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND type LIKE '%enc:%'
       UNION SELECT DISTINCT type FROM ${schema}.checkpoint_writes WHERE thread_id = $1 AND type LIKE '%enc:%' ORDER BY 1`,
      [thread],
    );
    expect(keys.map((r) => r.type)).toEqual(["enc:k2:msgpack", "pg:obj:enc:k2:msgpack"]);
    let writes = 0;
    for await (const t of new PostgresSaver(db.pool, { schema, serde: only2 }).list(cfg(thread))) writes += t.pendingWrites?.length ?? 0;
    expect(writes).toBeGreaterThan(0);
    expect(await reencrypt({ pool: db.pool, schema, serde: rotating, dryRun: true })).toMatchObject({ byContent: 0, blobs: 0, writes: 0, checkpoints: 0 });
    // The re-keyed list's refs value is authenticated: reordering it fails.
    const saver = new PostgresSaver(db.pool, { schema, serde: only2 });
    const version = String((await saver.getTuple(cfg(thread)))!.checkpoint.channel_versions.messages);
    const { rows: refs } = await db.pool.query(`SELECT value FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = 'messages' AND version = $2`, [thread, version]);
    const v = refs[0].value as Buffer;
    await db.pool.query(`UPDATE ${schema}.checkpoint_blobs SET value = $3 WHERE thread_id = $1 AND channel = 'messages' AND version = $2`, [
      thread,
      version,
      Buffer.concat([v.subarray(16, 32), v.subarray(0, 16), v.subarray(32)]),
    ]);
    await fails(saver.getTuple(cfg(thread)), /not authenticated/);
    await db.pool.query(`UPDATE ${schema}.checkpoint_blobs SET value = $3 WHERE thread_id = $1 AND channel = 'messages' AND version = $2`, [thread, version, v]);
    // The element rows only old lists named go with prune, as any unreferenced element row: 38 messages stay.
    expect((await elementRows(thread, schema)).length).toBeGreaterThan(38);
    await prune({ pool: db.pool, schema, keepLast: 100, grace: 0, threadIds: [thread] });
    expect(await elementRows(thread, schema)).toHaveLength(38);
    expect(await read(only2)).toEqual(after);
  });

  it("large values by content and objects holding lists, in blobs and writes: re-keyed from before encryption, then from an old key", async () => {
    const schema = "trust_rekey_values";
    await migrate({ pool: db.pool, schema });
    const thread = tid("rekey-values");
    const big = (tag: string) => `${SECRET} ${tag} ${"a long tool result ".repeat(30)}`;
    const plain = new PostgresSaver(db.pool, { schema });
    const config = await putValues(plain, thread, { doc: big("doc"), input: { messages: humans(10), n: 1 } }, 1);
    await plain.putWrites(config, [["doc", big("write")], ["input", { messages: humans(10, 10) }]], "task");
    const want = (await plain.getTuple(config))!;
    expect(want.pendingWrites).toHaveLength(2);
    const forms = async () =>
      (
        await db.pool.query(
          `SELECT 'blob ' || channel || ' ' || type AS f FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel <> $2
           UNION ALL SELECT 'write ' || channel || ' ' || type FROM ${schema}.checkpoint_writes WHERE thread_id = $1
           UNION ALL SELECT DISTINCT 'element ' || type FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = $2 ORDER BY 1`,
          [thread, ELEMENTS_CHANNEL],
        )
      ).rows.map((r) => r.f as string);
    expect(await forms()).toEqual(["blob doc pg:val", "blob input pg:obj:msgpack", "element msgpack", "write doc pg:val", "write input pg:obj:msgpack"]);
    const read = (serde: EncryptedSerializer) => new PostgresSaver(db.pool, { schema, serde }).getTuple(config);

    const migrating = new EncryptedSerializer({ keys: { k1 }, current: "k1", allowPlaintext: true });
    expect(await reencrypt({ pool: db.pool, schema, serde: migrating })).toMatchObject({ byContent: 4 });
    expect(await forms()).toEqual(["blob doc pg:val", "blob input pg:obj:enc:k1:msgpack", "element enc:k1:msgpack", "write doc pg:val", "write input pg:obj:enc:k1:msgpack"]);
    expect(await read(new EncryptedSerializer({ keys: { k1 }, current: "k1" }))).toEqual(want);

    const rotating = new EncryptedSerializer({ keys: { k2, k1 }, current: "k2" });
    expect(await reencrypt({ pool: db.pool, schema, serde: rotating, dryRun: true })).toMatchObject({ byContent: 4 });
    expect(await reencrypt({ pool: db.pool, schema, serde: rotating })).toMatchObject({ byContent: 4 });
    expect(await forms()).toEqual(["blob doc pg:val", "blob input pg:obj:enc:k2:msgpack", "element enc:k2:msgpack", "write doc pg:val", "write input pg:obj:enc:k2:msgpack"]);
    expect(await read(new EncryptedSerializer({ keys: { k2 }, current: "k2" }))).toEqual(want);
    expect(await reencrypt({ pool: db.pool, schema, serde: rotating, dryRun: true })).toMatchObject({ byContent: 0, blobs: 0, writes: 0, checkpoints: 0 });
  });

  it("re-keying while a graph keeps writing and prune keeps collecting loses nothing", async () => {
    const schema = "trust_busy";
    await migrate({ pool: db.pool, schema });
    const thread = tid("busy");
    const one = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    await chatGraph(new PostgresSaver(db.pool, { schema, ...ON, serde: one })).invoke({ messages: humans(33) }, cfg(thread));
    const both = new EncryptedSerializer({ keys: { k2, k1 }, current: "k2" });
    const writer = new PostgresSaver(db.pool, { schema, ...ON, serde: both });
    let turns = 0;
    let done = false;
    const writing = (async () => {
      try {
        for (; turns < 12; turns++) await chatGraph(writer).invoke({ messages: humans(1, 100 + turns) }, cfg(thread));
      } finally {
        done = true;
      }
    })();
    let passes = 0;
    while (!done || passes < 2) {
      await reencrypt({ pool: db.pool, schema, serde: both, batchSize: 2 });
      await prune({ pool: db.pool, schema, keepLast: 5, grace: 0, threadIds: [thread] });
      passes++;
    }
    await writing;
    await reencrypt({ pool: db.pool, schema, serde: both });
    const only2 = new PostgresSaver(db.pool, { schema, serde: new EncryptedSerializer({ keys: { k2 }, current: "k2" }) });
    const messages = (await only2.getTuple(cfg(thread)))!.checkpoint.channel_values.messages as BaseMessage[];
    expect(messages).toHaveLength(34 + 2 * 12);
    expect(messages.filter((m) => m.getType() === "human").map((m) => m.id)).toEqual([...humans(33), ...Array.from({ length: 12 }, (_, i) => humans(1, 100 + i)[0]!)].map((m) => m.id));
    for await (const t of only2.list(cfg(thread))) expect(t.checkpoint.channel_values).toBeDefined();
  });
});
