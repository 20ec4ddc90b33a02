/**
 * LangGraph semantics that outside test suites found (LangGraph's own Pregel
 * and functional-API tests, the official Postgres saver's tests): every graph
 * here runs on MemorySaver too, and must run the same on PostgresSaver.
 * Issue #14.
 */
import { EventEmitter, setMaxListeners } from "node:events";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  Annotation,
  Command,
  END,
  INTERRUPT,
  MemorySaver,
  MessagesDeltaValue,
  Send,
  START,
  StateGraph,
  StateSchema,
  entrypoint,
  interrupt,
  task,
} from "@langchain/langgraph";
import { type BaseCheckpointSaver, type Checkpoint, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver } from "../../src/index.js";
import { lockWaitingSql } from "../helpers/citus.js";
import { waitForLockWait, withTestDatabase } from "../helpers/db.js";
import { history, nestedGraph, parallelInterruptGraph, plainValues, shape, tid } from "../helpers/graphs.js";

const db = withTestDatabase("semantics");
let saver: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool);
});

type Durability = "sync" | "async" | "exit";
const DURABILITIES: Durability[] = ["sync", "async", "exit"];
const cfg = (thread_id: string, extra: Record<string, unknown> = {}): RunnableConfig => ({ configurable: { thread_id, ...extra } });

/** An invoke result without the interrupt ids (derived from checkpoint ids, so they differ between savers). */
function result(values: Record<string, unknown>): unknown {
  if (Array.isArray(values)) return plainValues(values);
  const out = plainValues({ ...values }) as Record<string, unknown>;
  const interrupts = values[INTERRUPT] as { id: string; value: unknown }[] | undefined;
  if (interrupts) out[INTERRUPT] = interrupts.map((i) => i.value);
  return out;
}

/** Runs `scenario` on MemorySaver and on PostgresSaver (a fresh thread each) and returns both transcripts. */
async function onBoth<T>(scenario: (saver: BaseCheckpointSaver, threadId: string) => Promise<T>): Promise<{ memory: T; postgres: T }> {
  return { memory: await scenario(new MemorySaver(), tid("mem")), postgres: await scenario(saver, tid("pg")) };
}

// ---------------------------------------------------------------------------

