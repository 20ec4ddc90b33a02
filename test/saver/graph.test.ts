/**
 * End to end: real LangGraph graphs (@langchain/langgraph 1.x) compiled against
 * PostgresSaver on a real database. Wherever LangGraph's own MemorySaver can run
 * the same operations, it is the reference: our tables must hold what its
 * dictionaries hold, and our histories must have the same shape.
 */
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, MemorySaver } from "@langchain/langgraph";
import type { BaseCheckpointSaver, Checkpoint, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckpointConflictError, migrate, PostgresSaver } from "../../src/index.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import {
  addressGraph,
  approvalGraph,
  chatGraph,
  counter,
  counters,
  history,
  logGraph,
  mapReduceGraph,
  nestedGraph,
  parallelInterruptGraph,
  plainValues,
  record,
  seenCounters,
  shape,
  tid,
  LONG_VERSION_RE,
  VERSION_RE,
  type PutCall,
  type PutWritesCall,
} from "../helpers/graphs.js";

const db = withTestDatabase("graph");
/** A second pool on the same database: "another process". */
let poolB: pg.Pool;
let saver: PostgresSaver;
let saverB: PostgresSaver;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool);
  poolB = testPool({ connectionString: db.url });
  saverB = new PostgresSaver(poolB);
});
afterAll(async () => {
  await poolB?.end();
});

const cfg = (thread_id: string, extra: Record<string, unknown> = {}): RunnableConfig => ({ configurable: { thread_id, ...extra } });

async function tuples(s: BaseCheckpointSaver, config: RunnableConfig): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of s.list(config)) out.push(t);
  return out;
}

// ---------------------------------------------------------------------------
// Reading our three tables, and the same facts from a recorded MemorySaver run
// ---------------------------------------------------------------------------

interface CheckpointRow {
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint_ns: string;
  checkpoint: Omit<Checkpoint, "channel_values"> & { channel_values?: unknown };
  metadata: Record<string, unknown>;
}

async function checkpointRows(threadId: string, ns = ""): Promise<CheckpointRow[]> {
  const { rows } = await db.pool.query<CheckpointRow>(
    `SELECT checkpoint_id, parent_checkpoint_id, checkpoint_ns, checkpoint, metadata
       FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id`,
    [threadId, ns],
  );
  return rows;
}

interface WriteRow {
  checkpoint_id: string;
  task_id: string;
  idx: number;
  channel: string;
  type: string;
  value: Buffer | null;
  task_path: string;
}

async function writeRows(threadId: string, ns = ""): Promise<WriteRow[]> {
  const { rows } = await db.pool.query<WriteRow>(
    `SELECT checkpoint_id, task_id, idx, channel, type, value, task_path
       FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id, task_path, task_id, idx`,
    [threadId, ns],
  );
  return rows;
}

interface BlobRow {
  channel: string;
  version: string;
  type: string;
  value: Buffer | null;
}

async function blobRows(threadId: string, ns = ""): Promise<BlobRow[]> {
  const { rows } = await db.pool.query<BlobRow>(
    "SELECT channel, version, type, value FROM checkpoint_blobs WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY version, channel",
    [threadId, ns],
  );
  return rows;
}

const decode = (type: string, value: Buffer | null) => saver.serde.loadsTyped(type, value ?? new Uint8Array());
const byJson = (a: unknown, b: unknown) => JSON.stringify(a).localeCompare(JSON.stringify(b));

/** Blobs, saver-independent: `{ channel, counter, value }`, sorted. */
async function blobsOfTables(threadId: string) {
  const rows = await blobRows(threadId);
  const out = await Promise.all(rows.map(async (r) => ({ channel: r.channel, counter: counter(r.version), value: plainValues(await decode(r.type, r.value)) })));
  return out.sort(byJson);
}

/**
 * The blobs dictionary of a reference run: one entry per (channel, version) LangGraph handed to `put`
 * with a value (MemorySaver's `empty` entries, a consumed channel's, have no row here).
 */
function blobsOfPuts(puts: PutCall[]) {
  return puts
    .flatMap((p) =>
      Object.entries(p.newVersions)
        .filter(([channel]) => Object.prototype.hasOwnProperty.call(p.checkpoint.channel_values, channel))
        .map(([channel, v]) => ({ channel, counter: counter(v), value: plainValues(p.checkpoint.channel_values[channel]) })),
    )
    .sort(byJson);
}

/** Writes, saver-independent: keyed by the position of their checkpoint in creation order. */
async function writesOfTables(threadId: string, ids: string[]) {
  const rows = await writeRows(threadId);
  const out = await Promise.all(
    rows.map(async (r) => ({ cp: ids.indexOf(r.checkpoint_id), idx: r.idx, channel: r.channel, path: r.task_path, value: plainValues(await decode(r.type, r.value)) })),
  );
  return out.sort(byJson);
}

function writesOfCalls(calls: PutWritesCall[], ids: string[]) {
  return calls
    .flatMap((c) =>
      c.writes.map(([channel, value], i) => ({
        cp: ids.indexOf(c.config.configurable?.checkpoint_id as string),
        idx: i,
        channel,
        path: c.taskPath ?? "",
        value: plainValues(value),
      })),
    )
    .sort(byJson);
}

// ---------------------------------------------------------------------------
// 0. Versions: every graph step asks the saver for one
// ---------------------------------------------------------------------------

describe("getNextVersion (called by LangGraph on every step)", () => {
  it("starts a thread with short versions; a thread in the article's long format keeps it", () => {
    const first = saver.getNextVersion(undefined);
    expect(first).toMatch(VERSION_RE);
    expect(counter(first)).toBe(1);
    const next = saver.getNextVersion("00000000000000000000000000000002.0.27282425125643517");
    expect(next).toMatch(LONG_VERSION_RE);
    expect(counter(next)).toBe(3);
    // Integer versions (threads adopted from the official saver) stay numeric, see test/ops/adopt.test.ts.
    expect(Math.floor(saver.getNextVersion(7))).toBe(8);
    // Unique per call: two branches reaching the same counter get different versions.
    const many = new Set(Array.from({ length: 2000 }, () => saver.getNextVersion(first)));
    expect(many.size).toBe(2000);
    for (const v of many) expect(counter(v)).toBe(2);
  });
});

