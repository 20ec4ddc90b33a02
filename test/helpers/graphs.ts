/**
 * Small LangGraph graphs and comparison helpers for the end-to-end tests
 * (test/saver/graph.test.ts). Every builder takes the checkpointer so the same graph
 * can run against MemorySaver (the reference) and PostgresSaver.
 */
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  Annotation,
  Command,
  END,
  MessagesAnnotation,
  Send,
  START,
  StateGraph,
  interrupt,
  type StateSnapshot,
} from "@langchain/langgraph";
import type { BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata, PendingWrite } from "@langchain/langgraph-checkpoint";

type Saver = BaseCheckpointSaver;

// ---------------------------------------------------------------------------
// Graphs
// ---------------------------------------------------------------------------

/** The article's graph: START -> get_address -> END; the node sets both fields with a Command. */
export const AddressState = Annotation.Root({
  name: Annotation<string>(),
  address: Annotation<string>(),
});

export function addressGraph(checkpointer: Saver) {
  return new StateGraph(AddressState)
    .addNode("get_address", () => new Command({ update: { name: "pavaneeshwar", address: "Hyderabad residency" } }), { ends: [END] })
    .addEdge(START, "get_address")
    .addEdge("get_address", END)
    .compile({ checkpointer });
}

/** draft -> approve (interrupt asking for approval) -> publish. */
export const ApprovalState = Annotation.Root({
  draft: Annotation<string>(),
  approved: Annotation<string>(),
  published: Annotation<boolean>(),
});

export function approvalGraph(checkpointer: Saver) {
  return new StateGraph(ApprovalState)
    .addNode("write", () => ({ draft: "hello world" }))
    .addNode("approve", (s) => ({ approved: interrupt<{ question: string; draft: string }, string>({ question: "publish?", draft: s.draft }) }))
    .addNode("publish", (s) => ({ published: s.approved === "yes" }))
    .addEdge(START, "write")
    .addEdge("write", "approve")
    .addEdge("approve", "publish")
    .addEdge("publish", END)
    .compile({ checkpointer });
}

/** Two parallel nodes that each interrupt, then a join. */
export const ParallelState = Annotation.Root({
  answers: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  joined: Annotation<string>(),
});

export function parallelInterruptGraph(checkpointer: Saver) {
  return new StateGraph(ParallelState)
    .addNode("ask_a", () => ({ answers: [`a:${interrupt<string, string>("question a")}`] }))
    .addNode("ask_b", () => ({ answers: [`b:${interrupt<string, string>("question b")}`] }))
    .addNode("join", (s) => ({ joined: [...s.answers].sort().join("|") }))
    .addEdge(START, "ask_a")
    .addEdge(START, "ask_b")
    .addEdge(["ask_a", "ask_b"], "join")
    .addEdge("join", END)
    .compile({ checkpointer });
}

/** Parent: prepare -> sub (a compiled subgraph that interrupts) -> finish. */
export const NestedState = Annotation.Root({
  topic: Annotation<string>(),
  notes: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  summary: Annotation<string>(),
});

export function nestedGraph(checkpointer: Saver) {
  const child = new StateGraph(NestedState)
    .addNode("child_research", (s) => ({ notes: [`research on ${s.topic}`] }))
    .addNode("child_review", () => ({ notes: [`reviewer said ${interrupt<string, string>("review the notes")}`] }))
    .addEdge(START, "child_research")
    .addEdge("child_research", "child_review")
    .addEdge("child_review", END)
    .compile();
  return new StateGraph(NestedState)
    .addNode("prepare", (s) => ({ notes: [`prepared ${s.topic}`] }))
    .addNode("sub", child)
    .addNode("finish", (s) => ({ summary: s.notes.join("; ") }))
    .addEdge(START, "prepare")
    .addEdge("prepare", "sub")
    .addEdge("sub", "finish")
    .addEdge("finish", END)
    .compile({ checkpointer });
}

