/**
 * Issue 21: the operations tools on lists stored by their elements
 * (saver/elements.ts, `elementStorage: true`). A chat thread of more than 32 messages (so chunks
 * exist) written through a real StateGraph: `show` decodes the whole list and
 * never shows element rows as channels; export carries the element rows and
 * imports back to the same tuples; rollback to the official saver stores the
 * whole list again; reencrypt re-keys lists (issue 26 row 3).
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { EncryptedSerializer, exportThread, importThread, migrate, PostgresSaver, prune, reencrypt, rollbackAdoption, show, type BlobRecord } from "../../src/index.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "../../src/saver/elements.js";
import { longText } from "../helpers/checkpoints.js";
import { runCli } from "../helpers/cli.js";
import { queryKnowingElements, withTestDatabase } from "../helpers/db.js";
import { chatGraph, tid } from "../helpers/graphs.js";

const db = withTestDatabase("elements");
const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "" } });

/**
 * `n` human messages (the bot answers the last one); `long`: of a realistic length, so that a list of
 * one (the bot's answer, the second run's question) is stored by its elements too (a list of short
 * ones stays whole, issue 40).
 */
const humans = (n: number, from = 0, long = false): BaseMessage[] =>
  Array.from({ length: n }, (_, i) => new HumanMessage({ id: `h${from + i}`, content: long ? longText(`question ${from + i}`) : `question ${from + i}` }));

/** A chat of 42 messages in two runs: 39 + answer, then 1 + answer (the second run's list shares the first's elements and chunk). */
async function longChat(saver: BaseCheckpointSaver, thread: string, long = false): Promise<void> {
  await chatGraph(saver).invoke({ messages: humans(39, 0, long) }, cfg(thread));
  await chatGraph(saver).invoke({ messages: humans(1, 39, long) }, cfg(thread));
}

async function listAll(saver: BaseCheckpointSaver, thread: string): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of saver.list(cfg(thread))) out.push(t);
  return out;
}

/** The thread's element rows by type: element values and chunks. */
async function elementRows(schema: string, thread: string): Promise<{ elements: number; chunks: number }> {
  const { rows } = await db.pool.query(
    `SELECT count(*) FILTER (WHERE type <> $3)::int AS elements, count(*) FILTER (WHERE type = $3)::int AS chunks
       FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = $2`,
    [thread, ELEMENTS_CHANNEL, REFS_TYPE],
  );
  return rows[0];
}