// ---------------------------------------------------------------------------
// 1. The article's graph, table by table
// ---------------------------------------------------------------------------

describe("the article's graph: START -> get_address -> END on thread 12345", () => {
  const THREAD = "12345";
  let mem: ReturnType<typeof record<MemorySaver>>;
  let ours: ReturnType<typeof record<PostgresSaver>>;
  let result: unknown;
  let ids: string[]; // our checkpoint ids in creation order
  let memIds: string[];

  beforeAll(async () => {
    mem = record(new MemorySaver());
    ours = record(new PostgresSaver(db.pool));
    await addressGraph(mem.saver).invoke({}, cfg(THREAD));
    result = await addressGraph(ours.saver).invoke({}, cfg(THREAD));
    ids = ours.puts.map((p) => p.checkpoint.id);
    memIds = mem.puts.map((p) => p.checkpoint.id);
  });

  it("returns the article's final state", async () => {
    expect(result).toEqual({ name: "pavaneeshwar", address: "Hyderabad residency" });
    expect((await addressGraph(saver).getState(cfg(THREAD))).values).toEqual({ name: "pavaneeshwar", address: "Hyderabad residency" });
  });

  it("list() yields exactly three checkpoints linked 1 -> 2 -> 3 with sources input/loop/loop and steps -1/0/1", async () => {
    const listed = (await tuples(saver, cfg(THREAD))).reverse(); // oldest first
    expect(listed.map((t) => t.checkpoint.id)).toEqual(ids);
    expect(listed).toHaveLength(3);
    expect(listed.map((t) => t.parentConfig?.configurable?.checkpoint_id)).toEqual([undefined, ids[0], ids[1]]);
    expect(listed.map((t) => [t.metadata?.source, t.metadata?.step])).toEqual([
      ["input", -1],
      ["loop", 0],
      ["loop", 1],
    ]);
    expect(listed.map((t) => t.metadata?.parents)).toEqual([{}, {}, {}]);
    // Same checkpoints as MemorySaver, versions compared by counter.
    const memListed = (await tuples(mem.saver, cfg(THREAD))).reverse();
    expect(listed.map((t) => counters(t.checkpoint.channel_versions))).toEqual(memListed.map((t) => counters(t.checkpoint.channel_versions)));
    expect(listed.map((t) => seenCounters(t.checkpoint.versions_seen))).toEqual(memListed.map((t) => seenCounters(t.checkpoint.versions_seen)));
    expect(listed.map((t) => t.metadata)).toEqual(memListed.map((t) => t.metadata));
    // Checkpoint 3 has no pending writes; 1 and 2 hold the writes that led to their child.
    expect(listed.map((t) => t.pendingWrites?.map(([, ch, v]) => [ch, v]))).toEqual([
      [["branch:to:get_address", null]],
      [
        ["name", "pavaneeshwar"],
        ["address", "Hyderabad residency"],
      ],
      [],
    ]);
  });

  it("checkpoints table: three rows, parent-linked, metadata as in the article, no channel_values inside", async () => {
    const rows = await checkpointRows(THREAD);
    expect(rows.map((r) => r.checkpoint_id)).toEqual(ids);
    expect(rows.map((r) => r.parent_checkpoint_id)).toEqual([null, ids[0], ids[1]]);
    expect(rows.map((r) => r.metadata)).toEqual([
      { source: "input", step: -1, parents: {} },
      { source: "loop", step: 0, parents: {} },
      { source: "loop", step: 1, parents: {} },
    ]);
    // Nor the id: the checkpoint_id column holds it, and a read puts it back.
    for (const r of rows) expect(r.checkpoint).not.toHaveProperty("channel_values");
    for (const r of rows) expect(r.checkpoint).not.toHaveProperty("id");

    // channel_versions / versions_seen: the article's, with our version strings.
    const [c1, c2, c3] = rows.map((r) => r.checkpoint) as [Checkpoint, Checkpoint, Checkpoint];
    expect(counters(c1.channel_versions)).toEqual({ __start__: 1 });
    expect(counters(c2.channel_versions)).toEqual({ __start__: 2, "branch:to:get_address": 2 });
    expect(counters(c3.channel_versions)).toEqual({ __start__: 2, "branch:to:get_address": 3, name: 3, address: 3 });
    expect(seenCounters(c3.versions_seen)).toEqual({ __input__: {}, __start__: { __start__: 1 }, get_address: { "branch:to:get_address": 2 } });
    for (const c of [c1, c2, c3]) for (const v of Object.values(c.channel_versions)) expect(String(v)).toMatch(VERSION_RE);
    // One version string per step, as in the article; unchanged channels keep theirs.
    expect(c2.channel_versions["branch:to:get_address"]).toBe(c2.channel_versions.__start__);
    expect(c3.channel_versions.__start__).toBe(c2.channel_versions.__start__);
    expect(c3.channel_versions.name).toBe(c3.channel_versions.address);
    expect(c3.channel_versions.name).toBe(c3.channel_versions["branch:to:get_address"]);
    expect(c2.versions_seen.__start__).toEqual({ __start__: c1.channel_versions.__start__ });
    expect(c3.versions_seen.get_address).toEqual({ "branch:to:get_address": c2.channel_versions["branch:to:get_address"] });
    // Versions sort like their counters (the saver relies on string order).
    expect(String(c1.channel_versions.__start__) < String(c2.channel_versions.__start__)).toBe(true);
  });

  it("checkpoint_writes: the writes are stored under the EARLIER checkpoint, as MemorySaver stores them", async () => {
    const rows = await writeRows(THREAD);
    expect(rows.map((r) => [ids.indexOf(r.checkpoint_id), r.idx, r.channel, r.task_path])).toEqual([
      [0, 0, "branch:to:get_address", "~__pregel_pull, __start__"],
      [1, 0, "name", "~__pregel_pull, get_address"],
      [1, 1, "address", "~__pregel_pull, get_address"],
    ]);
    // The node's two writes share one task id: the id of the get_address task of checkpoint 2.
    expect(rows[1]!.task_id).toBe(rows[2]!.task_id);
    const state2 = await addressGraph(saver).getState(cfg(THREAD, { checkpoint_id: ids[1] }));
    expect(state2.tasks.map((t) => [t.name, t.id])).toEqual([["get_address", rows[1]!.task_id]]);
    const state1 = await addressGraph(saver).getState(cfg(THREAD, { checkpoint_id: ids[0] }));
    expect(state1.tasks.map((t) => [t.name, t.id])).toEqual([["__start__", rows[0]!.task_id]]);
    // Values: null for the branch trigger, the article's msgpack bytes for the strings.
    expect(await decode(rows[0]!.type, rows[0]!.value)).toBeNull();
    expect(rows[1]!.value).toEqual(Buffer.from("\xacpavaneeshwar", "latin1"));
    expect(rows[2]!.value).toEqual(Buffer.from("\xb3Hyderabad residency", "latin1"));
    // Exactly MemorySaver's writes dictionary.
    expect(await writesOfTables(THREAD, ids)).toEqual(writesOfCalls(mem.writes, memIds));
  });

  it("checkpoint_blobs: one row per (channel, version) LangGraph reported new that holds a value; a consumed channel's has none", async () => {
    const rows = await blobRows(THREAD);
    const v = (i: number, ch: string) => String(ours.puts[i]!.checkpoint.channel_versions[ch]);
    const find = (ch: string, version: string) => rows.find((r) => r.channel === ch && r.version === version);
    expect(rows).toHaveLength(4);
    // Checkpoint 1: the input {} (msgpack 0x80, as in the article).
    expect(find("__start__", v(0, "__start__"))).toMatchObject({ type: "msgpack", value: Buffer.from([0x80]) });
    // Checkpoint 2: __start__ consumed -> no row (MemorySaver's `empty` entry); the branch trigger holds null.
    expect(find("__start__", v(1, "__start__"))).toBeUndefined();
    const branch = find("branch:to:get_address", v(1, "branch:to:get_address"))!;
    expect(branch.type).not.toBe("empty");
    expect(await decode(branch.type, branch.value)).toBeNull();
    // Checkpoint 3: the state values; the branch channel was consumed (no row at version 3).
    expect(find("name", v(2, "name"))).toMatchObject({ type: "msgpack", value: Buffer.from("\xacpavaneeshwar", "latin1") });
    expect(find("address", v(2, "address"))).toMatchObject({ type: "msgpack", value: Buffer.from("\xb3Hyderabad residency", "latin1") });
    expect(find("branch:to:get_address", v(2, "branch:to:get_address"))).toBeUndefined();
    // Exactly the (channel, version, value) set MemorySaver was handed.
    expect(await blobsOfTables(THREAD)).toEqual(blobsOfPuts(mem.puts));
  });

  it("reads back each checkpoint's channel values exactly as LangGraph handed them to put, unversioned ones included", async () => {
    const listed = (await tuples(saver, cfg(THREAD))).reverse();
    expect(listed.map((t) => t.checkpoint.channel_values)).toEqual(ours.puts.map((p) => p.checkpoint.channel_values));
    // LangGraph hands `__pregel_tasks: []` without a version for it: it is stored with the checkpoint row, not as a blob.
    expect(listed.map((t) => t.checkpoint.channel_values)).toEqual([
      { __start__: {}, __pregel_tasks: [] },
      { "branch:to:get_address": null, __pregel_tasks: [] },
      { name: "pavaneeshwar", address: "Hyderabad residency", __pregel_tasks: [] },
    ]);
    // The same values MemorySaver returns for the same run.
    const memListed = (await tuples(mem.saver, cfg(THREAD))).reverse();
    expect(listed.map((t) => t.checkpoint.channel_values)).toEqual(memListed.map((t) => t.checkpoint.channel_values));
  });
});

