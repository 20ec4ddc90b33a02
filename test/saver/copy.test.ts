/**
 * copyThread (src/saver/copy.ts): the copy reads exactly as the source at every
 * checkpoint (LangGraph's getStateHistory on the copy equals the source's, in
 * every namespace, with interrupts, forks, lists stored by their elements and
 * delta channels), time travel and forks on the copy work and leave the source
 * alone; `upTo` copies the thread as it stood at a checkpoint; an existing
 * target is refused unless `overwrite`; values bound to their rows are bound
 * to the copy's.
 */
import { HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, DeltaValue, END, MessagesAnnotation, START, StateGraph, StateSchema, type StateSnapshot } from "@langchain/langgraph";
import { uuid6, type BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { EncryptedSerializer, InvalidInputError, migrate, PostgresSaver, ThreadCopyError, ThreadDeletedError, type SaverEvent } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { pruneLockName } from "../../src/ops/prune-sql.js";
import { testPool, waitForLockWait, withTestDatabase } from "../helpers/db.js";
import { approvalGraph, chatGraph, history, nestedGraph, shape, tid } from "../helpers/graphs.js";

const db = withTestDatabase("copy");
let pool: ReturnType<typeof testPool>;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  pool = testPool({ connectionString: db.url, max: 6 });
});
afterAll(async () => {
  await pool?.end();
});

const cfg = (thread_id: string, checkpoint_id?: string, checkpoint_ns?: string): RunnableConfig => ({
  configurable: { thread_id, ...(checkpoint_ns !== undefined ? { checkpoint_ns } : {}), ...(checkpoint_id ? { checkpoint_id } : {}) },
});

/** A history as data, its thread id replaced, so two threads' histories compare. */
function normalized(states: StateSnapshot[], threadId: string): unknown {
  return JSON.parse(JSON.stringify(states).split(JSON.stringify(threadId).slice(1, -1)).join("<thread>"));
}

/** A chat whose messages live in a DeltaChannel: each checkpoint is rebuilt along its parents' writes. */
function deltaChat(checkpointer: BaseCheckpointSaver) {
  const State = new StateSchema({
    log: new DeltaValue(z.array(z.string()).default(() => []), {
      inputSchema: z.string(),
      reducer: (current: string[], writes: string[]) => [...current, ...writes],
      snapshotFrequency: 3,
    }),
  });
  return new StateGraph(State)
    .addNode("a", () => ({ log: "a" }))
    .addEdge(START, "a")
    .addEdge("a", END)
    .compile({ checkpointer });
}

