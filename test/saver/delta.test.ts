/**
 * LangGraph's delta channels (`DeltaChannel`, `MessagesDeltaValue`) with values stored by content
 * (issue 41): a checkpoint keeps only a channel's new writes, and every so many updates a
 * `DeltaSnapshot` of the whole list. The snapshot names the element rows the writes stored, so each
 * message is on disk once, and its put sends none of them again (the saver remembers what the walk
 * it read and the puts after it name). Read back, forked, updated, continued by another process or
 * after prune: the same as on MemorySaver.
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { DeltaValue, END, MemorySaver, MessagesDeltaValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { DeltaSnapshot, type BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { describe, expect, it } from "vitest";
import { exportThread, importThread, migrate, PostgresSaver, prune, type BlobRecord } from "../../src/index.js";
import { saverStatements } from "../../src/saver/sql/index.js";
import { longText } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { recordStatements } from "../helpers/statements.js";
import { history, plainValues, shape, tid } from "../helpers/graphs.js";

const db = withTestDatabase("delta");
let migrated: Promise<unknown> | undefined;
const ready = () => (migrated ??= migrate({ pool: db.pool }));

/** A chat whose messages live in a delta channel snapshotted every `every` updates (two a turn). */
function chat(checkpointer: BaseCheckpointSaver, every: number) {
  const messages = new DeltaValue(MessagesDeltaValue.valueSchema, {
    inputSchema: MessagesDeltaValue.inputSchema,
    reducer: MessagesDeltaValue.reducer,
    snapshotFrequency: every,
  });
  return new StateGraph(new StateSchema({ messages }))
    .addNode("bot", (s: { messages: BaseMessage[] }) => ({
      messages: [new AIMessage({ id: `ai-${s.messages.length}`, content: longText(`answer ${s.messages.length}`) })],
    }))
    .addEdge(START, "bot")
    .addEdge("bot", END)
    .compile({ checkpointer });
}

/** A question of more than 256 bytes: a write of it is stored by content. */
const ask = (turn: number) => ({ messages: [new HumanMessage({ id: `h-${turn}`, content: longText(`question ${turn}`) })] });
const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });
const texts = (values: Record<string, unknown>) => (values.messages as BaseMessage[]).map((m) => `${m.id}: ${String(m.content).slice(0, 24)}`);