// ---------------------------------------------------------------------------
// 2. Another process reads the same history
// ---------------------------------------------------------------------------

describe("a second saver on a new pool", () => {
  it("reads the same history and state", async () => {
    const thread = tid("second-pool");
    const graphA = addressGraph(saver);
    await graphA.invoke({}, cfg(thread));
    const graphB = addressGraph(saverB);
    const [histA, histB] = [await history(graphA, cfg(thread)), await history(graphB, cfg(thread))];
    expect(histB).toHaveLength(3);
    expect(histB).toEqual(histA);
    expect(await graphB.getState(cfg(thread))).toEqual(await graphA.getState(cfg(thread)));
    expect((await graphB.getState(cfg(thread))).values).toEqual({ name: "pavaneeshwar", address: "Hyderabad residency" });
    // And the shape is MemorySaver's.
    const mem = new MemorySaver();
    await addressGraph(mem).invoke({}, cfg(thread));
    expect(shape(histB)).toEqual(shape(await history(addressGraph(mem), cfg(thread))));
  });
});

describe("a numeric thread_id: { thread_id: 42 }, as apps pass it to the official saver", () => {
  it("runs, interrupts and resumes as on the official saver (MemorySaver refuses numbers), the thread stored as \"42\"", async () => {
    const config = { configurable: { thread_id: 42 } };
    const pool = testPool({ connectionString: db.url, max: 2 });
    try {
      const official = new OfficialSaver(pool, undefined, { schema: "official_graph" });
      await official.setup();
      for (const cp of [saver, official]) {
        const g = approvalGraph(cp);
        await g.invoke({}, config);
        await g.invoke(new Command({ resume: "yes" }), config);
      }
      const ours = approvalGraph(saver);
      expect((await ours.getState(config)).values).toEqual({ draft: "hello world", approved: "yes", published: true });
      // The number and its decimal string are one thread.
      expect(await ours.getState({ configurable: { thread_id: "42" } })).toEqual(await ours.getState(config));
      expect(shape(await history(ours, config))).toEqual(shape(await history(approvalGraph(official), config)));
      const { rows } = await db.pool.query(
        "SELECT (SELECT array_agg(DISTINCT thread_id) FROM public.checkpoints WHERE thread_id = '42') AS ours, (SELECT array_agg(DISTINCT thread_id) FROM official_graph.checkpoints) AS official",
      );
      expect(rows[0]).toEqual({ ours: ["42"], official: ["42"] });
    } finally {
      await pool.end();
    }
  });
});