describe("several interrupt() calls in one node", () => {
  const State = Annotation.Root({ answers: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  const graph = (checkpointer: BaseCheckpointSaver, n: number) =>
    new StateGraph(State)
      .addNode("ask", () => {
        const answers: string[] = [];
        for (let i = 1; i <= n; i++) answers.push(interrupt<string, string>(`question ${i}`));
        return { answers };
      })
      .addEdge(START, "ask")
      .addEdge("ask", END)
      .compile({ checkpointer });

  const cases = DURABILITIES.flatMap((durability) =>
    [2, 3].flatMap((n) => (["value", "id map"] as const).map((style) => ({ durability, n, style }))),
  );
  it.each(cases)("$n interrupts, resumed one by one by $style, durability $durability", async ({ durability, n, style }) => {
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const g = graph(checkpointer, n);
      const config = { ...cfg(threadId), durability };
      const transcript: unknown[] = [result(await g.invoke({ answers: [] }, config))];
      for (let i = 1; i <= n; i++) {
        const state = await g.getState(config);
        const pending = state.tasks.flatMap((t) => t.interrupts);
        transcript.push(pending.map((p) => p.value));
        const resume = style === "value" ? `answer ${i}` : { [pending[0]!.id!]: `answer ${i}` };
        transcript.push(result(await g.invoke(new Command({ resume }), config)));
      }
      const final = await g.getState(config);
      transcript.push(plainValues(final.values), final.next);
      return transcript;
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
    const answers = Array.from({ length: n }, (_, i) => `answer ${i + 1}`);
    expect(postgres.at(-2)).toEqual({ answers });
    expect(postgres.at(-1)).toEqual([]);
  });

  it("putWrites of a task that resumed three interrupts keeps the last write of each special channel", async () => {
    const threadId = tid("writes");
    const g = graph(saver, 3);
    await g.invoke({ answers: [] }, cfg(threadId));
    await g.invoke(new Command({ resume: "one" }), cfg(threadId));
    await g.invoke(new Command({ resume: "two" }), cfg(threadId));
    const { rows } = await db.pool.query<{ channel: string; n: number }>(
      "SELECT channel, count(*)::int AS n FROM checkpoint_writes WHERE thread_id = $1 AND idx < 0 GROUP BY checkpoint_id, task_id, channel",
      [threadId],
    );
    // One row per (checkpoint, task, special channel): ON CONFLICT never saw the same key twice.
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) expect(r.n).toBe(1);
    expect((await g.invoke(new Command({ resume: "three" }), cfg(threadId))).answers).toEqual(["one", "two", "three"]);
  });

  it("the saver API: repeated special writes in one call, last one wins; regular writes keep the first", async () => {
    const cp = emptyCheckpoint();
    const config = await saver.put(cfg(tid("api"), { checkpoint_ns: "" }), cp, { source: "input", step: -1, parents: {} }, {});
    await saver.putWrites(config, [["__resume__", ["a"]], ["x", 1], ["__resume__", ["a", "b"]], ["__interrupt__", [1]], ["__resume__", ["a", "b", "c"]]], "t1");
    await saver.putWrites(config, [["__resume__", ["z"]], ["x", 2]], "t1"); // x at idx 1 again: kept as first written
    const tuple = await saver.getTuple(config);
    expect(tuple?.pendingWrites).toEqual([
      ["t1", "__resume__", ["z"]],
      ["t1", "__interrupt__", [1]],
      ["t1", "x", 1],
    ]);
  });
});

describe("interrupts of parallel tasks", () => {
  const SubState = Annotation.Root({ prompt: Annotation<string>, humanInput: Annotation<string>, humanInputs: Annotation<string[]> });
  const ParentState = Annotation.Root({
    prompts: Annotation<string[]>,
    humanInputs: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
  });
  /** LangGraph's test "resume multiple interrupts": a subgraph per prompt (Send), each interrupting. */
  const fanOut = (checkpointer: BaseCheckpointSaver) => {
    const child = new StateGraph(SubState)
      .addNode("getHumanInput", (s) => {
        const humanInput = interrupt<string, string>(s.prompt);
        return { humanInput, humanInputs: [humanInput] };
      })
      .addEdge(START, "getHumanInput")
      .compile();
    return new StateGraph(ParentState)
      .addNode("child", child)
      .addNode("cleanup", () => ({}))
      .addConditionalEdges(START, (s) => s.prompts.map((prompt) => new Send("child", { prompt })), ["child"])
      .addEdge("child", "cleanup")
      .addEdge("cleanup", END)
      .compile({ checkpointer });
  };
  const prompts = ["a", "b", "c", "d", "e"];
  // LangGraph adds abort listeners to the step's shared signal per parallel task (its stream(), and
  // RunnableSequence.invoke of @langchain/core): five tasks pass Node's default of 10 and Node warns of a
  // leak (MaxListenersExceededWarning), with MemorySaver alike (langgraphjs issues #1014, #1494). No
  // listener of this package is involved; the limit is raised for these tests only, for signals made meanwhile.
  let defaultMaxListeners: number;
  beforeAll(() => {
    defaultMaxListeners = EventEmitter.defaultMaxListeners;
    setMaxListeners(4 * prompts.length);
  });
  afterAll(() => setMaxListeners(defaultMaxListeners));

  it.each(DURABILITIES)("are reported in task order by invoke and by getState, and all resumed at once (durability %s)", async (durability) => {
    for (let round = 0; round < 3; round++) {
      const g = fanOut(saver);
      const config = { ...cfg(tid("fan")), durability };
      const values = await g.invoke({ prompts }, config);
      const interrupts = (await g.getState(config)).tasks.flatMap((t) => t.interrupts);
      expect((values as Record<string, unknown>)[INTERRUPT]).toEqual(interrupts);
      expect(interrupts.map((i) => i.value)).toEqual(prompts);
      const resume = Object.fromEntries(interrupts.map((i) => [i.id, `response: ${String(i.value)}`]));
      expect(await g.invoke(new Command({ resume }), config)).toEqual({ prompts, humanInputs: prompts.map((p) => `response: ${p}`) });
    }
  });

  it.each(DURABILITIES)("resumed one by one, in order, as on MemorySaver (durability %s)", async (durability) => {
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const g = fanOut(checkpointer);
      const config = { ...cfg(threadId), durability };
      let out = (await g.invoke({ prompts }, config)) as Record<string, unknown>;
      const transcript: unknown[] = [result(out)];
      for (let k = 0; k < prompts.length; k++) {
        // The first interrupt still pending, as the last invoke reported them.
        const first = (out[INTERRUPT] as { id: string }[])[0]!;
        out = (await g.invoke(new Command({ resume: { [first.id]: `r${k}` } }), config)) as Record<string, unknown>;
        transcript.push(result(out));
      }
      return transcript;
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
    expect(postgres.map((r) => (r as Record<string, string[]>)[INTERRUPT]?.join(""))).toEqual(["abcde", "bcde", "cde", "de", "e", undefined]);
    expect(postgres.at(-1)).toEqual({ prompts, humanInputs: ["r0", "r1", "r2", "r3", "r4"] });
  });

  it.each(DURABILITIES)("two parallel nodes and a subgraph interrupt and resume as on MemorySaver (durability %s)", async (durability) => {
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const transcript: unknown[] = [];
      const par = parallelInterruptGraph(checkpointer);
      const c1 = { ...cfg(`${threadId}-par`), durability };
      transcript.push(result(await par.invoke({ answers: [] }, c1)));
      const ids = (await par.getState(c1)).tasks.flatMap((t) => t.interrupts);
      transcript.push(result(await par.invoke(new Command({ resume: Object.fromEntries(ids.map((i) => [i.id, `yes ${String(i.value)}`])) }), c1)));
      const nested = nestedGraph(checkpointer);
      const c2 = { ...cfg(`${threadId}-nested`), durability };
      transcript.push(result(await nested.invoke({ topic: "owls" }, c2)));
      transcript.push(result(await nested.invoke(new Command({ resume: "looks good" }), c2)));
      return transcript;
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
  });
});

describe("functional API", () => {
  it.each(DURABILITIES)("an entrypoint that interrupts between tasks, resumed three times (durability %s)", async (durability) => {
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const double = task("double", async (x: number) => 2 * x);
      const graph = entrypoint({ checkpointer, name: "imperative" }, async () => {
        const values: (number | string)[] = [];
        for (const i of [1, 2, 3]) {
          values.push(await double(i));
          values.push(interrupt<{ a: string }, string>({ a: `boo${i}` }));
        }
        return { values };
      });
      const config = { ...cfg(threadId), durability };
      const transcript: unknown[] = [result((await graph.invoke([], config)) as Record<string, unknown>)];
      for (const answer of ["a", "b", "c"]) transcript.push(result((await graph.invoke(new Command({ resume: answer }), config)) as Record<string, unknown>));
      return transcript;
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
    expect(postgres.at(-1)).toEqual({ values: [2, "a", 4, "b", 6, "c"] });
  });

  it.each(DURABILITIES)("a task that interrupts twice (durability %s)", async (durability) => {
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const confirm = task("confirm", async (item: string) => {
        const first = interrupt<string, string>(`first look at ${item}`);
        const second = interrupt<string, string>(`second look at ${item}`);
        return `${item}: ${first}/${second}`;
      });
      const graph = entrypoint({ checkpointer, name: "review" }, async (items: string[]) => Promise.all(items.map((i) => confirm(i))));
      const config = { ...cfg(threadId), durability };
      const transcript: unknown[] = [];
      let out = (await graph.invoke(["x", "y"], config)) as unknown as Record<string, unknown>;
      transcript.push(result(out));
      for (let k = 0; k < 4 && out[INTERRUPT]; k++) {
        const pending = out[INTERRUPT] as { id: string; value: string }[];
        const resume = Object.fromEntries(pending.map((p) => [p.id, `ok${k}`]));
        out = (await graph.invoke(new Command({ resume }), config)) as unknown as Record<string, unknown>;
        transcript.push(result(out));
      }
      return transcript;
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
    expect(postgres).toEqual([
      { [INTERRUPT]: ["first look at x"] },
      { [INTERRUPT]: ["second look at x"] },
      { [INTERRUPT]: ["first look at y"] },
      { [INTERRUPT]: ["second look at y"] },
      ["x: ok0/ok1", "y: ok2/ok3"],
    ]);
  });
});

describe("every durability on every graph shape", () => {
  const Seq = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  const sequence = (c: BaseCheckpointSaver) =>
    new StateGraph(Seq)
      .addNode("one", () => ({ log: ["one"] }))
      .addNode("two", () => ({ log: ["two"] }))
      .addNode("three", () => ({ log: ["three"] }))
      .addEdge(START, "one")
      .addEdge("one", "two")
      .addEdge("two", "three")
      .addEdge("three", END)
      .compile({ checkpointer: c });
  const mapReduce = (c: BaseCheckpointSaver) =>
    new StateGraph(Seq)
      .addNode("work", (s: { item?: string }) => ({ log: [`did ${s.item}`] }))
      .addNode("done", (s) => ({ log: [`done after ${s.log.length}`] }))
      .addConditionalEdges(START, () => ["p", "q", "r"].map((item) => new Send("work", { item })), ["work"])
      .addEdge("work", "done")
      .addEdge("done", END)
      .compile({ checkpointer: c });
  const deltaChat = (c: BaseCheckpointSaver) =>
    new StateGraph(new StateSchema({ messages: MessagesDeltaValue }))
      .addNode("bot", (s) => ({ messages: [new AIMessage({ id: `ai-${s.messages.length}`, content: `echo ${String(s.messages.at(-1)?.content)}` })] }))
      .addEdge(START, "bot")
      .addEdge("bot", END)
      .compile({ checkpointer: c });
  const shapes: [string, (c: BaseCheckpointSaver) => { invoke(input: unknown, config: RunnableConfig): Promise<unknown> }, (turn: number) => unknown][] = [
    ["a sequence", sequence, () => ({ log: ["in"] })],
    ["a Send map-reduce", mapReduce, () => ({ log: [] })],
    ["a DeltaChannel chat", deltaChat, (turn) => ({ messages: [new HumanMessage({ id: `h-${turn}`, content: `hi ${turn}` })] })],
  ];
  const cases = shapes.flatMap(([name, build, input]) => DURABILITIES.map((durability) => ({ name, build, input, durability })));

  it.each(cases)("$name, durability $durability: three turns, same results and history as MemorySaver", async ({ build, input, durability }) => {
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const g = build(checkpointer) as ReturnType<typeof sequence>;
      const config = { ...cfg(threadId), durability };
      const outputs: unknown[] = [];
      for (let turn = 0; turn < 3; turn++) outputs.push(plainValues(await g.invoke(input(turn) as never, config)));
      // A fresh graph reads the state back from the saver alone.
      const fresh = build(checkpointer) as ReturnType<typeof sequence>;
      return { outputs, state: plainValues((await fresh.getState(cfg(threadId))).values), history: shape(await history(fresh, cfg(threadId))) };
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
  });
});

describe("one thread's results come back in call order", () => {
  it("a getTuple waiting for a run's put also waits for the puts LangGraph chains on it, and reads the head they make", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 5, application_name: "chained-writers" });
    const saver = new PostgresSaver(pool);
    const blocker = await db.pool.connect();
    try {
      const threadId = tid("chained");
      const step = (n: number) => ({ ...emptyCheckpoint(), id: uuid6(n), channel_values: { x: n }, channel_versions: { x: `${n + 2}.1` } });
      const meta = (n: number) => ({ source: "loop" as const, step: n, parents: {} });
      const first = await saver.put(cfg(threadId, { checkpoint_ns: "" }), step(-1), { source: "input", step: -1, parents: {} }, { x: "1.1" });
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
      // A run goes on after its invoke failed (a write was lost): LangGraph calls each put once the previous returned.
      const run = saver
        .put(first, step(0), meta(0), { x: "2.1" })
        .then((c) => saver.put(c, step(1), meta(1), { x: "3.1" }))
        .then((c) => saver.put(c, step(2), meta(2), { x: "4.1" }));
      await waitForLockWait(db.pool, "checkpoint_heads");
      // The retry's first read, while the run's put waits.
      const read = saver.getTuple(cfg(threadId));
      await blocker.query("ROLLBACK");
      const [head, last] = await Promise.all([read, run]);
      // Read before the run's last put, the retry would start from an older head and fork the thread.
      expect(head?.checkpoint.id).toBe(last.configurable?.checkpoint_id);
      expect(head?.checkpoint.channel_values).toEqual({ x: 2 });
    } finally {
      blocker.release();
      await pool.end();
    }
  });

  it("a getTuple called after a put blocked on a lock waits for it; another thread's does not", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 5, application_name: "ordered-writers" });
    const ordered = new PostgresSaver(pool);
    const blocker = await db.pool.connect();
    try {
      const threadId = tid("order");
      const cp0 = { ...emptyCheckpoint(), channel_values: { x: 0 }, channel_versions: { x: "1.1" } };
      const first = await ordered.put(cfg(threadId, { checkpoint_ns: "" }), cp0, { source: "input", step: -1, parents: {} }, { x: "1.1" });
      const other = tid("order-other");
      await ordered.put(cfg(other, { checkpoint_ns: "" }), { ...cp0, id: uuid6(-3) }, { source: "input", step: -1, parents: {} }, { x: "1.1" });
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
      const done: string[] = [];
      const cp1 = { ...emptyCheckpoint(), channel_values: { x: 1 }, channel_versions: { x: "2.1" } };
      const put = ordered.put(first, cp1, { source: "loop", step: 0, parents: {} }, { x: "2.1" }).then(() => done.push("put"));
      const read = ordered.getTuple(cfg(threadId)).then((t) => done.push(`read ${String(t?.checkpoint.channel_values.x)}`));
      const lockWaiter = async () => {
        for (let i = 0; i < 500; i++) {
          const { rows } = await db.pool.query(
            `SELECT count(*)::int AS n FROM ${lockWaitingSql()} a WHERE a.application_name = 'ordered-writers'`,
          );
          if (rows[0].n > 0) return;
          await new Promise((r) => setTimeout(r, 10));
        }
        throw new Error("the put never waited on the lock");
      };
      // The put waits on the lock; the read waits for the put (a write in flight on its lineage, src/saver/threads.ts).
      await lockWaiter();
      // Only the put's client is out: the read has not started its statement.
      for (let i = 0; i < 500 && pool.totalCount - pool.idleCount !== 1; i++) await new Promise((r) => setTimeout(r, 10));
      expect(pool.totalCount - pool.idleCount).toBe(1);
      expect((await ordered.getTuple(cfg(other)))?.checkpoint.channel_values).toEqual({ x: 0 });
      expect(done).toEqual([]);
      await blocker.query("ROLLBACK");
      await Promise.all([put, read]);
      // The read ran once the put had committed (x is 1), and is delivered after it.
      expect(done).toEqual(["put", "read 1"]);

      // A failure behind a pending operation is delivered at once (LangGraph stops the run on it),
      // never as an unhandled rejection; successes behind it keep their order.
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on("unhandledRejection", onUnhandled);
      try {
        await blocker.query("BEGIN");
        await blocker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
        const order: string[] = [];
        const cp2 = { ...emptyCheckpoint(), channel_values: { x: 2 }, channel_versions: { x: "3.1" } };
        const blocked = ordered.put(cfg(threadId, { checkpoint_ns: "", checkpoint_id: cp1.id }), cp2, { source: "loop", step: 1, parents: {} }, { x: "3.1" });
        void blocked.then(() => order.push("put"));
        const failing = ordered.putWrites(cfg(threadId, { checkpoint_ns: "", checkpoint_id: cp1.id }), [["x", () => 1]], "t").then(
          () => order.push("writes stored"),
          (e: unknown) => order.push(`writes refused: ${(e as Error).name}`),
        );
        const stored = ordered.putWrites(cfg(threadId, { checkpoint_ns: "", checkpoint_id: cp1.id }), [["x", 5]], "t2").then(() => order.push("writes stored"));
        await failing;
        await lockWaiter();
        expect(order).toEqual(["writes refused: SerializationError"]);
        await blocker.query("ROLLBACK");
        await Promise.all([blocked, stored]);
        expect(order).toEqual(["writes refused: SerializationError", "put", "writes stored"]);
        await new Promise((r) => setImmediate(r));
        expect(unhandled).toEqual([]);
      } finally {
        process.off("unhandledRejection", onUnhandled);
      }
    } finally {
      blocker.release();
      await pool.end();
    }
  });
});

