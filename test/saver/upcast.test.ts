/**
 * State-schema evolution with real graphs: threads written by a v1 graph are
 * read, resumed and continued by a v2 (and v3) graph through upcasters.
 */
import { Annotation, Command, END, interrupt, START, StateGraph } from "@langchain/langgraph";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, StateVersionError, type Upcaster } from "../../src/index.js";
import { runCli } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("upcast");
beforeAll(async () => {
  await migrate({ pool: db.pool });
});

const V1 = Annotation.Root({ name: Annotation<string>, address: Annotation<string> });
function v1Graph(checkpointer: PostgresSaver) {
  return new StateGraph(V1)
    .addNode("get_name", () => ({ name: "Ada Lovelace" }))
    .addNode("get_address", (s) => ({ address: interrupt(`address for ${s.name}?`) as string }))
    .addEdge(START, "get_name")
    .addEdge("get_name", "get_address")
    .addEdge("get_address", END)
    .compile({ checkpointer });
}

const V2 = Annotation.Root({
  firstName: Annotation<string>,
  lastName: Annotation<string>,
  address: Annotation<string>,
  tags: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
function v2Graph(checkpointer: PostgresSaver) {
  return new StateGraph(V2)
    .addNode("get_name", () => ({ firstName: "Grace", lastName: "Hopper" }))
    .addNode("get_address", (s) => ({ address: interrupt(`address for ${s.firstName}?`) as string, tags: ["v2"] }))
    .addEdge(START, "get_name")
    .addEdge("get_name", "get_address")
    .addEdge("get_address", END)
    .compile({ checkpointer });
}

/** v1 -> v2: split the name, default the tags. */
const v1ToV2: Upcaster = ({ name, ...rest }) => {
  const [firstName, ...last] = String(name ?? "").split(" ");
  return name === undefined ? { ...rest, tags: [] } : { ...rest, firstName, lastName: last.join(" "), tags: [] };
};

const threads = { done: uuid6(-3), waiting: uuid6(-3) };

async function writeV1Threads() {
  const v1 = v1Graph(new PostgresSaver(db.pool));
  await v1.invoke({}, { configurable: { thread_id: threads.done } });
  await v1.invoke(new Command({ resume: "12 Main St" }), { configurable: { thread_id: threads.done } });
  await v1.invoke({}, { configurable: { thread_id: threads.waiting } }); // left at the interrupt
}

describe("upcasting v1 threads for a v2 graph", () => {
  beforeAll(writeV1Threads);

  it("reads every old thread in the new shape, without touching the rows", async () => {
    const saver = new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 1: v1ToV2 } });
    const v2 = v2Graph(saver);
    const state = await v2.getState({ configurable: { thread_id: threads.done } });
    expect(state.values).toEqual({ firstName: "Ada", lastName: "Lovelace", address: "12 Main St", tags: [] });
    const { rows } = await db.pool.query("SELECT DISTINCT state_version FROM checkpoints WHERE thread_id = $1", [threads.done]);
    expect(rows).toEqual([{ state_version: null }]);
  });

  it("resumes the interrupted v1 thread with the v2 graph, then new runs append", async () => {
    const saver = new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 1: v1ToV2 } });
    const v2 = v2Graph(saver);
    const config = { configurable: { thread_id: threads.waiting } };
    const pending = await v2.getState(config);
    expect(pending.next).toEqual(["get_address"]);
    expect(pending.tasks[0]?.interrupts[0]?.value).toBe("address for Ada Lovelace?"); // written by v1, kept as is
    const resumed = await v2.invoke(new Command({ resume: "1 Navy Way" }), config);
    expect(resumed).toEqual({ firstName: "Ada", lastName: "Lovelace", address: "1 Navy Way", tags: ["v2"] });
    // The new checkpoints are written at version 2, with the upcast values stored for real.
    const plain = new PostgresSaver(db.pool, { stateVersion: 2 });
    expect((await v2Graph(plain).getState(config)).values).toEqual(resumed);
    // History still lists the v1 checkpoints, upcast, in order.
    const history = [];
    for await (const s of v2.getStateHistory(config)) history.push(s);
    expect(history).toHaveLength(4); // three written by v1 (input, start, get_name), one by v2 (get_address)
    expect(history[history.length - 1]!.values).toEqual({ tags: [] });
    expect(history.some((s) => s.values.firstName === "Ada" && s.values.address === undefined)).toBe(true);
  });

  it("fails loudly on a missing upcaster and on a checkpoint newer than the code", async () => {
    const missing = v2Graph(new PostgresSaver(db.pool, { stateVersion: 2 }));
    const err = await missing.getState({ configurable: { thread_id: threads.done } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StateVersionError);
    expect(err).toMatchObject({ code: "UPCASTER_MISSING", threadId: threads.done, storedVersion: 1, stateVersion: 2, missingUpcaster: 1 });
    // A thread continued at v2, read by v1 code (a rolled-back deploy).
    const rolledBack = v1Graph(new PostgresSaver(db.pool, { stateVersion: 1 }));
    const tooNew = await rolledBack.getState({ configurable: { thread_id: threads.waiting } }).catch((e: unknown) => e);
    expect(tooNew).toMatchObject({ code: "STATE_VERSION_TOO_NEW", storedVersion: 2, stateVersion: 1 });
  });

  it("time travel to a v1 checkpoint upcasts it and does not change history", async () => {
    const saver = new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 1: v1ToV2 } });
    const v2 = v2Graph(saver);
    const config = { configurable: { thread_id: threads.done } };
    const before = [];
    for await (const s of v2.getStateHistory(config)) before.push(s);
    const old = before.find((s) => s.values.firstName === "Ada" && s.values.address === undefined)!;
    expect((await v2.getState(old.config)).values).toEqual({ firstName: "Ada", lastName: "Lovelace", tags: [] });
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [threads.done]);
    expect(rows[0].n).toBe(before.length);
  });
});