describe.each([false, true])("copyThread (elementStorage: %s)", (elementStorage) => {
  let saver: PostgresSaver;
  const events: SaverEvent[] = [];
  beforeAll(() => {
    saver = new PostgresSaver(pool, { elementStorage, onEvent: (e) => void events.push(e) });
  });

  /** A thread with an interrupt, a resume, a fork from an older checkpoint and a chat. */
  async function richThread(): Promise<string> {
    const threadId = tid("src");
    const approval = approvalGraph(saver);
    await approval.invoke({}, cfg(threadId));
    await approval.invoke(new Command({ resume: "yes" }), cfg(threadId));
    const states = await history(approval, cfg(threadId));
    const old = states.find((s) => s.next.includes("approve"))!;
    // Time travel on the source: a fork from the interrupted checkpoint, answered differently.
    await approval.invoke(new Command({ resume: "no" }), old.config);
    return threadId;
  }

  it("the copy's getStateHistory equals the source's, checkpoint by checkpoint; an event reports it", async () => {
    const from = await richThread();
    const to = tid("copy");
    const result = await saver.copyThread(from, to);
    const source = await history(approvalGraph(saver), cfg(from));
    const copy = await history(approvalGraph(saver), cfg(to));
    expect(copy.length).toBe(source.length);
    expect(normalized(copy, to)).toEqual(normalized(source, from));
    expect(result).toMatchObject({ checkpoints: source.length, overwrote: false });
    expect(result.writes).toBeGreaterThan(0);
    expect(events).toContainEqual(expect.objectContaining({ type: "copyThread", fromThreadId: from, toThreadId: to, checkpoints: source.length }));
    // Each checkpoint reads the same, pending writes included.
    for (const s of source) {
      const a = await saver.getTuple(s.config);
      const b = await saver.getTuple(cfg(to, s.config.configurable!.checkpoint_id, ""));
      expect(b?.checkpoint).toEqual(a?.checkpoint);
      expect(b?.pendingWrites).toEqual(a?.pendingWrites);
      expect(b?.metadata).toEqual(a?.metadata);
    }
  });

  it("subgraph namespaces, chats and delta channels read the same on the copy", async () => {
    const nested = tid("nested");
    await nestedGraph(saver).invoke({ topic: "copies" }, cfg(nested));
    const chat = tid("chat");
    for (const text of ["one", "two", "three"]) await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg(chat));
    const delta = tid("delta");
    for (let i = 0; i < 5; i++) await deltaChat(saver).invoke({ log: `turn ${i}` }, cfg(delta));
    const graphs: [string, { getStateHistory(c: RunnableConfig): AsyncIterableIterator<StateSnapshot> }][] = [
      [nested, nestedGraph(saver)],
      [chat, chatGraph(saver)],
      [delta, deltaChat(saver)],
    ];
    for (const [from, graph] of graphs) {
      const to = tid("copy");
      await saver.copyThread(from, to);
      expect(normalized(await history(graph, cfg(to)), to), from).toEqual(normalized(await history(graph, cfg(from)), from));
    }
    // The interrupted subgraph resumes on the copy as on the source.
    const to = tid("copy-nested");
    await saver.copyThread(nested, to);
    const onCopy = await nestedGraph(saver).invoke(new Command({ resume: "ok" }), cfg(to));
    expect(onCopy.summary).toMatch(/reviewer said ok$/);
    expect((await nestedGraph(saver).getState(cfg(nested))).next).toEqual(["sub"]);
    expect(await nestedGraph(saver).invoke(new Command({ resume: "ok" }), cfg(nested))).toEqual(onCopy);
    // New checkpoints have new ids: compared by their place in the history.
    expect(shape(await history(nestedGraph(saver), cfg(to)))).toEqual(shape(await history(nestedGraph(saver), cfg(nested))));
  });

  it("time travel and forks on the copy work, and leave the source as it was", async () => {
    const from = await richThread();
    const to = tid("copy");
    await saver.copyThread(from, to);
    const before = normalized(await history(approvalGraph(saver), cfg(from)), from);
    // The oldest checkpoint waiting for approval: replayed from there with another answer, and a state update on another.
    const pick = (states: StateSnapshot[]) => states.filter((s) => s.next.includes("approve")).at(-1)!;
    const draftOf = (states: StateSnapshot[]) => states.find((s) => s.next.includes("write"))!;
    const app = approvalGraph(saver);
    const forked = await app.invoke(new Command({ resume: "maybe" }), pick(await history(app, cfg(to))).config);
    const updated = await app.updateState(draftOf(await history(app, cfg(to))).config, { draft: "edited" });
    expect(updated.configurable?.thread_id).toBe(to);
    expect(normalized(await history(app, cfg(from)), from)).toEqual(before);
    // The same on the source gives the same results and histories.
    expect(await app.invoke(new Command({ resume: "maybe" }), pick(await history(app, cfg(from))).config)).toEqual(forked);
    await app.updateState(draftOf(await history(app, cfg(from))).config, { draft: "edited" });
    expect(shape(await history(app, cfg(to)))).toEqual(shape(await history(app, cfg(from))));
  });

  it("upTo: the thread as it stood at that checkpoint, which becomes the copy's head", async () => {
    const from = tid("src");
    const chat = chatGraph(saver);
    for (const text of ["one", "two", "three"]) await chat.invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg(from));
    const source = await history(chat, cfg(from));
    const at = source.find((s) => s.values.messages?.length === 4 && s.next.length === 0)!;
    const upTo = at.config.configurable!.checkpoint_id as string;
    const to = tid("copy");
    await saver.copyThread(from, to, { upTo });
    const copy = await history(chat, cfg(to));
    expect(normalized(copy, to)).toEqual(normalized(source.filter((s) => (s.config.configurable!.checkpoint_id as string) <= upTo), from));
    expect((await chat.getState(cfg(to))).values).toEqual(at.values);
    // The copy goes on from there.
    const next = await chat.invoke({ messages: [new HumanMessage({ id: "h-branch", content: "branch" })] }, cfg(to));
    expect(next.messages.map((m: { content: unknown }) => m.content)).toEqual(["one", "echo: one", "two", "echo: two", "branch", "echo: branch"]);
    // Values the later checkpoints alone named were not copied (the source holds them).
    const holding = async (threadId: string) =>
      (await db.pool.query("SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = $1 AND position('three'::bytea in value) > 0", [threadId])).rows[0].n;
    expect(await holding(from)).toBeGreaterThan(0);
    expect(await holding(to)).toBe(0);
  });
});

