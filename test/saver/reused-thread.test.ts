/**
 * A thread id used again after deleteThread (issue 37): graphs with a subgraph
 * that interrupts, run on MemorySaver (the reference) and on PostgresSaver
 * with the same steps, compared after every step: the state with its
 * subgraphs' states, each invoke's result, the number of checkpoints listed.
 * With "exit" durability LangGraph puts a subgraph's checkpoint before the
 * root checkpoint it names; the tombstone refused it, silently (LangGraph
 * keeps the interrupt's error over the put's), and the resume asked again.
 * Each scenario runs with every durability for the invokes after a deletion,
 * in both lineage modes.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, Command, END, MemorySaver, START, StateGraph, interrupt, type StateSnapshot } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, type SaverEvent } from "../../src/index.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { plainValues } from "../helpers/graphs.js";

const db = withTestDatabase("reused_thread");
let pool: ReturnType<typeof testPool>;
beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 10 });
});
afterAll(async () => {
  await pool?.end();
});

type Durability = "sync" | "async" | "exit";
const State = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });

/**
 * One run of a scenario: a counter for the log (so both savers log the same
 * values) and the nodes that are to fail once, under a retry policy.
 */
class Run {
  n = 0;
  readonly failOnce = new Set<string>();
  tick = () => ++this.n;
  /** Throws the first time `node` runs after `failNext(node)`. */
  maybeFail(node: string) {
    if (this.failOnce.delete(node)) throw new Error(`${node} failed once`);
  }
}

/** pre -> sub -> post; `sub` is s1 -> (with `nested`, a subgraph running) s2, which asks `interrupts` questions. */
function graph(checkpointer: BaseCheckpointSaver, run: Run, options: { nested: boolean; interrupts: number }) {
  const ask = () => {
    const answers = Array.from({ length: options.interrupts }, (_, i) => interrupt<string, string>(`q${i}`));
    return { log: [`s2:${JSON.stringify(answers)}`] };
  };
  const inner = options.nested ? new StateGraph(State).addNode("s2", ask).addEdge(START, "s2").addEdge("s2", END).compile() : undefined;
  const sub = new StateGraph(State)
    .addNode("s1", () => ({ log: [`s1:${run.tick()}`] }))
    .addNode("s2", inner ?? ask)
    .addEdge(START, "s1")
    .addEdge("s1", "s2")
    .addEdge("s2", END)
    .compile();
  const retryPolicy = { maxAttempts: 2, initialInterval: 1, jitter: false, retryOn: () => true, logWarning: false };
  return new StateGraph(State)
    .addNode(
      "pre",
      () => {
        run.maybeFail("pre");
        return { log: [`pre:${run.tick()}`] };
      },
      { retryPolicy },
    )
    .addNode("sub", sub)
    .addNode(
      "post",
      () => {
        run.maybeFail("post");
        return { log: ["post"] };
      },
      { retryPolicy },
    )
    .addEdge(START, "pre")
    .addEdge("pre", "sub")
    .addEdge("sub", "post")
    .addEdge("post", END)
    .compile({ checkpointer });
}

/** A saver-independent view of a state: values, next, and each task's interrupts and state, subgraphs included. */
function view(s: StateSnapshot): unknown {
  return {
    values: plainValues(s.values),
    next: [...s.next].sort(),
    tasks: s.tasks
      .map((t) => ({ name: t.name, interrupts: t.interrupts.map((i) => i.value), state: t.state && "values" in t.state ? view(t.state) : null }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  };
}

type Graph = ReturnType<typeof graph>;
interface Step {
  /** What the step does, said in the comparison's output. */
  label: string;
  act(ctx: { graph: Graph; saver: BaseCheckpointSaver; run: Run }): Promise<unknown>;
  /** The thread whose state is compared after it. */
  thread: string;
}

/** Runs `steps` on `saver`, returning after each: the step's result and the thread's state and checkpoint count. */
async function play(saver: BaseCheckpointSaver, options: { nested: boolean; interrupts: number }, steps: Step[]) {
  const run = new Run();
  const g = graph(saver, run, options);
  const seen: unknown[] = [];
  for (const step of steps) {
    const result = await step.act({ graph: g, saver, run });
    const config = { configurable: { thread_id: step.thread } };
    let checkpoints = 0;
    for await (const _ of saver.list(config)) checkpoints++;
    seen.push({ step: step.label, result: plainValues(result), state: view(await g.getState(config, { subgraphs: true })), checkpoints });
  }
  return seen;
}

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });
const invoke = (thread: string, durability: Durability, failing?: string): Step => ({
  label: `invoke ${thread} (${durability}${failing ? `, ${failing} fails once` : ""})`,
  thread,
  act: ({ graph: g, run }) => {
    if (failing) run.failOnce.add(failing);
    return g.invoke({ log: [] }, { ...cfg(thread), durability });
  },
});
const resume = (thread: string, durability: Durability, answer: unknown): Step => ({
  label: `resume ${thread} (${durability})`,
  thread,
  act: ({ graph: g }) => g.invoke(new Command({ resume: answer }), { ...cfg(thread), durability }),
});
const remove = (thread: string): Step => ({ label: `deleteThread ${thread}`, thread, act: ({ saver }) => saver.deleteThread(thread) });