/** A chat bot that answers every human message with an AIMessage carrying a stable id. */
export function chatGraph(checkpointer: Saver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("bot", (s) => {
      const last = s.messages[s.messages.length - 1]!;
      const n = s.messages.length;
      return { messages: [new AIMessage({ id: `ai-${n}`, content: `echo: ${String(last.content)}` })] };
    })
    .addEdge(START, "bot")
    .addEdge("bot", END)
    .compile({ checkpointer });
}

/**
 * Map-reduce: START fans out one `Send("work", { item })` per item; `work`
 * uppercases its item; `reduce` joins the sorted results. `calls` counts how
 * often each item ran; `failOnce` items throw on their first attempt.
 */
export const MapState = Annotation.Root({
  items: Annotation<string[]>(),
  results: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  total: Annotation<string>(),
});
export const WorkState = Annotation.Root({ item: Annotation<string>() });

export interface MapReduceOptions {
  failOnce?: string[];
  /** Passed to the `work` node. */
  retryPolicy?: { maxAttempts: number; initialInterval?: number; retryOn?: (e: unknown) => boolean };
}

export function mapReduceGraph(checkpointer: Saver, calls: Map<string, number>, options: MapReduceOptions = {}) {
  const failed = new Set<string>();
  const work = async ({ item }: { item: string }) => {
    calls.set(item, (calls.get(item) ?? 0) + 1);
    const willFail = options.failOnce?.includes(item) === true && !failed.has(item);
    // The failing task finishes last, so the step has successful writes to keep.
    await new Promise((r) => setTimeout(r, willFail ? 100 : 5));
    if (willFail) {
      failed.add(item);
      throw new Error(`transient failure on ${item}`);
    }
    return { results: [item.toUpperCase()] };
  };
  return new StateGraph(MapState)
    // logWarning: false: LangGraph would console.log each retry ("Retrying task ..."), which the tests provoke on purpose.
    .addNode("work", work, { input: WorkState, ...(options.retryPolicy ? { retryPolicy: { initialInterval: 1, logWarning: false, ...options.retryPolicy } } : {}) })
    .addNode("reduce", (s) => ({ total: [...s.results].sort().join(",") }))
    .addConditionalEdges(START, (s) => s.items.map((item) => new Send("work", { item })), ["work"])
    .addEdge("work", "reduce")
    .addEdge("reduce", END)
    .compile({ checkpointer });
}

/** One node that appends the input word to a log and counts turns: `turn` is a LastValue. */
export const LogState = Annotation.Root({
  word: Annotation<string>(),
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  turn: Annotation<number>(),
});

export function logGraph(checkpointer: Saver) {
  return new StateGraph(LogState)
    .addNode("record", (s) => ({ log: [s.word], turn: (s.turn ?? 0) + 1 }))
    .addEdge(START, "record")
    .addEdge("record", END)
    .compile({ checkpointer });
}

// ---------------------------------------------------------------------------
// Recording what LangGraph hands the saver
// ---------------------------------------------------------------------------

export interface PutCall {
  config: RunnableConfig;
  checkpoint: Checkpoint;
  metadata: CheckpointMetadata;
  newVersions: ChannelVersions;
}
export interface PutWritesCall {
  config: RunnableConfig;
  writes: PendingWrite[];
  taskId: string;
  taskPath: string | undefined;
}

/** Wraps `put` and `putWrites` of one saver instance and records their arguments (deep-copied). */
export function record<S extends Saver>(saver: S): { saver: S; puts: PutCall[]; writes: PutWritesCall[] } {
  const puts: PutCall[] = [];
  const writes: PutWritesCall[] = [];
  const put = saver.put.bind(saver);
  const putWrites = saver.putWrites.bind(saver);
  saver.put = async (config, checkpoint, metadata, newVersions) => {
    puts.push(structuredClone({ config: plainConfig(config), checkpoint, metadata, newVersions }));
    return put(config, checkpoint, metadata, newVersions);
  };
  saver.putWrites = async (config, w, taskId, taskPath) => {
    writes.push({ config: plainConfig(config), writes: w, taskId, taskPath });
    return putWrites(config, w, taskId, taskPath);
  };
  return { saver, puts, writes };
}