describe("renamed channels and pending writes", () => {
  const Par = Annotation.Root({ name: Annotation<string>, answer: Annotation<string> });
  const ParV2 = Annotation.Root({ fullName: Annotation<string>, answer: Annotation<string> });
  const build = <S extends typeof Par | typeof ParV2>(state: S, nameKey: "name" | "fullName", saver: PostgresSaver) =>
    new StateGraph(state as typeof Par)
      .addNode("fast", () => ({ [nameKey]: "Ada" }) as never)
      .addNode("ask", () => ({ answer: interrupt("answer?") as string }))
      .addEdge(START, "fast")
      .addEdge(START, "ask")
      .addEdge("fast", END)
      .addEdge("ask", END)
      .compile({ checkpointer: saver });

  it("a pending write stored under the old channel name is applied to the new one on resume", async () => {
    const config = { configurable: { thread_id: uuid6(-3) } };
    await build(Par, "name", new PostgresSaver(db.pool)).invoke({}, config);
    const { rows } = await db.pool.query("SELECT channel FROM checkpoint_writes WHERE thread_id = $1 AND channel = 'name'", [
      config.configurable.thread_id,
    ]);
    expect(rows).toHaveLength(1); // "fast" finished before "ask" interrupted: its write is pending
    const saver = new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 1: { rename: { name: "fullName" } } } });
    const result = await build(ParV2, "fullName", saver).invoke(new Command({ resume: "42" }), config);
    expect(result).toEqual({ fullName: "Ada", answer: "42" });
  });
});