/** The three scenarios of issue 37, for the durability of the invokes after a deletion. */
function scenarios(d: Durability): Record<string, { options: { nested: boolean; interrupts: number }; steps: Step[] }> {
  const t0 = "t0";
  const u = "thread-ü";
  return {
    "an interrupt in a nested subgraph, the thread deleted three times": {
      options: { nested: true, interrupts: 1 },
      steps: [
        invoke(t0, "async", "pre"),
        remove(t0),
        invoke(t0, "sync"),
        remove(t0),
        invoke(t0, "async", "pre"),
        remove(t0),
        invoke(t0, d),
        resume(t0, d, "yes"),
      ],
    },
    "two threads, one resumed, deleted and run again": {
      options: { nested: false, interrupts: 1 },
      steps: [
        invoke("other", "async"),
        invoke(u, "async"),
        resume(u, "async", "a1"),
        invoke(u, "async"),
        resume("other", "sync", "b1"),
        remove(u),
        invoke(u, d),
        resume(u, d, "a2"),
      ],
    },
    "two interrupts, a state update and a fork, then deleted": {
      options: { nested: false, interrupts: 2 },
      steps: [
        invoke(t0, "async"),
        resume(t0, "async", "first"),
        resume(t0, "async", "second"),
        {
          label: "updateState, then a fork from the first checkpoint",
          thread: t0,
          act: async ({ graph: g }) => {
            await g.updateState(cfg(t0), { log: ["edited"] });
            const history: StateSnapshot[] = [];
            for await (const s of g.getStateHistory(cfg(t0))) history.push(s);
            // A fork is deliberate: linear lineage wants it said (allow_fork); MemorySaver ignores the key.
            const first = history.at(-1)!.config;
            return g.invoke({ log: ["forked"] }, { configurable: { ...first.configurable, allow_fork: true }, durability: "sync" });
          },
        },
        invoke(t0, "async", "post"),
        remove(t0),
        invoke(t0, d, "post"),
        resume(t0, d, "again"),
        resume(t0, d, "and again"),
      ],
    },
  };
}

describe.each(["branch", "linear"] as const)("a thread id used again after deleteThread (%s lineage), compared with MemorySaver after every step", (lineage) => {
  describe.each(["sync", "async", "exit"] as const)("invokes after the deletion with %s durability", (durability) => {
    it.each(Object.entries(scenarios(durability)))("%s", async (_name, { options, steps }) => {
      const refusals: SaverEvent[] = [];
      const schema = `reuse_${lineage}_${durability}_${Math.random().toString(36).slice(2, 8)}`;
      await migrate({ pool, schema });
      const saver = new PostgresSaver(pool, { schema, lineage, onEvent: (e) => void (e.type === "deletedThreadWrite" && refusals.push(e)) });
      const expected = await play(new MemorySaver(), options, steps);
      const actual = await play(saver, options, steps);
      for (let i = 0; i < steps.length; i++) expect(actual[i], steps[i]!.label).toEqual(expected[i]);
      // Nothing of these conversations was a deleted run's: no write was refused.
      expect(refusals).toEqual([]);
    });
  });
});