function plainConfig(config: RunnableConfig): RunnableConfig {
  // `signal`, callbacks etc. are not cloneable; keep what the saver reads.
  return structuredClone({ configurable: config.configurable, metadata: config.metadata, tags: config.tags });
}

// ---------------------------------------------------------------------------
// Comparing histories across savers (structure, not ids)
// ---------------------------------------------------------------------------

export async function history(graph: { getStateHistory(c: RunnableConfig): AsyncIterableIterator<StateSnapshot> }, config: RunnableConfig) {
  const out: StateSnapshot[] = [];
  for await (const s of graph.getStateHistory(config)) out.push(s);
  return out;
}

/**
 * A saver-independent view of a history (newest first, as listed): ids are
 * replaced by their position in the list, versions by their counter.
 */
export function shape(states: StateSnapshot[]) {
  const index = new Map(states.map((s, i) => [s.config.configurable?.checkpoint_id as string, i]));
  const pos = (c: RunnableConfig | undefined) => {
    const id = c?.configurable?.checkpoint_id as string | undefined;
    return id === undefined ? null : (index.get(id) ?? `missing:${id}`);
  };
  return states.map((s) => ({
    self: pos(s.config),
    parent: pos(s.parentConfig),
    // Subgraph namespaces embed a task id (derived from a checkpoint id): keep the node names.
    ns: String(s.config.configurable?.checkpoint_ns ?? "").replace(/:[0-9a-f-]{36}/g, ":<task>"),
    values: plainValues(s.values),
    next: [...s.next].sort(),
    source: s.metadata?.source,
    step: s.metadata?.step,
    tasks: s.tasks
      .map((t) => ({
        name: t.name,
        error: t.error === undefined ? undefined : String((t.error as { message?: string }).message ?? t.error),
        interrupts: t.interrupts.map((i) => i.value),
        result: t.result === undefined ? undefined : plainValues(t.result),
      }))
      .sort((a, b) => a.name.localeCompare(b.name)),
  }));
}

/**
 * Messages become `{ type, id, content }`; interrupts (`{ id, value }` with a
 * 32-hex id derived from a checkpoint id) lose their id; everything else is kept.
 */
export function plainValues(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(plainValues);
  if (isMessage(v)) return { type: v.getType(), id: v.id, content: v.content };
  if (isInterrupt(v)) return { interrupt: plainValues(v.value) };
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainValues(x)]));
  return v;
}

function isInterrupt(v: unknown): v is { id: string; value: unknown } {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const keys = Object.keys(v).sort();
  return keys.length === 2 && keys[0] === "id" && keys[1] === "value" && /^[0-9a-f]{32}$/.test(String((v as { id: unknown }).id));
}

function isMessage(v: unknown): v is BaseMessage {
  return v !== null && typeof v === "object" && typeof (v as BaseMessage).getType === "function" && "content" in v;
}

/** The counter of a version: `00..02.0.2728` -> 2, `-a2.3xf09qzl` -> 2, `-b10.…` -> 36, `2` -> 2. */
export function counter(version: string | number): number {
  if (typeof version === "number") return version;
  const head = version.split(".")[0]!;
  return head.startsWith("-") ? Number.parseInt(head.slice(2), 36) : Number.parseInt(head, 10);
}

export function counters(versions: Record<string, string | number>): Record<string, number> {
  return Object.fromEntries(Object.entries(versions).map(([k, v]) => [k, counter(v)]));
}

/** `versions_seen` with every version replaced by its counter. */
export function seenCounters(seen: Record<string, Record<string, string | number>>): Record<string, Record<string, number>> {
  return Object.fromEntries(Object.entries(seen).map(([k, v]) => [k, counters(v)]));
}

/** Our version strings for new threads: `-`, a length letter, the base-36 counter, a dot, 8 random base-36 characters (a digit first). */
export const VERSION_RE = /^-[a-z][0-9a-z]+\.[0-9][0-9a-z]{7}$/;

/** The long format (threads started before short versions, Python savers): a 32-digit zero-padded counter, a dot, a random fraction in [0, 1). */
export const LONG_VERSION_RE = /^\d{32}\.(0|0\.\d+|\d(\.\d+)?e-\d+)$/;

export function tid(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
}