describe("upgradeState and a two-step chain", () => {
  const V3 = Annotation.Root({
    firstName: Annotation<string>,
    lastName: Annotation<string>,
    address: Annotation<string>,
    labels: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  });
  const upcasters = { 1: v1ToV2, 2: { rename: { tags: "labels" } } };

  it("reads v1 threads through v1 -> v2 -> v3, and after upgradeState without any upcaster", async () => {
    const thread = uuid6(-3);
    const v1 = v1Graph(new PostgresSaver(db.pool));
    await v1.invoke({}, { configurable: { thread_id: thread } });
    await v1.invoke(new Command({ resume: "Paris" }), { configurable: { thread_id: thread } });
    const v3Graph = (saver: PostgresSaver) => new StateGraph(V3).addNode("noop", () => ({})).addEdge(START, "noop").compile({ checkpointer: saver });
    const config = { configurable: { thread_id: thread } };
    const expected = { firstName: "Ada", lastName: "Lovelace", address: "Paris", labels: [] };
    const upcasting = new PostgresSaver(db.pool, { stateVersion: 3, upcasters });
    expect((await v3Graph(upcasting).getState(config)).values).toEqual(expected);

    const progress: number[] = [];
    const { rewritten } = await upcasting.upgradeState({ batchSize: 3, onProgress: (p) => progress.push(p.rewritten) });
    expect(rewritten).toBeGreaterThanOrEqual(4);
    expect(progress.length).toBeGreaterThan(1);
    const { rows } = await db.pool.query("SELECT DISTINCT state_version FROM checkpoints WHERE thread_id = $1", [thread]);
    expect(rows).toEqual([{ state_version: 3 }]);

    const upgraded = new PostgresSaver(db.pool, { stateVersion: 3 }); // no upcasters needed any more
    expect((await v3Graph(upgraded).getState(config)).values).toEqual(expected);
    let n = 0;
    for await (const _ of v3Graph(upgraded).getStateHistory(config)) n++;
    const all = await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [thread]);
    expect(n).toBe(all.rows[0].n); // every checkpoint still listed, none added or removed
    // Nothing left to do.
    expect((await upcasting.upgradeState()).rewritten).toBe(0);
  });

  it("values without a version are upcast on read, and upgradeState stores them again in the new shape", async () => {
    const thread = uuid6(-3);
    const config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
    // Written at version 1: `legacy` and `__pregel_tasks` have no version (kept with the row), `kept` has one.
    const v = `${"1".padStart(32, "0")}.5`;
    const cp = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { legacy: "x", __pregel_tasks: [], kept: 1 }, channel_versions: { kept: v }, versions_seen: {} };
    await new PostgresSaver(db.pool).put(config, cp, { source: "input", step: -1, parents: {} }, { kept: v });
    const rename: Upcaster = ({ legacy, ...rest }) => ({ ...rest, modern: legacy });
    const upcasting = new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 1: rename } });
    expect((await upcasting.getTuple(config))?.checkpoint.channel_values).toEqual({ modern: "x", __pregel_tasks: [], kept: 1 });
    expect((await upcasting.upgradeState()).rewritten).toBe(1);
    // Without upcasters, the rewritten row reads in the new shape: `legacy` is gone from what the row keeps.
    const upgraded = new PostgresSaver(db.pool, { stateVersion: 2 });
    expect((await upgraded.getTuple(config))?.checkpoint.channel_values).toEqual({ modern: "x", __pregel_tasks: [], kept: 1 });
  });

  it("rejects bad options before any SQL", () => {
    expect(() => new PostgresSaver(db.pool, { stateVersion: 0 })).toThrow(/stateVersion/);
    expect(() => new PostgresSaver(db.pool, { upcasters: { 1: v1ToV2 } })).toThrow(/needs stateVersion/);
    expect(() => new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 2: v1ToV2 } })).toThrow(/upcasters\[2\]/);
    expect(() => new PostgresSaver(db.pool, { stateVersion: 2, upcasters: { 1: 42 as never } })).toThrow(/upcasters\[1\]/);
  });
});

