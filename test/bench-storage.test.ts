// The measuring functions of `npm run bench -- --storage` (bench/storage.ts): they return the
// sizes of every table of the saver's schema, the raw bytes sent, and a read-back check that can fail.
import type { BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { aiText, appender, blobKinds, checkMessages, checkpointRowBytes, humanText, imageUrl, measureChat, rawBytes, tableBreakdown, tableSizes, expectedMessages } from "../bench/storage.js";
import { PostgresSaver, migrate } from "../src/index.js";
import { withTestDatabase } from "./helpers/db.js";

describe("bench/storage.ts", () => {
  const db = withTestDatabase("bench storage");
  const schema = "bench storage";

  it("measureChat: sizes of every table of the schema after the turns asked for, raw bytes, and the state read back", async () => {
    await migrate({ pool: db.pool, schema });
    const saver = new PostgresSaver(db.pool, { schema });
    const run = await measureChat(saver, db.pool, schema, { turns: 3, at: [1] });
    expect(run.points.map((p) => p.turns)).toEqual([1, 3]);
    for (const p of run.points) {
      expect(Object.keys(p.perTable)).toEqual(expect.arrayContaining(["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_heads"]));
      expect(p.bytes).toBe(Object.values(p.perTable).reduce((a, b) => a + b, 0));
      expect(p.bytes).toBeGreaterThan(0);
    }
    expect(run.points[1]!.bytes).toBeGreaterThanOrEqual(run.points[0]!.bytes);
    const raw = (turns: number) => Array.from({ length: turns }, (_, t) => Buffer.byteLength(humanText(t)) + Buffer.byteLength(aiText(t))).reduce((a, b) => a + b, 0);
    expect(run.points.map((p) => p.raw)).toEqual([raw(1), raw(3)]);
    expect(run.readBack).toEqual({ ok: true, detail: "6 messages, all as sent" });
    // Another schema's tables are not counted.
    expect(Object.keys(await tableSizes(db.pool, "public"))).not.toContain("checkpoints");
  });

  it("measureChat with images: each user message carries its own ~100 KB data URL, counted in raw and read back", async () => {
    const imgSchema = "bench storage img";
    await migrate({ pool: db.pool, schema: imgSchema });
    const run = await measureChat(new PostgresSaver(db.pool, { schema: imgSchema }), db.pool, imgSchema, { turns: 2, image: true });
    expect(imageUrl(0)).toMatch(/^data:image\/png;base64,[A-Za-z0-9+/]{100000}$/);
    expect(imageUrl(1)).not.toBe(imageUrl(0));
    expect(run.points[0]!.raw).toBe(expectedMessages(2, true).reduce((n, m) => n + rawBytes(m.content), 0));
    expect(run.points[0]!.raw).toBeGreaterThan(200_000);
    expect(run.readBack.ok).toBe(true);
  });

  it("where the bytes are: heap + TOAST + indexes add up to each table's size; the checkpoint row by column; the blobs by kind", async () => {
    const sizes = await tableSizes(db.pool, schema);
    const parts = await tableBreakdown(db.pool, schema);
    expect(Object.keys(parts)).toEqual(Object.keys(sizes));
    for (const [t, b] of Object.entries(parts)) expect(b.heap + b.toast + b.indexes, t).toBe(sizes[t]);
    expect(parts.checkpoints!.indexes).toBeGreaterThan(0);
    const row = await checkpointRowBytes(db.pool, schema);
    expect(row.rows).toBe(9); // 3 turns, 3 checkpoints each
    expect(Object.keys(row.columns)).toEqual(expect.arrayContaining(["thread_id", "checkpoint", "metadata"]));
    // The row is its columns plus a header: never less than their sum.
    expect(row.row).toBeGreaterThan(Object.values(row.columns).reduce((a, b) => a + b, 0));
    const kinds = await blobKinds(db.pool, schema);
    expect(kinds.map((k) => k.kind)).toEqual(expect.arrayContaining(["element rows", "lists (refs values)"]));
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM "bench storage".checkpoint_blobs`);
    expect(kinds.reduce((n, k) => n + k.rows, 0)).toBe(rows[0].n);
  });

  it("checkMessages fails on a missing message or a changed content", async () => {
    const saver = new PostgresSaver(db.pool, { schema });
    const t = await saver.getTuple({ configurable: { thread_id: "chat" } });
    const messages = (t!.checkpoint.channel_values as { messages: BaseMessage[] }).messages;
    expect(checkMessages(messages, 3, false).ok).toBe(true);
    expect(checkMessages(messages.slice(0, 5), 3, false)).toEqual({ ok: false, detail: "5 messages, sent 6" });
    const changed = [...messages];
    changed[2] = new (messages[2]!.constructor as new (f: object) => BaseMessage)({ id: messages[2]!.id, content: "something else" });
    expect(checkMessages(changed, 3, false)).toMatchObject({ ok: false, detail: expect.stringMatching(/^message 2 \(human-1\) differs/) });
  });

  it("appender: each put adds one message to the same base, so the thread keeps n + 1 messages", async () => {
    const saver = new PostgresSaver(db.pool, { schema });
    const put = await appender(saver, "chat");
    for (let i = 0; i < 3; i++) {
      await put(i);
      const t = await saver.getTuple({ configurable: { thread_id: "chat" } });
      const messages = (t!.checkpoint.channel_values as { messages: BaseMessage[] }).messages;
      expect(messages).toHaveLength(7);
      expect(checkMessages(messages.slice(0, 6), 3, false).ok).toBe(true);
      expect(messages[6]!.id).toBe(`extra-${i}`);
    }
  });
});