// ---------------------------------------------------------------------------
// 3. Interrupts, resumed by another process
// ---------------------------------------------------------------------------

describe("interrupts", () => {
  it("an interrupt raised through saver A is visible and resumable through saver B", async () => {
    const thread = tid("approval");
    const first = (await approvalGraph(saver).invoke({}, cfg(thread))) as Record<string, unknown>;
    const raised = first.__interrupt__ as { id: string; value: unknown }[];
    expect(raised).toHaveLength(1);
    expect(raised[0]!.value).toEqual({ question: "publish?", draft: "hello world" });

    const graphB = approvalGraph(saverB);
    const pending = await graphB.getState(cfg(thread));
    expect(pending.next).toEqual(["approve"]);
    expect(pending.values).toEqual({ draft: "hello world" });
    expect(pending.tasks.map((t) => [t.name, t.interrupts])).toEqual([["approve", [{ id: raised[0]!.id, value: { question: "publish?", draft: "hello world" } }]]]);

    const final = await graphB.invoke(new Command({ resume: "yes" }), cfg(thread));
    expect(final).toEqual({ draft: "hello world", approved: "yes", published: true });
    expect((await approvalGraph(saver).getState(cfg(thread))).next).toEqual([]);

    const mem = new MemorySaver();
    await approvalGraph(mem).invoke({}, cfg(thread));
    await approvalGraph(mem).invoke(new Command({ resume: "yes" }), cfg(thread));
    expect(shape(await history(graphB, cfg(thread)))).toEqual(shape(await history(approvalGraph(mem), cfg(thread))));
  });

  it("a 'no' answer takes effect too (the resume value is really read)", async () => {
    const thread = tid("approval-no");
    await approvalGraph(saver).invoke({}, cfg(thread));
    expect(await approvalGraph(saverB).invoke(new Command({ resume: "no" }), cfg(thread))).toEqual({
      draft: "hello world",
      approved: "no",
      published: false,
    });
  });

  /** Runs the parallel-interrupt graph; `answer` picks the resume map from the pending interrupts. */
  async function parallelRun(a: BaseCheckpointSaver, b: BaseCheckpointSaver, thread: string, rounds: "together" | "one-by-one") {
    await parallelInterruptGraph(a).invoke({}, cfg(thread));
    const graphB = parallelInterruptGraph(b);
    const state = await graphB.getState(cfg(thread));
    const interrupts = state.tasks.flatMap((t) => t.interrupts.map((i) => ({ task: t.name, ...i })));
    let final: unknown;
    if (rounds === "together") {
      final = await graphB.invoke(new Command({ resume: Object.fromEntries(interrupts.map((i) => [i.id, `ans(${String(i.value)})`])) }), cfg(thread));
    } else {
      for (const i of [...interrupts].sort((x, y) => y.task.localeCompare(x.task))) {
        final = await graphB.invoke(new Command({ resume: { [String(i.id)]: `ans(${String(i.value)})` } }), cfg(thread));
      }
    }
    return { state, interrupts, final, graphB };
  }

  it("two interrupts in parallel nodes, resumed together by interrupt id", async () => {
    const thread = tid("parallel");
    const run = await parallelRun(saver, saverB, thread, "together");
    expect(run.interrupts.map((i) => [i.task, i.value]).sort()).toEqual([
      ["ask_a", "question a"],
      ["ask_b", "question b"],
    ]);
    expect(run.final).toEqual({
      answers: ["a:ans(question a)", "b:ans(question b)"],
      joined: "a:ans(question a)|b:ans(question b)",
    });
    const mem = new MemorySaver();
    const ref = await parallelRun(mem, mem, thread, "together");
    expect(run.final).toEqual(ref.final);
    expect(shape(await history(run.graphB, cfg(thread)))).toEqual(shape(await history(ref.graphB, cfg(thread))));
  });

  it("two interrupts resumed one at a time: pending writes come back in (task_path, task_id, idx) order", async () => {
    const thread = tid("parallel-1by1");
    const run = await parallelRun(saver, saverB, thread, "one-by-one");
    expect(run.final).toEqual({
      answers: ["a:ans(question a)", "b:ans(question b)"],
      joined: "a:ans(question a)|b:ans(question b)",
    });
    const mem = new MemorySaver();
    const ref = await parallelRun(mem, mem, thread, "one-by-one");
    expect(shape(await history(run.graphB, cfg(thread)))).toEqual(shape(await history(ref.graphB, cfg(thread))));
    // Pending writes come back in (task_path, task_id, idx) order, the order of the table's key columns.
    // (Resume-map writes use the interrupt id as task id, a hash of the checkpoint id: their relative
    // order legitimately differs between two savers, so MemorySaver is compared as a multiset.)
    for (const t of await tuples(saverB, cfg(thread))) {
      const { rows } = await db.pool.query<{ task_id: string; channel: string }>(
        "SELECT task_id, channel FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = $2 ORDER BY task_path, task_id, idx",
        [thread, t.checkpoint.id],
      );
      expect(t.pendingWrites?.map(([task, ch]) => [task, ch])).toEqual(rows.map((r) => [r.task_id, r.channel]));
    }
    const multiset = async (s: BaseCheckpointSaver) =>
      (await tuples(s, cfg(thread))).map((t) => t.pendingWrites?.map(([, ch, v]) => [ch, plainValues(v)]).sort(byJson));
    expect(await multiset(saverB)).toEqual(await multiset(mem));
    // The interrupted checkpoint accumulated both rounds: two __interrupt__ writes, and per answer one
    // __resume__ under the interrupt id (empty task path) plus one under the task that consumed it.
    const interrupted = (await tuples(saver, cfg(thread))).find((t) => t.pendingWrites?.some(([, ch]) => ch === "__interrupt__"));
    expect(interrupted?.pendingWrites?.filter(([, ch]) => ch === "__interrupt__")).toHaveLength(2);
    expect(interrupted?.pendingWrites?.filter(([, ch]) => ch === "__resume__").map(([, , v]) => v).sort(byJson)).toEqual([
      ["ans(question a)"],
      ["ans(question a)"],
      ["ans(question b)"],
      ["ans(question b)"],
    ]);
  });
});