describe("the upgrade-state command", () => {
  it("rewrites old checkpoints with the upcasters of a module, and refuses bad usage", async () => {
    const thread = uuid6(-3);
    const v1 = v1Graph(new PostgresSaver(db.pool));
    await v1.invoke({}, { configurable: { thread_id: thread } });
    const dir = mkdtempSync(join(process.cwd(), "test", ".upcasters-"));
    try {
      const module = join(dir, "upcasters.mjs");
      writeFileSync(
        module,
        `export const stateVersion = 2;\n` +
          `export const upcasters = { 1: ({ name, ...rest }) => ({ ...rest, firstName: String(name).split(" ")[0], lastName: "", tags: [] }) };\n`,
      );
      const usage = await runCli(["upgrade-state", "--database-url", db.url]);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toMatch(/--module/);
      const run = await runCli(["upgrade-state", "--module", module, "--database-url", db.url, "--json"]);
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ stateVersion: 2 });
      expect(JSON.parse(run.stdout).rewritten).toBeGreaterThanOrEqual(3);
      const { rows } = await db.pool.query("SELECT DISTINCT state_version FROM checkpoints WHERE thread_id = $1", [thread]);
      expect(rows).toEqual([{ state_version: 2 }]);
      const state = await v2Graph(new PostgresSaver(db.pool, { stateVersion: 2 })).getState({ configurable: { thread_id: thread } });
      expect(state.values).toMatchObject({ firstName: "Ada", tags: [] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("subgraphs", () => {
  // Each namespace has its own state: the upcaster tells them apart by ctx.checkpointNs.
  const Parent = Annotation.Root({ topic: Annotation<string>, summary: Annotation<string> });
  const InnerV1 = Annotation.Root({ topic: Annotation<string>, summary: Annotation<string>, name: Annotation<string> });
  const InnerV2 = Annotation.Root({ topic: Annotation<string>, summary: Annotation<string>, fullName: Annotation<string> });
  const parentWith = (inner: unknown, saver: PostgresSaver) =>
    new StateGraph(Parent).addNode("inner", inner as never).addEdge(START, "inner").addEdge("inner", END).compile({ checkpointer: saver });
  const innerV1 = new StateGraph(InnerV1)
    .addNode("who", () => ({ name: "Ada Lovelace" }))
    .addNode("ask", (s) => ({ summary: `${s.name}: ${interrupt("go?") as string}` }))
    .addEdge(START, "who")
    .addEdge("who", "ask")
    .compile();
  const innerV2 = new StateGraph(InnerV2)
    .addNode("who", () => ({ fullName: "Grace Hopper" }))
    .addNode("ask", (s) => ({ summary: `${s.fullName}: ${interrupt("go?") as string}` }))
    .addEdge(START, "who")
    .addEdge("who", "ask")
    .compile();

  it("upcasts the subgraph's own checkpoints, and the interrupted subgraph resumes in the new shape", async () => {
    const config = { configurable: { thread_id: uuid6(-3) } };
    await parentWith(innerV1, new PostgresSaver(db.pool)).invoke({ topic: "computing" }, config);
    const seen: string[] = [];
    const saver = new PostgresSaver(db.pool, {
      stateVersion: 2,
      upcasters: {
        1: (values, ctx) => {
          seen.push(ctx.checkpointNs.split(":")[0]!);
          if (!ctx.checkpointNs.startsWith("inner")) return values;
          const { name, ...rest } = values;
          return name === undefined ? rest : { ...rest, fullName: name };
        },
      },
    });
    const v2 = parentWith(innerV2, saver);
    const state = await v2.getState(config, { subgraphs: true });
    const inner = state.tasks[0]?.state as { values: Record<string, unknown> } | undefined;
    expect(inner?.values).toMatchObject({ topic: "computing", fullName: "Ada Lovelace" });
    const result = await v2.invoke(new Command({ resume: "yes" }), config);
    expect(result).toEqual({ topic: "computing", summary: "Ada Lovelace: yes" });
    expect(seen).toContain("inner");
    expect(seen).toContain("");
  });
});