describe("operations tools on lists stored by their elements", () => {
  it("show: the messages channel is the whole list, decoded; element rows are not channels", async () => {
    const schema = "el_show";
    await migrate({ pool: db.pool, schema });
    const saver = new PostgresSaver(db.pool, { schema, elementStorage: true });
    const thread = tid("show");
    await longChat(saver, thread);
    // Stored by elements, with a chunk (the test means nothing otherwise).
    expect(await elementRows(schema, thread)).toEqual({ elements: 42, chunks: 1 });
    const head = (await saver.getTuple(cfg(thread)))!;
    const messages = head.checkpoint.channel_values.messages as BaseMessage[];
    expect(messages).toHaveLength(42);

    const shown = (await show({ pool: db.pool, schema, threadId: thread }))!;
    expect(shown.channels.map((c) => c.channel)).not.toContain(ELEMENTS_CHANNEL);
    const channel = shown.channels.find((c) => c.channel === "messages")!;
    expect(channel.type).toBe(REFS_TYPE);
    expect(channel.value).toEqual(messages);
    // An earlier checkpoint (39 + 1 messages: one full chunk and 8 more) reads the same as the saver reads it.
    const first = (await listAll(saver, thread)).find((t) => (t.checkpoint.channel_values.messages as unknown[] | undefined)?.length === 40)!;
    const earlier = (await show({ pool: db.pool, schema, threadId: thread, checkpointId: first.checkpoint.id }))!;
    expect(earlier.channels.find((c) => c.channel === "messages")!.value).toEqual(first.checkpoint.channel_values.messages);
    // The CLI prints the same list.
    const cli = await runCli(["show", thread, "--database-url", db.url, "--schema", schema, "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    const printed = (JSON.parse(cli.stdout) as { channels: { channel: string; value: { kwargs: { content: string } }[] }[] }).channels;
    expect(printed.map((c) => c.channel)).not.toContain(ELEMENTS_CHANNEL);
    expect(printed.find((c) => c.channel === "messages")!.value.map((m) => m.kwargs.content)).toEqual(messages.map((m) => m.content));

    // A missing element makes the list undecodable, never shorter (deleted as a corruption would: migration 0008's guard
    // refuses a delete that does not say it knows element rows).
    await queryKnowingElements(db.pool, `DELETE FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = $2 AND type <> $3 AND version = (
                           SELECT min(version) FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel = $2 AND type <> $3)`, [thread, ELEMENTS_CHANNEL, REFS_TYPE]);
    const broken = (await show({ pool: db.pool, schema, threadId: thread }))!;
    expect(broken.channels.find((c) => c.channel === "messages")!.value).toMatchObject({ $type: "undecodable", error: expect.stringMatching(/element [0-9a-f]{32} is not stored/) });
  });

  it("show: pending writes stored by content are decoded whole (the element rows they name loaded)", async () => {
    const schema = "el_show_writes";
    await migrate({ pool: db.pool, schema });
    const saver = new PostgresSaver(db.pool, { schema });
    const thread = tid("show-writes");
    await longChat(saver, thread, true);
    // Every checkpoint whose tasks wrote something: the input's `__start__` task writes the question
    // list (as `pg:refs`), the bot's task its answer; each names element rows (long messages: a list
    // of one short message would be stored whole), none is stored whole.
    const all = await listAll(saver, thread);
    const withWrites = all.filter((t) => (t.pendingWrites ?? []).some(([, channel]) => channel === "messages"));
    expect(withWrites.length).toBeGreaterThanOrEqual(2);
    for (const tuple of withWrites) {
      const shown = (await show({ pool: db.pool, schema, threadId: thread, checkpointId: tuple.checkpoint.id }))!;
      const writes = shown.pendingWrites.filter((w) => w.channel === "messages");
      expect(writes.length).toBeGreaterThan(0);
      expect(writes.every((w) => w.type === REFS_TYPE)).toBe(true);
      // The values LangGraph reads back for these writes, in the same order.
      expect(writes.map((w) => w.value)).toEqual(tuple.pendingWrites!.filter(([, channel]) => channel === "messages").map(([, , value]) => value));
    }
    // The 39 questions of the first run, through the CLI too.
    const first = withWrites.find((t) => (t.pendingWrites!.find(([, c]) => c === "messages")![2] as unknown[]).length === 39)!;
    const cli = await runCli(["show", thread, first.checkpoint.id, "--database-url", db.url, "--schema", schema, "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    const printed = (JSON.parse(cli.stdout) as { pendingWrites: { channel: string; value: { kwargs: { content: string } }[] }[] }).pendingWrites;
    expect(printed.find((w) => w.channel === "messages")!.value.map((m) => m.kwargs.content)).toEqual(humans(39, 0, true).map((m) => m.content));
  });

  it("export carries each element once (element rows decoded, values stored by content as the hashes they name); export -> delete -> import reads back identical", async () => {
    const schema = "el_export";
    await migrate({ pool: db.pool, schema });
    const saver = new PostgresSaver(db.pool, { schema, elementStorage: true });
    const thread = tid("export");
    await longChat(saver, thread);
    const before = await listAll(saver, thread);
    const head = before[0]!;

    // Without `decoded: true`, no decoded views: what an import needs.
    const lean = await exportThread({ pool: db.pool, schema, threadId: thread });
    expect(lean.some((r) => "decoded" in r || "unversioned_decoded" in r || "metadata_decoded" in r)).toBe(false);
    const records = await exportThread({ pool: db.pool, schema, threadId: thread, decoded: true });
    const withoutViews = (r: object) => {
      const { decoded: _d, unversioned_decoded: _u, metadata_decoded: _m, ...rest } = r as Record<string, unknown>;
      return rest;
    };
    expect(records.map(withoutViews)).toEqual(lean);
    const blobs = records.filter((r): r is BlobRecord => r.kind === "blob");
    const elements = blobs.filter((b) => b.channel === ELEMENTS_CHANNEL);
    expect({ elements: elements.filter((b) => b.type !== REFS_TYPE).length, chunks: elements.filter((b) => b.type === REFS_TYPE).length }).toEqual(
      await elementRows(schema, thread),
    );
    // An element decodes to its message; a chunk to its 32 hashes, marked; the list to its hashes (a chunk's and
    // its last 10 elements'): each message is in the export once, in its element row, however many lists hold it.
    expect(elements.find((b) => b.type !== REFS_TYPE)!.decoded).toMatchObject({ $type: "lc", kwargs: { content: expect.stringMatching(/^(question|echo)/) } });
    const chunk = elements.find((b) => b.type === REFS_TYPE)!;
    expect(chunk.decoded).toEqual({ $type: REFS_TYPE, hashes: expect.arrayContaining([expect.stringMatching(/^[0-9a-f]{32}$/)]) });
    expect((chunk.decoded as { hashes: string[] }).hashes).toHaveLength(32);
    const list = blobs.find((b) => b.channel === "messages" && b.version === String(head.checkpoint.channel_versions.messages))!;
    expect(list.type).toBe(REFS_TYPE);
    const named = (list.decoded as { $type: string; hashes: string[] }).hashes;
    expect(list.decoded).toEqual({ $type: REFS_TYPE, hashes: named });
    expect(named).toHaveLength(1 + 10);
    const byHash = new Map(elements.map((e) => [e.version, e]));
    const contents = named.flatMap((h) => (byHash.get(h)!.type === REFS_TYPE ? (byHash.get(h)!.decoded as { hashes: string[] }).hashes : [h]));
    expect(contents.map((h) => (byHash.get(h)!.decoded as { kwargs: { content: string } }).kwargs.content)).toEqual(
      (head.checkpoint.channel_values.messages as BaseMessage[]).map((m) => m.content),
    );
    // Each message in exactly one element row; no value stored by content repeats one (a small value stored whole,
    // such as the second run's one-question input, holds its own copy, as its row does).
    const count = (rs: object[], message: BaseMessage) => JSON.stringify(rs).split(JSON.stringify(message.content)).length - 1;
    const byContent = [...blobs, ...records.filter((r) => r.kind === "write")].filter((r) => /^pg:(refs|val|obj:)/.test((r as BlobRecord).type));
    expect(byContent.length).toBeGreaterThan(4);
    for (const message of head.checkpoint.channel_values.messages as BaseMessage[]) {
      expect(count(elements, message), String(message.content)).toBe(1);
      expect(count(byContent, message), String(message.content)).toBe(0);
    }
    expect(records.at(-1)).toMatchObject({ kind: "end", blobs: blobs.length });

    await saver.deleteThread(thread);
    expect(await saver.getTuple(cfg(thread))).toBeUndefined();
    await importThread({ pool: db.pool, schema, records });
    // A new saver (nothing remembered) and the one that wrote it read the same tuples.
    expect(await listAll(new PostgresSaver(db.pool, { schema }), thread)).toEqual(before);
    expect(await saver.getTuple(cfg(thread))).toEqual(head);
    // And the imported thread goes on.
    await chatGraph(saver).invoke({ messages: humans(1, 40) }, cfg(thread));
    expect((await saver.getTuple(cfg(thread)))!.checkpoint.channel_values.messages).toHaveLength(44);
  });

  it("reencrypt: values stored by content before encryption (lists, the input object, the tasks' writes) get sealed element rows under keyed hashes and authenticated refs", async () => {
    const schema = "el_reencrypt";
    await migrate({ pool: db.pool, schema });
    const thread = tid("reencrypt");
    await longChat(new PostgresSaver(db.pool, { schema, elementStorage: true }), thread);
    const plain = await listAll(new PostgresSaver(db.pool, { schema, elementStorage: true }), thread);
    const counts = await elementRows(schema, thread);
    const lists = async () =>
      (
        await db.pool.query(`SELECT channel, version, value FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND type = $2 AND channel <> $3 ORDER BY 1, 2`, [
          thread,
          REFS_TYPE,
          ELEMENTS_CHANNEL,
        ])
      ).rows as { channel: string; version: string; value: Buffer }[];
    const before = await lists();
    expect(before.length).toBeGreaterThan(1);
    // Every value stored by content (blobs and writes), and the blobs stored whole (element rows among them).
    const byContent = "(type IN ('pg:refs', 'pg:val') OR type LIKE 'pg:obj:%')";
    const { rows: valued } = await db.pool.query(
      `SELECT (SELECT count(*) FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND type <> 'empty' AND NOT ${byContent} AND value IS NOT NULL)::int AS n,
              (SELECT count(*) FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND channel <> $2 AND ${byContent})::int
            + (SELECT count(*) FROM ${schema}.checkpoint_writes WHERE thread_id = $1 AND ${byContent})::int AS refs`,
      [thread, ELEMENTS_CHANNEL],
    );

    const k1 = randomBytes(32);
    const migrating = new EncryptedSerializer({ keys: { k1 }, current: "k1", allowPlaintext: true });
    const dry = await reencrypt({ pool: db.pool, schema, serde: migrating, dryRun: true });
    expect({ byContent: dry.byContent, blobs: dry.blobs }).toEqual({ byContent: valued[0].refs, blobs: valued[0].n });
    const done = await reencrypt({ pool: db.pool, schema, serde: migrating });
    // Each value stored by content re-keyed; every whole value rewritten (the plain element rows too, which only the old refs named).
    expect({ byContent: done.byContent, blobs: done.blobs }).toEqual({ byContent: valued[0].refs, blobs: valued[0].n });
    const { rows: types } = await db.pool.query(
      `SELECT DISTINCT channel = $2 AS element, type FROM ${schema}.checkpoint_blobs WHERE thread_id = $1 AND value IS NOT NULL ORDER BY 1, 2`,
      [thread, ELEMENTS_CHANNEL],
    );
    expect(types).toEqual([
      { element: false, type: "enc:k1:msgpack" },
      { element: false, type: "pg:obj:enc:k1:msgpack" },
      { element: false, type: REFS_TYPE },
      { element: true, type: "enc:k1:msgpack" },
      { element: true, type: REFS_TYPE },
    ]);
    // Same rows, new hashes and a tag each: 16 bytes longer.
    const after = await lists();
    expect(after.map((l) => [l.channel, l.version, l.value.byteLength])).toEqual(before.map((l) => [l.channel, l.version, l.value.byteLength + 16]));
    // New element rows (keyed) beside the old ones, which prune collects: as many as before.
    expect((await elementRows(schema, thread)).elements).toBe(2 * counts.elements);
    await prune({ pool: db.pool, schema, keepLast: 1000, grace: 0, threadIds: [thread] });
    expect(await elementRows(schema, thread)).toEqual(counts);

    // Read without plaintext: the same tuples; show and export decode the lists too; nothing left to rewrite.
    const strict = new EncryptedSerializer({ keys: { k1 }, current: "k1" });
    expect(await listAll(new PostgresSaver(db.pool, { schema, serde: strict }), thread)).toEqual(plain);
    const shown = (await show({ pool: db.pool, schema, threadId: thread, serde: strict }))!;
    expect(shown.channels.find((c) => c.channel === "messages")!.value).toEqual(plain[0]!.checkpoint.channel_values.messages);
    const records = await exportThread({ pool: db.pool, schema, threadId: thread, serde: strict });
    expect(JSON.stringify(records)).not.toContain("undecodable");
    expect(await reencrypt({ pool: db.pool, schema, serde: migrating, dryRun: true })).toMatchObject({ byContent: 0, blobs: 0, writes: 0, checkpoints: 0 });
  });
  // Last: the official tables it makes stand in the way of migrating another schema without `adopt`.
  it("rollback: a chat continued by this package (elements) is whole again in the official tables, and the official saver goes on", async () => {
    const from = "el_official";
    const schema = "el_adopted";
    const official = new OfficialSaver(db.pool, undefined, { schema: from });
    await official.setup();
    const thread = tid("rollback");
    // Begun by the official saver, adopted, continued here past one chunk.
    await chatGraph(official).invoke({ messages: humans(1, 100) }, cfg(thread));
    await migrate({ pool: db.pool, schema, adopt: { from } });
    const ours = new PostgresSaver(db.pool, { schema, elementStorage: true });
    await longChat(ours, thread);
    expect((await elementRows(schema, thread)).chunks).toBeGreaterThan(0);
    const want = await listAll(ours, thread);
    expect(want[0]!.checkpoint.channel_values.messages).toHaveLength(44);

    const result = await rollbackAdoption({ pool: db.pool, schema });
    expect(result).toMatchObject({ rolledBack: true });
    expect(result.blobs).toBeGreaterThan(0);
    // No element row went over as a channel; every list is one whole value.
    const { rows } = await db.pool.query(`SELECT DISTINCT channel, type FROM ${from}.checkpoint_blobs WHERE thread_id = $1 ORDER BY 1, 2`, [thread]);
    expect(rows.map((r) => r.channel)).not.toContain(ELEMENTS_CHANNEL);
    expect(rows.map((r) => r.type)).not.toContain(REFS_TYPE);

    const got = await listAll(official, thread);
    expect(got.map((t) => t.checkpoint.id)).toEqual(want.map((t) => t.checkpoint.id));
    got.forEach((t, i) => {
      const w = want[i]!;
      const versioned = Object.fromEntries(Object.entries(w.checkpoint.channel_values).filter(([ch]) => ch in w.checkpoint.channel_versions));
      expect(t.checkpoint.channel_values, t.checkpoint.id).toEqual(versioned);
      expect(t.pendingWrites).toEqual(w.pendingWrites);
    });
    await chatGraph(official).invoke({ messages: humans(1, 200) }, cfg(thread));
    const messages = (await official.getTuple(cfg(thread)))!.checkpoint.channel_values.messages as BaseMessage[];
    expect(messages).toHaveLength(46);
    expect(messages.at(-1)).toBeInstanceOf(AIMessage);
  });
});
