/**
 * A run deleted mid-flight writes nothing after deleteThread returned (issue 30):
 * real LangGraph graphs whose node blocks until the test has deleted the thread,
 * for sync, async and exit durability, in both lineage modes. Afterwards the
 * thread reads as absent (getTuple, list, getState) and no row of it is left in
 * any table; then a new conversation on the same id works.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, ThreadDeletedError, type SaverEvent } from "../../src/index.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("deleted_run");
let pool: ReturnType<typeof testPool>;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 10 });
});
afterAll(async () => {
  await pool?.end();
});

const State = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });

/** Where the blocking node waits: `entered` resolves when it runs, it returns once `release()` is called. */
interface Block {
  entered: Promise<void>;
  release: () => void;
}
let block: Block | undefined;
function newBlock(): Block {
  let entered!: () => void;
  let release!: () => void;
  const enteredP = new Promise<void>((r) => (entered = r));
  const released = new Promise<void>((r) => (release = r));
  const b: Block = { entered: enteredP, release };
  (b as Block & { wait: () => Promise<void> }).wait = async () => {
    entered();
    await released;
  };
  return b;
}

/** start -> slow (blocks while `block` is set) -> after -> sub (a subgraph: its own namespace) -> END. */
function graph(checkpointer: BaseCheckpointSaver) {
  const sub = new StateGraph(State)
    .addNode("inner", () => ({ log: ["inner"] }))
    .addEdge(START, "inner")
    .addEdge("inner", END)
    .compile();
  return new StateGraph(State)
    .addNode("start", () => ({ log: ["start"] }))
    .addNode("slow", async () => {
      const b = block as (Block & { wait: () => Promise<void> }) | undefined;
      if (b) await b.wait();
      return { log: ["slow"] };
    })
    .addNode("after", () => ({ log: ["after"] }))
    .addNode("sub", sub)
    .addEdge(START, "start")
    .addEdge("start", "slow")
    .addEdge("slow", "after")
    .addEdge("after", "sub")
    .addEdge("sub", END)
    .compile({ checkpointer });
}

async function rowsOf(threadId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of ["checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_heads"]) {
    out[table] = Number((await db.pool.query(`SELECT count(*) AS n FROM ${table} WHERE thread_id = $1`, [threadId])).rows[0].n);
  }
  return out;
}
const NONE = { checkpoints: 0, checkpoint_writes: 0, checkpoint_blobs: 0, checkpoint_heads: 0 };

// Exit durability stores nothing of a first run before it ends, so there is nothing of it to delete (README).
const CASES = (["sync", "async", "exit"] as const).flatMap((durability) =>
  (["branch", "linear"] as const).flatMap((lineage) =>
    (durability === "exit" ? [true] : [true, false]).map((history) => ({ durability, lineage, history })),
  ),
);

describe("a run deleted mid-flight", () => {
  it.each(CASES)("$durability durability, $lineage lineage, history before: $history: writes nothing after deleteThread returned; the thread reads as absent; a new conversation works", async ({
    durability,
    lineage,
    history,
  }) => {
    const events: SaverEvent[] = [];
    /** When each event came (performance.now()), by index. */
    const at: number[] = [];
    const saver = new PostgresSaver(pool, { lineage, onEvent: (e) => void (events.push(e), at.push(performance.now())) });
    const app = graph(saver);
    const threadId = tid(`mid-${durability}-${lineage}`);
    const config: RunnableConfig = { configurable: { thread_id: threadId } };
    if (history) {
      await app.invoke({ log: ["first run"] }, { ...config, durability });
      expect((await rowsOf(threadId)).checkpoints).toBeGreaterThan(0);
    }

    const held = newBlock();
    block = held;
    const run = app.invoke({ log: ["second run"] }, { ...config, durability }).then(
      () => undefined,
      (e: unknown) => e,
    );
    let deletedAt: number;
    let deletedAtMs: number;
    try {
      await held.entered;
      await saver.deleteThread(threadId);
      deletedAt = events.length;
      deletedAtMs = performance.now();
      expect(await rowsOf(threadId)).toEqual(NONE);
    } finally {
      // Never leave the node blocked: the next case's graph would wait on it.
      held.release();
      block = undefined;
    }

    const failure = await run;
    expect(failure).toBeInstanceOf(ThreadDeletedError);
    // The run did try to write after the deletion, and was refused each time.
    const after = events.slice(deletedAt);
    expect(after.some((e) => e.type === "deletedThreadWrite")).toBe(true);
    // A write reported after deleteThread returned must have started before it: one that ran beside the deletion,
    // which the thread's lock ordered before it (so it was deleted too, or refused: the rows below say which), its
    // answer and the deletion's arriving together on two connections, in either order. None started after.
    const startedAfter = after.filter((e, i) => (e.type === "put" || e.type === "putWrites") && at[deletedAt + i]! - e.durationMs > deletedAtMs);
    expect(startedAfter).toEqual([]);

    expect(await saver.getTuple(config)).toBeUndefined();
    const listed = [];
    for await (const t of saver.list(config)) listed.push(t);
    expect(listed).toEqual([]);
    const state = await app.getState(config);
    expect(state.values).toEqual({});
    expect(state.next).toEqual([]);
    expect(await rowsOf(threadId)).toEqual(NONE);

    // A new conversation on the same id starts cleanly: as on a thread never used (MemorySaver's answer).
    const fresh = await graph(new MemorySaver()).invoke({ log: ["new"] }, { configurable: { thread_id: "fresh" }, durability });
    const result = await app.invoke({ log: ["new"] }, { ...config, durability });
    expect(result.log).toEqual(fresh.log);
    expect((await app.getState(config)).values.log).toEqual(fresh.log);
    if (durability !== "exit") {
      // The new conversation's subgraph stored its own lineage (exit durability stores none for a subgraph).
      const sub = await db.pool.query("SELECT count(*)::int AS n FROM checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns <> ''", [threadId]);
      expect(sub.rows[0].n).toBeGreaterThan(0);
    }
  });
});
