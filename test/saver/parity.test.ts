/**
 * Values come back exactly as MemorySaver gives them (issue 33): the same
 * graph, with the same inputs, on MemorySaver and on PostgresSaver (whole
 * values and `elementStorage: true`), compared checkpoint by checkpoint,
 * everything `list()` returns: channel values (which channels a checkpoint
 * holds, too), versions, metadata, pending writes; and `getState().values`.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, Command, END, MemorySaver, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, show } from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";
import { counters, plainValues, tid } from "../helpers/graphs.js";

const db = withTestDatabase("parity");
beforeAll(async () => {
  await migrate({ pool: db.pool });
});

const savers: [string, () => BaseCheckpointSaver][] = [
  ["whole values", () => new PostgresSaver(db.pool)],
  ["elementStorage: true", () => new PostgresSaver(db.pool, { elementStorage: true })],
];

/**
 * What `list()` gives for a thread, and `getTuple()` for each checkpoint it
 * lists, without what differs by saver (ids, version strings, task ids).
 */
async function listed(saver: BaseCheckpointSaver, threadId: string) {
  const out: CheckpointTuple[] = [];
  for await (const t of saver.list({ configurable: { thread_id: threadId } })) out.push(t);
  return Promise.all(
    out.map(async (t) => {
      const { parents, ...metadata } = (t.metadata ?? {}) as Record<string, unknown>;
      const values = t.checkpoint.channel_values;
      const tuple = await saver.getTuple(t.config);
      return {
        ns: String(t.config.configurable?.checkpoint_ns ?? ""),
        metadata: { ...metadata, parents: Object.keys((parents ?? {}) as object) } as Record<string, unknown>,
        channels: Object.keys(values).sort(),
        values: plainValues(values),
        versions: counters(t.checkpoint.channel_versions),
        writes: (t.pendingWrites ?? []).map(([, channel, value]) => [channel, plainValues(value)]).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
        getTuple: { channels: Object.keys(tuple!.checkpoint.channel_values).sort(), values: plainValues(tuple!.checkpoint.channel_values) },
      };
    }),
  );
}

type Graph = { invoke(input: unknown, config: RunnableConfig): Promise<unknown>; getState(config: RunnableConfig): Promise<{ values: unknown }> };

/** Runs `inputs` one invoke after another on `graph(saver)`; what list() and getState() give after each. */
async function run(saver: BaseCheckpointSaver, graph: (s: BaseCheckpointSaver) => Graph, inputs: unknown[]) {
  const config = { configurable: { thread_id: tid("parity") } };
  const g = graph(saver);
  const states: unknown[] = [];
  for (const input of inputs) {
    await g.invoke(input, config);
    states.push((await g.getState(config)).values);
  }
  return { states, list: await listed(saver, config.configurable.thread_id) };
}

// ---------------------------------------------------------------------------
// A channel written as `undefined`
// ---------------------------------------------------------------------------

const NoteState = Annotation.Root({
  turn: Annotation<number>(),
  note: Annotation<string | undefined>(),
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/**
 * write -> check -> END. On turn 1 `write` sets `note` to undefined (and
 * `check` runs in the same invoke, when the channel still holds it); on turn
 * 2 it asks (an interrupt: the resume reloads the channels); on turn 3 `note`
 * gets a value, on turn 4 undefined again.
 */
function noteGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(NoteState)
    .addNode("write", (s) => {
      if (s.turn === 1) return { note: undefined, log: ["write"] };
      if (s.turn === 2) return { log: [`asked: ${interrupt<string, string>("why?")}`] };
      if (s.turn === 3) return { note: "set", log: ["write"] };
      if (s.turn === 4) return { note: undefined };
      return { log: ["write"] };
    })
    .addNode("check", (s) => ({ log: [`note is ${s.note === undefined ? "undefined" : s.note}`] }))
    .addEdge(START, "write")
    .addEdge("write", "check")
    .addEdge("check", END)
    .compile({ checkpointer });
}

const noteInputs = [{ turn: 1 }, { turn: 2 }, new Command({ resume: "because" }), { turn: 3 }, { turn: 4 }, { turn: 5 }];

describe("a channel written as undefined", () => {
  it("MemorySaver holds it in the checkpoints of that run only (what the comparison below relies on)", async () => {
    const { list } = await run(new MemorySaver(), noteGraph, noteInputs);
    const holding = list.filter((c) => c.channels.includes("note")).map((c) => c.metadata.step);
    // Newest first. Turn 1: written (step 1), carried by `check` (2); turn 2 reloads it as empty (3-6).
    // Turn 3: "set" (9-10), reloaded by turn 4's input (11); written undefined (13) and carried (14).
    // Turn 5 reloads it as empty again (15-18).
    expect(holding).toEqual([14, 13, 12, 11, 10, 9, 2, 1]);
    // The versions name it in every checkpoint after its first write all the same.
    expect(list.filter((c) => "note" in c.versions).map((c) => c.metadata.step)).toEqual([18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
  });

  for (const [label, make] of savers) {
    it(`${label}: every checkpoint list() and getTuple() return, and every state, equal MemorySaver's`, async () => {
      const [ours, reference] = await Promise.all([run(make(), noteGraph, noteInputs), run(new MemorySaver(), noteGraph, noteInputs)]);
      expect(ours.list.length).toBe(reference.list.length);
      // One checkpoint at a time first, for a readable failure.
      ours.list.forEach((c, i) => expect({ step: c.metadata.step, channels: c.channels }).toStrictEqual({ step: reference.list[i]!.metadata.step, channels: reference.list[i]!.channels }));
      expect(ours.list).toStrictEqual(reference.list);
      expect(ours.states).toStrictEqual(reference.states);
    });
  }

  it("`show` lists it among the channel values of its version, not among those without a version", async () => {
    const saver = new PostgresSaver(db.pool);
    const config = { configurable: { thread_id: tid("note-show") } };
    await noteGraph(saver).invoke({ turn: 1 }, config);
    const cp = (await show({ pool: db.pool, threadId: config.configurable.thread_id }))!;
    expect(cp.channels.find((c) => c.channel === "note")).toMatchObject({ type: "msgpack", value: undefined });
    expect(cp.unversioned.map((u) => u.channel)).toEqual(["__pregel_tasks"]);
  });
});

// ---------------------------------------------------------------------------
// A string that starts with U+FEFF
// ---------------------------------------------------------------------------

const TextState = Annotation.Root({
  text: Annotation<string>(),
  seen: Annotation<Record<string, string>>(),
  texts: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** One node that keeps the text (as a list element and as an object key, too). */
function textGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(TextState)
    .addNode("echo", (s) => ({ seen: { [s.text]: s.text }, texts: [s.text, `${s.text}!`] }))
    .addEdge(START, "echo")
    .addEdge("echo", END)
    .compile({ checkpointer });
}

const bomText = "\ufeff" + "x".repeat(250);
const textInputs = [{ text: bomText }, { text: "\ufeff\ufeff" + "é".repeat(150) }, { text: "\ufeff" }];

describe("a string that starts with U+FEFF", () => {
  for (const [label, make] of savers) {
    it(`${label}: keeps it through a graph, as MemorySaver does`, async () => {
      const [ours, reference] = await Promise.all([run(make(), textGraph, textInputs), run(new MemorySaver(), textGraph, textInputs)]);
      // The reproduction: 251 characters in, 251 out.
      const first = ours.states[0] as { text: string };
      expect(first.text.length).toBe(251);
      expect(first.text).toBe(bomText);
      expect(ours.states).toStrictEqual(reference.states);
      expect(ours.list).toStrictEqual(reference.list);
    });
  }
});