// ---------------------------------------------------------------------------
// 4. Subgraphs: their own checkpoint namespace
// ---------------------------------------------------------------------------

describe("subgraphs", () => {
  it("an interrupt inside a subgraph: state with subgraphs, rows in a non-empty namespace, resume", async () => {
    const thread = tid("nested");
    const graph = nestedGraph(saver);
    const first = (await graph.invoke({ topic: "pg" }, cfg(thread))) as Record<string, unknown>;
    expect((first.__interrupt__ as { value: unknown }[]).map((i) => i.value)).toEqual(["review the notes"]);

    const state = await nestedGraph(saverB).getState(cfg(thread), { subgraphs: true });
    expect(state.next).toEqual(["sub"]);
    const task = state.tasks[0]!;
    expect(task.name).toBe("sub");
    expect(task.interrupts.map((i) => i.value)).toEqual(["review the notes"]);
    const sub = task.state as { values: Record<string, unknown>; next: string[]; config: RunnableConfig };
    expect(sub.values).toEqual({ topic: "pg", notes: ["prepared pg", "research on pg"] });
    expect(sub.next).toEqual(["child_review"]);
    const subNs = sub.config.configurable?.checkpoint_ns as string;
    expect(subNs).toMatch(/^sub:/);

    // The subgraph's checkpoints, blobs and writes live under its namespace.
    const { rows: nsRows } = await db.pool.query<{ t: string; checkpoint_ns: string }>(
      `SELECT 'c' AS t, checkpoint_ns FROM checkpoints WHERE thread_id = $1
       UNION SELECT 'b', checkpoint_ns FROM checkpoint_blobs WHERE thread_id = $1
       UNION SELECT 'w', checkpoint_ns FROM checkpoint_writes WHERE thread_id = $1 ORDER BY 1, 2`,
      [thread],
    );
    expect(nsRows.map((r) => [r.t, r.checkpoint_ns])).toEqual([
      ["b", ""],
      ["b", subNs],
      ["c", ""],
      ["c", subNs],
      ["w", ""],
      ["w", subNs],
    ]);
    const subCheckpoints = await checkpointRows(thread, subNs);
    expect(subCheckpoints.length).toBeGreaterThanOrEqual(2);
    // The subgraph's checkpoints point to the parent's through metadata.parents.
    const parentIds = new Set((await checkpointRows(thread)).map((r) => r.checkpoint_id));
    for (const r of subCheckpoints) expect(parentIds.has((r.metadata.parents as Record<string, string>)[""]!)).toBe(true);

    const final = await nestedGraph(saverB).invoke(new Command({ resume: "ok" }), cfg(thread));
    expect(final).toMatchObject({ topic: "pg", summary: expect.stringContaining("reviewer said ok") });

    // Same as MemorySaver: final values, parent history shape, subgraph state shape.
    const mem = new MemorySaver();
    await nestedGraph(mem).invoke({ topic: "pg" }, cfg(thread));
    const memState = await nestedGraph(mem).getState(cfg(thread), { subgraphs: true });
    const memSub = memState.tasks[0]!.state as { values: unknown; next: string[] };
    expect([sub.values, sub.next]).toEqual([memSub.values, memSub.next]);
    expect(await nestedGraph(mem).invoke(new Command({ resume: "ok" }), cfg(thread))).toEqual(final);
    expect(shape(await history(graph, cfg(thread)))).toEqual(shape(await history(nestedGraph(mem), cfg(thread))));
    expect(shape(await history(graph, cfg(thread, { checkpoint_ns: subNs })))).toEqual(
      shape(await history(nestedGraph(mem), cfg(thread, { checkpoint_ns: (memState.tasks[0]!.state as { config: RunnableConfig }).config.configurable?.checkpoint_ns }))),
    );
  });
});

// ---------------------------------------------------------------------------
// 5. Messages over several turns
// ---------------------------------------------------------------------------

describe("messages state", () => {
  it("several turns: messages come back as HumanMessage/AIMessage with ids; history as MemorySaver's", async () => {
    const thread = tid("chat");
    const mem = new MemorySaver();
    for (const s of [saver, mem]) {
      for (const w of ["hi", "how are you", "bye"]) {
        await chatGraph(s).invoke({ messages: [new HumanMessage({ id: `h-${w}`, content: w })] }, cfg(thread));
      }
    }
    // Read through the other pool: nothing can come from memory.
    const state = await chatGraph(saverB).getState(cfg(thread));
    const messages = state.values.messages as unknown[];
    expect(messages.map((m) => [m instanceof HumanMessage ? "human" : m instanceof AIMessage ? "ai" : "other", (m as HumanMessage).id, (m as HumanMessage).content])).toEqual([
      ["human", "h-hi", "hi"],
      ["ai", "ai-1", "echo: hi"],
      ["human", "h-how are you", "how are you"],
      ["ai", "ai-3", "echo: how are you"],
      ["human", "h-bye", "bye"],
      ["ai", "ai-5", "echo: bye"],
    ]);
    const ours = await history(chatGraph(saverB), cfg(thread));
    const ref = await history(chatGraph(mem), cfg(thread));
    expect(ours).toHaveLength(ref.length);
    expect(ours).toHaveLength(9);
    expect(shape(ours)).toEqual(shape(ref));
    // Every historical message is a real message instance too.
    for (const s of ours) for (const m of s.values.messages as unknown[]) expect(m instanceof HumanMessage || m instanceof AIMessage).toBe(true);
    // A fourth turn continues from the stored messages.
    const next = await chatGraph(saverB).invoke({ messages: [new HumanMessage({ id: "h-again", content: "again" })] }, cfg(thread));
    expect((next.messages as AIMessage[]).map((m) => m.id)).toEqual(["h-hi", "ai-1", "h-how are you", "ai-3", "h-bye", "ai-5", "h-again", "ai-7"]);
  });
});