describe("a delta channel's snapshot stores what the writes stored", () => {
  it("each message is on disk once, and a snapshot's put sends none of them again", async () => {
    await ready();
    const saver = new PostgresSaver(db.pool);
    const threadId = tid("once");
    const graph = chat(saver, 4);
    for (let turn = 0; turn < 12; turn++) await graph.invoke(ask(turn), cfg(threadId));

    const { rows: snapshots } = await db.pool.query<{ type: string }>(
      "SELECT type FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'messages' AND type <> 'empty'",
      [threadId],
    );
    expect(snapshots.length).toBeGreaterThanOrEqual(5);
    // Each snapshot names its messages (an object stored by content), never holds them.
    for (const s of snapshots) expect(s.type).toMatch(/^pg:obj:/);
    const { rows: elements } = await db.pool.query<{ n: number; touched: number }>(
      `SELECT count(*)::int AS n, max(row_version)::int AS touched FROM checkpoint_blobs
        WHERE thread_id = $1 AND channel = '__elements__' AND type <> 'pg:refs'`,
      [threadId],
    );
    // 24 messages, each one element row (chunks aside: type pg:refs).
    expect(elements[0]!.n).toBe(24);
    // Sent by its write and, a question, by the input checkpoint too; at most once more by the snapshot
    // right after it, when that put was encoded before the write was stored (scheduling decides). A snapshot
    // sending them again would touch the first messages once per snapshot after them (6 here).
    expect(elements[0]!.touched).toBeLessThanOrEqual(3);

    const state = await chat(new PostgresSaver(db.pool), 4).getState(cfg(threadId));
    expect(state.values.messages).toHaveLength(24);
    expect(texts(state.values)[23]).toBe(`ai-23: ${longText("answer 23").slice(0, 24)}`);
  });

  it("a snapshot reads back as a DeltaSnapshot holding the list", async () => {
    await ready();
    const saver = new PostgresSaver(db.pool);
    const threadId = tid("snapshot");
    const graph = chat(saver, 2);
    for (let turn = 0; turn < 2; turn++) await graph.invoke(ask(turn), cfg(threadId));
    const tuple = await saver.getTuple(cfg(threadId));
    const snapshot = tuple!.checkpoint.channel_values.messages;
    expect(snapshot).toBeInstanceOf(DeltaSnapshot);
    expect((snapshot as DeltaSnapshot).value).toHaveLength(4);
    expect(((snapshot as DeltaSnapshot).value as BaseMessage[]).map((m) => m.id)).toEqual(["h-0", "ai-1", "h-1", "ai-3"]);
  });

  it("an export shows a snapshot as the hashes it names, tagged DeltaSnapshot; export -> delete -> import reads back the same", async () => {
    await ready();
    const saver = new PostgresSaver(db.pool);
    const threadId = tid("export");
    for (let turn = 0; turn < 2; turn++) await chat(saver, 2).invoke(ask(turn), cfg(threadId));
    const before = texts((await chat(saver, 2).getState(cfg(threadId))).values);
    const records = await exportThread({ pool: db.pool, threadId, decoded: true });
    const snapshots = records.filter((r): r is BlobRecord => r.kind === "blob" && r.channel === "messages" && r.type !== "empty");
    expect(snapshots.length).toBeGreaterThan(0);
    for (const s of snapshots) {
      expect(s.decoded).toEqual({ $type: "DeltaSnapshot", value: { value: { $type: "pg:refs", hashes: expect.any(Array) } } });
    }
    await saver.deleteThread(threadId);
    await importThread({ pool: db.pool, records });
    expect(texts((await chat(new PostgresSaver(db.pool), 2).getState(cfg(threadId))).values)).toEqual(before);
  });
});

describe("a snapshot read by its elements is kept for the next turn's read", () => {
  it("the next history read names the kept snapshot, and the statement then sends none of its element rows", async () => {
    await ready();
    const pool = testPool({ connectionString: db.url });
    const sent = recordStatements(pool);
    try {
      const saver = new PostgresSaver(pool);
      const threadId = tid("kept");
      // A snapshot every 7 updates (two a turn): the reads of turns 5 and 6 walk to the one of turn 4.
      for (let turn = 0; turn < 6; turn++) await chat(saver, 7).invoke(ask(turn), cfg(threadId));
      const history = saverStatements("public").deltaHistory;
      const reads = sent.filter((s) => s.text === history);
      expect(reads.length).toBeGreaterThan(0);
      const hinted = reads.filter((s) => (s.values[4] as string[]).length > 0).at(-1);
      expect(hinted, "a history read naming a kept snapshot").toBeDefined();
      const elementRows = async (values: unknown[]) =>
        (await db.pool.query<{ kind: string }>(history, values)).rows.filter((r) => r.kind === "element").length;
      const without = await elementRows([...hinted!.values.slice(0, 4), [], []]);
      const with_ = await elementRows(hinted!.values);
      // The snapshot names its messages (and more than the walk's writes do).
      expect(with_).toBeLessThan(without);
      expect(texts((await chat(new PostgresSaver(db.pool), 7).getState(cfg(threadId))).values)).toHaveLength(12);
    } finally {
      await pool.end();
    }
  });

  it("a kept snapshot whose row changed since is read again from its row", async () => {
    await ready();
    const saver = new PostgresSaver(db.pool);
    const threadId = tid("stale");
    const graph = chat(saver, 2);
    for (let turn = 0; turn < 2; turn++) await graph.invoke(ask(turn), cfg(threadId));
    const head = (await saver.getTuple(cfg(threadId)))!;
    const seedOf = async () => (await saver.getDeltaChannelHistory({ config: head.parentConfig!, channels: ["messages"] })).messages!.seed as DeltaSnapshot;
    expect((await seedOf()).value).toHaveLength(2); // kept now
    // The snapshot row the walk ends at (the first, two messages) now holds the refs of the newest
    // (four): rewritten with SQL, as a restore or an import of another copy might.
    const { rows } = await db.pool.query<{ version: string }>(
      "SELECT version FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'messages' AND type <> 'empty' ORDER BY version",
      [threadId],
    );
    expect(rows.length).toBeGreaterThanOrEqual(2);
    await db.pool.query(
      `UPDATE checkpoint_blobs b SET type = o.type, value = o.value FROM checkpoint_blobs o
        WHERE b.thread_id = $1 AND b.channel = 'messages' AND b.version = $2 AND o.thread_id = $1 AND o.channel = 'messages' AND o.version = $3`,
      [threadId, rows[0]!.version, rows.at(-1)!.version],
    );
    const again = await seedOf();
    expect(again).toBeInstanceOf(DeltaSnapshot);
    expect(again.value).toHaveLength(4);
  });
});

