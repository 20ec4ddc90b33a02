/**
 * Part of `npm run test:long` (README "Tests"): prune on threads of a thousand steps, built by
 * running real graphs step by step (most of this file's minutes). What prune does to a thread's
 * rows is tested on short threads in prune.test.ts; here, that the counts, bytes and the dry
 * run's prediction hold at that length, over many rounds and chunks.
 */
import { HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, prune } from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";
import { chatGraph, tid } from "../helpers/graphs.js";
import { deleted, deltaChatGraph, expectDeleted, tableSizes } from "../helpers/prune.js";

const db = withTestDatabase("prune_long");
let saver: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool);
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });
const sizes = (threadIds?: string[]) => tableSizes(db.pool, threadIds);

describe("a 1,000-step chat thread", () => {
  it("rows and bytes before and after prune({ keepLast: 1 }); the dry run predicts exactly", { timeout: 180_000 }, async () => {
    const thread = tid("chat-1000");
    const graph = chatGraph(saver);
    // Each turn is 3 steps (input, then the bot scheduled, then its answer): 334 turns = 1,002 checkpoints.
    for (let i = 0; i < 334; i++) await graph.invoke({ messages: [new HumanMessage({ id: `h${i}`, content: `message number ${i}` })] }, cfg(thread));
    const stateBefore = await graph.getState(cfg(thread));
    const before = await sizes([thread]);
    expect(before.checkpoints).toBe(1002);

    const dry = await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [thread], dryRun: true });
    expect(await sizes([thread])).toEqual(before);
    const real = await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [thread], chunkSize: 200 });
    const after = await sizes([thread]);

    expectDeleted(real, before, after);
    expect(deleted(dry)).toEqual(deleted(real));
    expect(after.checkpoints).toBe(1);
    expect(after.writes).toBe(0); // the last run finished: its head has no pending writes
    const head = (await saver.getTuple(cfg(thread)))!;
    const { rows } = await db.pool.query("SELECT channel, version FROM checkpoint_blobs WHERE thread_id = $1 AND channel <> '__elements__' ORDER BY 1", [thread]);
    // The head's versions of the channels it holds a value of (a consumed trigger's version has no row).
    const held = Object.entries(head.checkpoint.channel_versions).filter(([ch]) => Object.prototype.hasOwnProperty.call(head.checkpoint.channel_values, ch));
    expect(rows.map((r) => [r.channel, r.version])).toEqual(held.sort(([a], [b]) => (a < b ? -1 : 1)));
    // And one element row per message the head holds (chunks apart): those of earlier lists went with them.
    const { rows: elements } = await db.pool.query("SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__' AND type <> 'pg:refs'", [thread]);
    expect(elements[0].n).toBe((head.checkpoint.channel_values.messages as unknown[]).length);
    expect((await graph.getState(cfg(thread))).values).toEqual(stateBefore.values);
    const reply = await graph.invoke({ messages: [new HumanMessage({ id: "h-final", content: "still there?" })] }, cfg(thread));
    expect(reply.messages).toHaveLength(670);

    const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
    console.log(
      [
        "[prune] 1,000-step chat thread (334 turns, 1,002 checkpoints), prune({ keepLast: 1 }):",
        `  checkpoints ${before.checkpoints} -> ${after.checkpoints} rows, ${kb(before.checkpointBytes)} -> ${kb(after.checkpointBytes)}`,
        `  writes      ${before.writes} -> ${after.writes} rows, ${kb(before.writeBytes)} -> ${kb(after.writeBytes)}`,
        `  blobs       ${before.blobs} -> ${after.blobs} rows, ${kb(before.blobBytes)} -> ${kb(after.blobBytes)}`,
        `  total       ${kb(before.checkpointBytes + before.writeBytes + before.blobBytes)} -> ${kb(after.checkpointBytes + after.writeBytes + after.blobBytes)}` +
          ` (dry run predicted ${kb(dry.bytes)} to go; took ${Math.round(real.durationMs)} ms in ${Math.ceil(before.checkpoints / 200)}+ rounds)`,
      ].join("\n"),
    );
  });

  it("a chat with messages in a DeltaChannel keeps the ancestors back to the last snapshot", { timeout: 180_000 }, async () => {
    const thread = tid("delta-chat");
    const graph = deltaChatGraph(saver);
    // 160 turns, not 334: each step of a delta chat walks back to the last snapshot, so it is slow to build.
    // (Not 150: the 300th message update falls on the last step, which then stores a snapshot itself.)
    for (let i = 0; i < 160; i++) await graph.invoke({ messages: [new HumanMessage({ id: `h${i}`, content: `message number ${i}` })] }, cfg(thread));
    const stateBefore = await graph.getState(cfg(thread));
    const before = await sizes([thread]);
    const real = await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [thread] });
    const after = await sizes([thread]);
    expectDeleted(real, before, after);
    expect((await graph.getState(cfg(thread))).values).toEqual(stateBefore.values);
    // MessagesDeltaValue snapshots every 100 updates (2 per turn): the head needs the 20 updates since the last one.
    expect(after.checkpoints).toBeGreaterThan(1);
    expect(after.checkpoints).toBeLessThan(before.checkpoints / 3);
    expect(real.kept).toEqual({ keepLast: 1, head: 0, olderThan: 0, grace: 0, delta: after.checkpoints - 1 });
    const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
    console.log(
      [
        "[prune] a 160-turn chat, messages in a DeltaChannel (MessagesDeltaValue), prune({ keepLast: 1 }):",
        `  checkpoints ${before.checkpoints} -> ${after.checkpoints}, writes ${before.writes} -> ${after.writes}, blobs ${before.blobs} -> ${after.blobs}`,
        `  total       ${kb(before.checkpointBytes + before.writeBytes + before.blobBytes)} -> ${kb(after.checkpointBytes + after.writeBytes + after.blobBytes)}`,
      ].join("\n"),
    );
  });
});