// ---------------------------------------------------------------------------
// 6. Map-reduce with Send; failures half way through a step
// ---------------------------------------------------------------------------

describe("map-reduce with Send", () => {
  const items = ["a", "b", "c", "d"];

  it("fans out to N parallel nodes and reduces", async () => {
    const thread = tid("map");
    const calls = new Map<string, number>();
    const final = await mapReduceGraph(saver, calls).invoke({ items }, cfg(thread));
    expect(final).toEqual({ items, results: expect.arrayContaining(["A", "B", "C", "D"]), total: "A,B,C,D" });
    expect(Object.fromEntries(calls)).toEqual({ a: 1, b: 1, c: 1, d: 1 });
    const mem = new MemorySaver();
    await mapReduceGraph(mem, new Map()).invoke({ items }, cfg(thread));
    expect(shape(await history(mapReduceGraph(saverB, new Map()), cfg(thread)))).toEqual(shape(await history(mapReduceGraph(mem, new Map()), cfg(thread))));
  });

  it("a step that fails half way keeps the successful tasks' writes: resume re-runs only the failed task", async () => {
    const thread = tid("map-fail");
    const calls = new Map<string, number>();
    const graph = mapReduceGraph(saver, calls, { failOnce: ["c"] });
    await expect(graph.invoke({ items }, cfg(thread))).rejects.toThrow("transient failure on c");
    expect(Object.fromEntries(calls)).toEqual({ a: 1, b: 1, c: 1, d: 1 });

    // The failing step's successful writes and the error are stored, readable by another process.
    const pending = await mapReduceGraph(saverB, new Map()).getState(cfg(thread));
    // `next` lists node names (deduplicated); the four Send tasks are in `tasks`.
    expect(pending.next).toEqual(["work"]);
    expect(pending.tasks.map((t) => [t.name, t.path?.[0], t.path?.[1]])).toEqual([0, 1, 2, 3].map((i) => ["work", "__pregel_push", i]));
    const tasks = pending.tasks.map((t) => ({ result: t.result, error: (t.error as Error | undefined)?.message }));
    expect(tasks.filter((t) => t.result !== undefined).map((t) => t.result).sort(byJson)).toEqual([{ results: ["A"] }, { results: ["B"] }, { results: ["D"] }]);
    expect(tasks.filter((t) => t.error !== undefined).map((t) => t.error)).toEqual(["transient failure on c"]);
    const { rows } = await db.pool.query<{ channel: string; n: number }>(
      "SELECT channel, count(*)::int AS n FROM checkpoint_writes WHERE thread_id = $1 AND channel IN ('results', '__error__') GROUP BY channel ORDER BY channel",
      [thread],
    );
    expect(rows).toEqual([
      { channel: "__error__", n: 1 },
      { channel: "results", n: 3 },
    ]);

    // Resumed through the other pool, with the same execution counter.
    const final = await mapReduceGraph(saverB, calls, { failOnce: [] }).invoke(null, cfg(thread));
    expect(final).toMatchObject({ total: "A,B,C,D" });
    expect(Object.fromEntries(calls)).toEqual({ a: 1, b: 1, c: 2, d: 1 });

    // Same as MemorySaver.
    const mem = new MemorySaver();
    const memCalls = new Map<string, number>();
    const memGraph = mapReduceGraph(mem, memCalls, { failOnce: ["c"] });
    await expect(memGraph.invoke({ items }, cfg(thread))).rejects.toThrow();
    expect(await memGraph.invoke(null, cfg(thread))).toEqual(final);
    expect(Object.fromEntries(memCalls)).toEqual(Object.fromEntries(calls));
    expect(shape(await history(graph, cfg(thread)))).toEqual(shape(await history(memGraph, cfg(thread))));
  });

  it("a retry policy retries only the failed task within the step", async () => {
    const thread = tid("map-retry");
    const calls = new Map<string, number>();
    const final = await mapReduceGraph(saver, calls, { failOnce: ["b"], retryPolicy: { maxAttempts: 3 } }).invoke({ items }, cfg(thread));
    expect(final).toMatchObject({ total: "A,B,C,D" });
    expect(Object.fromEntries(calls)).toEqual({ a: 1, b: 2, c: 1, d: 1 });
    const mem = new MemorySaver();
    await mapReduceGraph(mem, new Map(), { failOnce: ["b"], retryPolicy: { maxAttempts: 3 } }).invoke({ items }, cfg(thread));
    expect(shape(await history(mapReduceGraph(saver, new Map()), cfg(thread)))).toEqual(shape(await history(mapReduceGraph(mem, new Map()), cfg(thread))));
  });
});

// ---------------------------------------------------------------------------
// 7. Time travel
// ---------------------------------------------------------------------------

/** Three turns, a replay from an older checkpoint, a fork with new input, an updateState on an old checkpoint, one more turn. */
async function timeTravel(s: BaseCheckpointSaver, thread: string) {
  const graph = logGraph(s);
  const results: unknown[] = [];
  for (const word of ["one", "two", "three"]) results.push(await graph.invoke({ word }, cfg(thread)));
  let hist = await history(graph, cfg(thread));
  const after1 = hist.find((x) => x.values.turn === 1 && x.next.length === 0)!;
  const before2 = hist.find((x) => x.values.word === "two" && x.next.includes("record"))!;
  results.push(await graph.invoke(null, before2.config)); // replay
  results.push(await graph.invoke({ word: "alt" }, after1.config)); // fork with new input
  const updated = await graph.updateState(after1.config, { word: "edited", log: ["edited"] });
  results.push((await graph.getState(updated)).values);
  results.push((await graph.getState(cfg(thread))).values);
  results.push(await graph.invoke({ word: "after-edit" }, cfg(thread)));
  hist = await history(graph, cfg(thread));
  return { results, hist, graph };
}