describe("delta channels behave as on MemorySaver", () => {
  /** Turns, an updateState, a fork from an earlier checkpoint and more turns; the state and history after each step. */
  const scenario = async (saver: BaseCheckpointSaver, threadId: string, again: () => BaseCheckpointSaver) => {
    const steps: unknown[] = [];
    const look = async (g: ReturnType<typeof chat>) => {
      const state = await g.getState(cfg(threadId));
      steps.push({ values: texts(state.values), history: shape(await history(g, cfg(threadId))) });
    };
    let graph = chat(saver, 3);
    for (let turn = 0; turn < 4; turn++) {
      await graph.invoke(ask(turn), cfg(threadId));
      await look(graph);
    }
    await graph.updateState(cfg(threadId), { messages: [new AIMessage({ id: "edited", content: longText("an edit") })] }, "bot");
    await look(graph);
    const past = (await history(graph, cfg(threadId)))[5]!;
    const forked = await graph.invoke(ask(100), past.config);
    steps.push(plainValues({ forked: texts(forked) }));
    await look(graph);
    // Another process (nothing remembered) goes on.
    graph = chat(again(), 3);
    for (let turn = 4; turn < 7; turn++) {
      await graph.invoke(ask(turn), cfg(threadId));
      await look(graph);
    }
    return steps;
  };

  it("turns, updateState, a fork and another process: the same state and history after every step", async () => {
    await ready();
    const memory = new MemorySaver();
    const expected = await scenario(memory, tid("mem"), () => memory);
    const actual = await scenario(new PostgresSaver(db.pool), tid("pg"), () => new PostgresSaver(db.pool));
    expect(actual).toEqual(expected);
  });

  it("prune between turns: what a snapshot names was not deleted, the state reads back whole", async () => {
    await ready();
    const saver = new PostgresSaver(db.pool);
    const memory = new MemorySaver();
    const threadId = tid("pruned");
    const graph = chat(saver, 3);
    const reference = chat(memory, 3);
    let deleted = 0;
    for (let turn = 0; turn < 12; turn++) {
      await graph.invoke(ask(turn), cfg(threadId));
      await reference.invoke(ask(turn), cfg(threadId));
      // Keeps the head and what its delta channel is rebuilt from; deletes the rest, element rows included.
      deleted += (await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [threadId] })).checkpoints;
      const state = await chat(new PostgresSaver(db.pool), 3).getState(cfg(threadId));
      expect(texts(state.values)).toEqual(texts((await reference.getState(cfg(threadId))).values));
    }
    expect(deleted).toBeGreaterThan(0);
  });
});