describe("checkpoints without optional fields", () => {
  it("a put without versions_seen (an older writer) gets MemorySaver's default, and the graph continues from it", async () => {
    const State = Annotation.Root({ n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
    const g = (c: BaseCheckpointSaver) =>
      new StateGraph(State)
        .addNode("inc", () => ({ n: 1 }))
        .addEdge(START, "inc")
        .addEdge("inc", END)
        .compile({ checkpointer: c });
    const scenario = async (checkpointer: BaseCheckpointSaver, threadId: string) => {
      const version = checkpointer.getNextVersion(undefined);
      const { versions_seen: _, ...old } = { ...emptyCheckpoint(), channel_values: { n: 41 }, channel_versions: { n: version } };
      await checkpointer.put(cfg(threadId, { checkpoint_ns: "" }), old as unknown as Checkpoint, { source: "update", step: 0, parents: {} }, { n: version });
      const stored = await checkpointer.getTuple(cfg(threadId));
      const out = await g(checkpointer).invoke({ n: 0 }, cfg(threadId));
      return { seen: stored?.checkpoint.versions_seen, out };
    };
    const { memory, postgres } = await onBoth(scenario);
    expect(postgres).toEqual(memory);
    expect(postgres).toEqual({ seen: {}, out: { n: 42 } });
  });

  it("a stored row without versions_seen or channel_versions reads back with {} for them", async () => {
    const threadId = tid("norow");
    const cp = { ...emptyCheckpoint(), channel_values: { x: 1 }, channel_versions: { x: "1.5" } };
    const config = await saver.put(cfg(threadId, { checkpoint_ns: "" }), cp, { source: "input", step: -1, parents: {} }, { x: "1.5" });
    expect((await db.pool.query("SELECT checkpoint ? 'versions_seen' AS has FROM checkpoints WHERE thread_id = $1", [threadId])).rows[0].has).toBe(true);
    await db.pool.query("UPDATE checkpoints SET checkpoint = checkpoint - 'versions_seen' - 'channel_versions' WHERE thread_id = $1", [threadId]);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint).toMatchObject({ id: cp.id, versions_seen: {}, channel_versions: {}, channel_values: {} });
  });
});

describe("a put whose parent was never stored", () => {
  // The official saver's test "should save and retrieve checkpoints correctly", on both lineage modes.
  const checkpoint1 = {
    v: 1,
    id: uuid6(0),
    ts: "2024-04-19T17:19:07.952Z",
    channel_values: { someKey1: "someValue1" },
    channel_versions: { someKey1: 1, someKey2: 1 },
    versions_seen: { someKey3: { someKey4: 1 } },
    pending_sends: [],
  } as unknown as Checkpoint;
  const checkpoint2 = {
    v: 1,
    id: uuid6(1),
    ts: "2024-04-20T17:19:07.952Z",
    channel_values: { someKey1: "someValue2" },
    channel_versions: { someKey1: 1, someKey2: 2 },
    versions_seen: { someKey3: { someKey4: 2 } },
    pending_sends: [],
  } as unknown as Checkpoint;
  const meta = { source: "update" as const, step: -1, parents: {} };

  it("branch mode: the official saver's put sequence works as it does there", async () => {
    const threadId = tid("official");
    expect(await saver.getTuple(cfg(threadId))).toBeUndefined();
    const first = await saver.put(cfg(threadId), checkpoint1, meta, checkpoint1.channel_versions);
    expect(first).toEqual({ configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: checkpoint1.id } });
    await saver.putWrites(first, [["bar", "baz"]], "foo");
    const t1 = await saver.getTuple(cfg(threadId));
    expect(t1?.checkpoint).toEqual(checkpoint1);
    expect(t1?.parentConfig).toBeUndefined();
    expect(t1?.pendingWrites).toEqual([["foo", "bar", "baz"]]);
    await saver.put(cfg(threadId, { checkpoint_id: "2024-04-18T17:19:07.952Z" }), checkpoint2, meta, checkpoint2.channel_versions);
    const t2 = await saver.getTuple(cfg(threadId));
    expect(t2?.metadata).toEqual(meta);
    expect(t2?.parentConfig).toEqual({ configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: "2024-04-18T17:19:07.952Z" } });
    const listed: string[] = [];
    for await (const t of saver.list(cfg(threadId))) listed.push(t.checkpoint.ts);
    expect(listed).toEqual(["2024-04-20T17:19:07.952Z", "2024-04-19T17:19:07.952Z"]);
  });

  it("linear mode: the same put is refused with CheckpointParentMissingError, nothing written", async () => {
    const linear = new PostgresSaver(db.pool, { lineage: "linear" });
    const threadId = tid("official-linear");
    await linear.put(cfg(threadId), checkpoint1, meta, checkpoint1.channel_versions);
    await expect(linear.put(cfg(threadId, { checkpoint_id: "2024-04-18T17:19:07.952Z" }), checkpoint2, meta, checkpoint2.channel_versions)).rejects.toMatchObject({
      name: "CheckpointParentMissingError",
      code: "CHECKPOINT_PARENT_MISSING",
      parentCheckpointId: "2024-04-18T17:19:07.952Z",
    });
    expect((await linear.getTuple(cfg(threadId)))?.checkpoint.id).toBe(checkpoint1.id);
  });
});