describe("time travel", () => {
  it("replaying, forking and updating old checkpoints gives MemorySaver's history", async () => {
    const thread = tid("travel");
    const ours = await timeTravel(saver, thread);
    const ref = await timeTravel(new MemorySaver(), thread);
    expect(ours.results).toEqual(ref.results);
    expect(ours.results.slice(3)).toEqual([
      { word: "two", log: ["one", "two"], turn: 2 },
      { word: "alt", log: ["one", "alt"], turn: 2 },
      { word: "edited", log: ["one", "edited"], turn: 1 },
      { word: "edited", log: ["one", "edited"], turn: 1 },
      { word: "after-edit", log: ["one", "edited", "after-edit"], turn: 2 },
    ]);
    expect(ours.hist.length).toBe(ref.hist.length);
    expect(shape(ours.hist)).toEqual(shape(ref.hist));
    expect(ours.hist.map((h) => h.metadata?.source)).toContain("update");
    expect(ours.hist.map((h) => h.metadata?.source)).toContain("fork");
    // Every checkpoint's state is the same when read back through the other pool.
    const viaB = await history(logGraph(saverB), cfg(thread));
    expect(viaB).toEqual(ours.hist);
    for (const h of ours.hist.slice(0, 6)) {
      expect((await logGraph(saverB).getState(h.config)).values).toEqual(h.values);
    }
  });
});

// ---------------------------------------------------------------------------
// 8. Forks read their own values
// ---------------------------------------------------------------------------

/** Saver with LangGraph's default integer versions, like the official saver: the control group. */
class IntegerVersionSaver extends PostgresSaver {
  override getNextVersion(current: string | number | undefined): number {
    return (current === undefined ? 0 : Number(current)) + 1;
  }
}

/**
 * Turn 1, then a fork from after turn 1; both branches advance the same number
 * of turns (so they reach the same version counters). Returns both heads' states.
 */
async function forkedBranches(s: BaseCheckpointSaver, thread: string) {
  const graph = logGraph(s);
  await graph.invoke({ word: "one" }, cfg(thread));
  const root = await graph.getState(cfg(thread));
  let main = root.config;
  let fork = root.config;
  for (const n of [2, 3]) {
    await graph.invoke({ word: `main${n}` }, main);
    main = (await history(graph, cfg(thread)))[0]!.config;
    await graph.invoke({ word: `fork${n}` }, fork);
    fork = (await history(graph, cfg(thread)))[0]!.config;
  }
  return { main: await graph.getState(main), fork: await graph.getState(fork), graph };
}

describe("forks", () => {
  const expected = {
    main: { word: "main3", log: ["one", "main2", "main3"], turn: 3 },
    fork: { word: "fork3", log: ["one", "fork2", "fork3"], turn: 3 },
  };

  it("two branches at the same version counters each read their own values", async () => {
    const thread = tid("fork");
    const { main, fork } = await forkedBranches(saver, thread);
    // The premise: both branches reached the same counters for every channel, with distinct version strings.
    const mainCp = (await saver.getTuple(main.config))!.checkpoint;
    const forkCp = (await saver.getTuple(fork.config))!.checkpoint;
    expect(counters(forkCp.channel_versions)).toEqual(counters(mainCp.channel_versions));
    expect(forkCp.channel_versions.word).not.toEqual(mainCp.channel_versions.word);
    expect(main.values).toEqual(expected.main);
    expect(fork.values).toEqual(expected.fork);
    // Read by another process, and like MemorySaver.
    expect((await logGraph(saverB).getState(main.config)).values).toEqual(expected.main);
    expect((await logGraph(saverB).getState(fork.config)).values).toEqual(expected.fork);
    const ref = await forkedBranches(new MemorySaver(), thread);
    expect([ref.main.values, ref.fork.values]).toEqual([expected.main, expected.fork]);
    expect(shape(await history(logGraph(saverB), cfg(thread)))).toEqual(shape(await history(ref.graph, cfg(thread))));
  });

  it("control: with integer versions the same scenario reads the other branch's values (the test can fail)", async () => {
    const thread = tid("fork-int");
    const { main, fork } = await forkedBranches(new IntegerVersionSaver(db.pool), thread);
    expect([main.values, fork.values]).not.toEqual([expected.main, expected.fork]);
  });
});

// ---------------------------------------------------------------------------
// 9. Durability modes
// ---------------------------------------------------------------------------

describe("durability modes", () => {
  for (const durability of ["sync", "exit", "async"] as const) {
    it(`durability "${durability}": final state and history as MemorySaver's`, async () => {
      const thread = tid(`durability-${durability}`);
      const run = async (s: BaseCheckpointSaver) => {
        const out: unknown[] = [];
        out.push(await addressGraph(s).invoke({}, { ...cfg(`${thread}-address`), durability }));
        out.push(await approvalGraph(s).invoke({}, { ...cfg(thread), durability }));
        out.push(await approvalGraph(s).invoke(new Command({ resume: "yes" }), { ...cfg(thread), durability }));
        return {
          out: plainValues(out),
          address: await history(addressGraph(s), cfg(`${thread}-address`)),
          approval: await history(approvalGraph(s), cfg(thread)),
        };
      };
      const ours = await run(saver);
      const ref = await run(new MemorySaver());
      expect(ours.out).toEqual(ref.out);
      expect((ours.out as unknown[])[2]).toEqual({ draft: "hello world", approved: "yes", published: true });
      expect(ours.address.length).toBe(ref.address.length);
      expect(ours.approval.length).toBe(ref.approval.length);
      expect(shape(ours.address)).toEqual(shape(ref.address));
      expect(shape(ours.approval)).toEqual(shape(ref.approval));
      if (durability === "exit") expect(ours.address.length).toBeLessThan(3);
      else expect(ours.address.length).toBe(3);
    });
  }
});

// ---------------------------------------------------------------------------
// Linear lineage mode: ordinary graph usage never forks, so never conflicts
// ---------------------------------------------------------------------------