describe("copyThread refuses, and writes nothing", () => {
  let saver: PostgresSaver;
  beforeAll(() => {
    saver = new PostgresSaver(pool);
  });
  const rows = async (threadId: string) =>
    (await db.pool.query("SELECT (SELECT count(*) FROM checkpoints WHERE thread_id = $1)::int AS c, (SELECT count(*) FROM checkpoint_writes WHERE thread_id = $1)::int AS w", [threadId]))
      .rows[0];

  it("an existing target, unless overwrite: true (which replaces it and leaves its tombstone)", async () => {
    const [a, b] = [tid("a"), tid("b")];
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h1", content: "from a" })] }, cfg(a));
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h2", content: "from b" })] }, cfg(b));
    const oldHead = (await saver.getTuple(cfg(b)))!;
    const before = await rows(b);
    const err = await saver.copyThread(a, b).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThreadCopyError);
    expect(err).toMatchObject({ code: "THREAD_COPY_REFUSED", reason: "target-exists", retryable: false });
    expect(await rows(b)).toEqual(before);
    const r = await saver.copyThread(a, b, { overwrite: true });
    expect(r.overwrote).toBe(true);
    expect((await chatGraph(saver).getState(cfg(b))).values.messages.map((m: { content: unknown }) => m.content)).toEqual(["from a", "echo: from a"]);
    // A run still going on the replaced history cannot write into the copy.
    const late = await saver.put(oldHead.config, makeCheckpoint({ x: 1 }, { x: "-z9.00000001" }), meta(5), { x: "-z9.00000001" }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ThreadDeletedError);
  });

  it("a prune or a compaction at work on the source (holding prune's lock of it) makes the copy wait, not copy what it is removing", async () => {
    const [a, b] = [tid("pinned"), tid("pinned-copy")];
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h1", content: "from a" })] }, cfg(a));
    const holder = await db.pool.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [pruneLockName("public"), a]);
      const copying = saver.copyThread(a, b);
      copying.catch(() => undefined);
      await waitForLockWait(db.pool, "pg_advisory_xact_lock(pg_catalog.hashtext($1::text), pg_catalog.hashtext($2::text))");
      expect(await rows(b)).toEqual({ c: 0, w: 0 });
      await holder.query("COMMIT");
      expect((await copying).checkpoints).toBe((await rows(a)).c);
    } finally {
      holder.release();
    }
  });

  it("a missing source, a checkpoint upTo that the source's root namespace does not hold; bad input before any SQL", async () => {
    const [a, b] = [tid("a"), tid("b")];
    expect(await saver.copyThread(a, b).catch((e: unknown) => e)).toMatchObject({ reason: "source-missing" });
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h1", content: "x" })] }, cfg(a));
    expect(await saver.copyThread(a, b, { upTo: uuid6(-3) }).catch((e: unknown) => e)).toMatchObject({ reason: "checkpoint-missing" });
    expect(await rows(b)).toEqual({ c: 0, w: 0 });
    for (const [args, field] of [
      [[a, a], "copyThread toThreadId"],
      [[a, ""], "copyThread toThreadId"],
      [[42, b], "copyThread fromThreadId"],
      [[a, b, { upTo: 7 }], "copyThread options.upTo"],
      [[a, b, { overwrite: "yes" }], "copyThread options.overwrite"],
      [[a, b, { force: true }], "copyThread options.force"],
    ] as const) {
      const e = await (saver.copyThread as (...x: unknown[]) => Promise<unknown>)(...args).catch((x: unknown) => x);
      expect(e, field).toBeInstanceOf(InvalidInputError);
      expect(e, field).toMatchObject({ field });
    }
  });

  it("a target deleted before (it has a tombstone) takes the copy, and the copy goes on", async () => {
    const [a, b] = [tid("a"), tid("b")];
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h1", content: "b's old" })] }, cfg(b));
    await saver.deleteThread(b);
    await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h1", content: "a's" })] }, cfg(a));
    await saver.copyThread(a, b);
    const next = await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: "h2", content: "more" })] }, cfg(b));
    expect(next.messages.map((m: { content: unknown }) => m.content)).toEqual(["a's", "echo: a's", "more", "echo: more"]);
  });
});

it.each([false, true])("values bound to their rows (EncryptedSerializer, elementStorage: %s) are sealed for the copy's rows, lists tagged for them", async (elementStorage) => {
  const serde = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });
  const saver = new PostgresSaver(pool, { serde, elementStorage });
  const [a, b] = [tid("enc-a"), tid("enc-b")];
  const approval = approvalGraph(saver);
  await approval.invoke({}, cfg(a));
  for (const text of ["one", "two"]) await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg(a));
  await saver.copyThread(a, b);
  expect(normalized(await history(approval, cfg(b)), b)).toEqual(normalized(await history(approval, cfg(a)), a));
  expect(normalized(await history(chatGraph(saver), cfg(b)), b)).toEqual(normalized(await history(chatGraph(saver), cfg(a)), a));
  expect((await approval.invoke(new Command({ resume: "yes" }), cfg(b))).published).toBe(true);
  const elements = await db.pool.query("SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__'", [b]);
  expect(elements.rows[0].n > 0).toBe(elementStorage);
  // Without the serializer, a copy would be unreadable: refused.
  expect(await new PostgresSaver(pool, { elementStorage }).copyThread(a, tid("enc-c")).catch((e: unknown) => e)).toMatchObject({ reason: "needs-serializer" });
  // Not the same bytes: each copy is sealed for its own row.
  // (Each thread read alone: on Citus the two threads may be on two nodes.)
  const sealed = async (thread: string) =>
    (await db.pool.query("SELECT checkpoint_ns, channel, version, value FROM checkpoint_blobs WHERE thread_id = $1 AND type LIKE 'enc:%'", [thread])).rows.map(
      (r) => [`${r.checkpoint_ns}/${r.channel}/${r.version}`, (r.value as Buffer).toString("hex")] as const,
    );
  const source = await sealed(a);
  const copied = new Map(await sealed(b));
  expect(source.length).toBeGreaterThan(0);
  expect(source.filter(([key]) => copied.has(key)).length).toBe(source.length);
  expect(source.filter(([key, value]) => copied.get(key) === value)).toEqual([]);
});