describe("linear lineage mode with ordinary graphs", () => {
  let linear: PostgresSaver;
  let linearB: PostgresSaver;
  beforeAll(() => {
    linear = new PostgresSaver(db.pool, { lineage: "linear" });
    linearB = new PostgresSaver(poolB, { lineage: "linear" });
  });

  it("interrupts (single and parallel), subgraphs, a failed step, messages and every durability give MemorySaver's results", async () => {
    const thread = tid("linear-all");
    const run = async (a: BaseCheckpointSaver, b: BaseCheckpointSaver) => {
      const out: unknown[] = [];
      for (const durability of ["async", "sync", "exit"] as const) {
        const t = `${thread}-${durability}`;
        const opts = (x: string) => ({ ...cfg(x), durability });
        out.push(await approvalGraph(a).invoke({}, opts(`${t}-approval`)));
        out.push(await approvalGraph(b).invoke(new Command({ resume: "yes" }), opts(`${t}-approval`)));
        const pr = await parallelInterruptGraph(a).invoke({}, opts(`${t}-parallel`));
        const ids = ((pr as Record<string, unknown>).__interrupt__ as { id: string; value: string }[]).map((i) => [i.id, `ans(${i.value})`]);
        for (const [id, answer] of ids) out.push(await parallelInterruptGraph(b).invoke(new Command({ resume: { [id!]: answer } }), opts(`${t}-parallel`)));
        out.push(await nestedGraph(a).invoke({ topic: "x" }, opts(`${t}-nested`)));
        out.push(await nestedGraph(b).invoke(new Command({ resume: "fine" }), opts(`${t}-nested`)));
        const calls = new Map<string, number>();
        out.push(await mapReduceGraph(a, calls, { failOnce: ["b"] }).invoke({ items: ["a", "b", "c"] }, opts(`${t}-map`)).catch((e: Error) => e.message));
        out.push(await mapReduceGraph(b, calls).invoke(null, opts(`${t}-map`)));
        out.push(Object.fromEntries(calls));
        for (const w of ["hi", "bye"]) out.push(await chatGraph(a).invoke({ messages: [new HumanMessage({ id: `h-${w}`, content: w })] }, opts(`${t}-chat`)));
        for (const w of ["one", "two", "three"]) out.push(await logGraph(b).invoke({ word: w }, opts(`${t}-log`)));
      }
      return plainValues(out);
    };
    const mem = new MemorySaver();
    const ref = await run(mem, mem);
    expect(await run(linear, linearB)).toEqual(ref);
    // Every lineage has its head (one by the primary key), naming one of its checkpoints, whatever happened.
    const { rows } = await db.pool.query(
      `SELECT DISTINCT c.thread_id, c.checkpoint_ns FROM checkpoints c WHERE c.thread_id LIKE $1
          AND NOT EXISTS (SELECT 1 FROM checkpoint_heads h JOIN checkpoints x USING (thread_id, checkpoint_ns, checkpoint_id)
                           WHERE h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns)`,
      [`${thread}-%`],
    );
    expect(rows).toEqual([]);
  });
});

// ---------------------------------------------------------------------------
// What LangGraph hands the saver
// ---------------------------------------------------------------------------

describe("configurable keys passed to invoke", () => {
  it("reach put and putWrites (so `allow_fork: true` on invoke reaches the saver)", async () => {
    const thread = tid("configurable");
    const rec = record(new PostgresSaver(db.pool));
    await addressGraph(rec.saver).invoke({}, cfg(thread, { allow_fork: true, tenant: "acme" }));
    expect(rec.puts).toHaveLength(3);
    for (const p of rec.puts) expect(p.config.configurable).toMatchObject({ thread_id: thread, checkpoint_ns: "", allow_fork: true, tenant: "acme" });
    expect(rec.puts.map((p) => p.config.configurable?.checkpoint_id)).toEqual([undefined, rec.puts[0]!.checkpoint.id, rec.puts[1]!.checkpoint.id]);
    expect(rec.writes.length).toBeGreaterThan(0);
    for (const w of rec.writes) expect(w.config.configurable).toMatchObject({ allow_fork: true, tenant: "acme" });
    // Nothing of it is stored as metadata by LangGraph 1.x at the top level.
    expect((await checkpointRows(thread)).map((r) => r.metadata)).toEqual([
      { source: "input", step: -1, parents: {} },
      { source: "loop", step: 0, parents: {} },
      { source: "loop", step: 1, parents: {} },
    ]);

    // updateState from an old checkpoint: its put carries the flag too, but no checkpoint_ns.
    const old = rec.puts[1]!.checkpoint.id;
    const before = rec.puts.length;
    await addressGraph(rec.saver).updateState(cfg(thread, { checkpoint_id: old, allow_fork: true }), { name: "edited" });
    const upd = rec.puts.slice(before);
    expect(upd).toHaveLength(1);
    expect(upd[0]!.config.configurable).toMatchObject({ thread_id: thread, checkpoint_id: old, allow_fork: true });
    expect(upd[0]!.metadata.source).toBe("update");
  });

  it("in linear lineage mode, time travel needs allow_fork on the invocation", async () => {
    const thread = tid("linear");
    const linear = new PostgresSaver(db.pool, { lineage: "linear" });
    const graph = logGraph(linear);
    await graph.invoke({ word: "one" }, cfg(thread));
    await graph.invoke({ word: "two" }, cfg(thread));
    const after1 = (await history(graph, cfg(thread))).find((h) => h.values.turn === 1 && h.next.length === 0)!;
    const id = after1.config.configurable?.checkpoint_id as string;
    await expect(graph.invoke({ word: "alt" }, cfg(thread, { checkpoint_id: id }))).rejects.toBeInstanceOf(CheckpointConflictError);
    expect(await graph.invoke({ word: "alt" }, cfg(thread, { checkpoint_id: id, allow_fork: true }))).toEqual({ word: "alt", log: ["one", "alt"], turn: 2 });
    expect((await graph.getState(cfg(thread))).values).toEqual({ word: "alt", log: ["one", "alt"], turn: 2 });
  });
});
