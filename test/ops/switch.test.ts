/**
 * Issue 16: switching from the official saver in a rolling deploy. An
 * official-saver process (test/helpers/writer.ts) keeps writing to several
 * threads while the adoption runs and afterwards; then this package takes
 * over thread by thread, the switch is finished, and rolled back: the official
 * saver reads every thread again, including what this package wrote.
 */
import { HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, MemorySaver } from "@langchain/langgraph";
import { uuid6, type BaseCheckpointSaver, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  AdoptionRolledBackError,
  adoptionStatus,
  migrate,
  MigrationError,
  PostgresSaver,
  rollbackAdoption,
  type SaverEvent,
} from "../../src/index.js";
import { longText } from "../helpers/checkpoints.js";
import { runCli } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { approvalGraph, chatGraph, history, logGraph, shape } from "../helpers/graphs.js";
import { startWriter, type Ack } from "../helpers/writers.js";

const db = withTestDatabase("switch");
const cfg = (thread_id: string, checkpoint_id?: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) } });
const ackCfg = (a: Ack) => cfg(a.thread, a.id);

async function listAll(saver: BaseCheckpointSaver, thread: string): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of saver.list(cfg(thread))) out.push(t);
  return out;
}

/** Row counts of the official tables (what an official write would change). */
async function officialRows(schema: string): Promise<number[]> {
  const q = pg.escapeIdentifier(schema);
  const { rows } = await db.pool.query(
    `SELECT (SELECT count(*) FROM ${q}.checkpoints)::int AS c, (SELECT count(*) FROM ${q}.checkpoint_blobs)::int AS b, (SELECT count(*) FROM ${q}.checkpoint_writes)::int AS w`,
  );
  return [rows[0].c, rows[0].b, rows[0].w];
}

describe("a rolling switch from the official saver, and back", () => {
  // The official saver's default schema; ours next to it.
  const from = "public";
  const schema = "langgraph";
  const threads = ["o1", "o2", "o3", "o4"];
  const official = () => new OfficialSaver(db.pool, undefined, { schema: from });
  const ours = () => new PostgresSaver(db.pool, undefined, { schema });
  let acks: Ack[] = [];

  it("adoption while an official-saver process writes to several threads in a loop: every acknowledged checkpoint is readable afterwards", async () => {
    const writer = startWriter("official", db.url, from, threads);
    const events: SaverEvent[] = [];
    try {
      await writer.ready;
      await writer.waitForAcks(12);
      const result = await migrate({ pool: db.pool, schema, adopt: { from }, onEvent: (e) => events.push(e) });
      expect(result.adoption).toMatchObject({ from, source: "js", officialVersion: 4, adopted: true });
      // The official process goes on writing through the switch; its writes are copied as it makes them.
      await writer.waitForAcks(writer.acks.length + 12);
    } finally {
      expect((await writer.stop()).code).toBe(0);
    }
    // It never noticed: no error, no deadlock (the adoption locks in the official put's order).
    expect(writer.errors).toEqual([]);
    expect(events.filter((e) => e.type === "retry" && e.code === "40P01")).toEqual([]);
    acks = writer.acks;
    const theirs = official();
    const mine = ours();
    for (const ack of acks) expect(await mine.getTuple(ackCfg(ack)), `${ack.thread} ${ack.id}`).toEqual(await theirs.getTuple(ackCfg(ack)));
    for (const thread of threads) {
      expect((await mine.getTuple(cfg(thread)))?.config.configurable?.checkpoint_id, thread).toBe(acks.filter((a) => a.thread === thread).at(-1)!.id);
      expect(await listAll(mine, thread)).toEqual(await listAll(theirs, thread));
    }
    // Official reads and writes are untouched: the same rows, read the same way (only triggers were added).
    const { rows } = await db.pool.query(
      "SELECT c.relname AS table, t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal ORDER BY 1, 2",
    );
    expect(rows.map((r) => `${r.table}.${r.name}`)).toEqual([
      "checkpoint_blobs.langgraph_checkpoint_pg_bridge",
      "checkpoint_blobs.langgraph_checkpoint_pg_bridge_delete",
      "checkpoint_writes.langgraph_checkpoint_pg_bridge",
      "checkpoint_writes.langgraph_checkpoint_pg_bridge_delete",
      "checkpoints.langgraph_checkpoint_pg_bridge",
      "checkpoints.langgraph_checkpoint_pg_bridge_delete",
    ]);
    expect(await adoptionStatus({ pool: db.pool, schema })).toMatchObject({ from, source: "js", state: "bridging" });
    // Adopting again is a no-op.
    expect((await migrate({ pool: db.pool, schema, adopt: { from } })).adoption).toMatchObject({ adopted: false });
  });

  it("official instances keep working on the threads this package has not touched, and are refused (never fork) on those it continued", async () => {
    await logGraph(ours()).invoke({ word: "ours" }, cfg("o1"));
    const before = await officialRows(from);
    const err = await logGraph(official()).invoke({ word: "stale" }, cfg("o1")).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "LGB01" });
    expect((err as Error).message).toMatch(/thread "o1" \(namespace ""\) was continued by langgraph-checkpoint-pg in schema "langgraph".*Nothing was written/);
    expect(await officialRows(from)).toEqual(before);
    expect((await logGraph(ours()).getState(cfg("o1"))).values.word).toBe("ours");

    await logGraph(official()).invoke({ word: "theirs" }, cfg("o2"));
    expect((await logGraph(ours()).getState(cfg("o2"))).values).toEqual((await logGraph(official()).getState(cfg("o2"))).values);
  });

  it("an official put that adds no new channel versions becomes the thread's latest here too", async () => {
    const theirs = official();
    const head = (await theirs.getTuple(cfg("o2")))!;
    const checkpoint = { ...head.checkpoint, id: "1fffffff-0000-6000-8000-000000000001" };
    await theirs.put(head.config, checkpoint, { ...head.metadata!, step: (head.metadata!.step ?? 0) + 1 }, {});
    const mine = ours();
    expect((await mine.getTuple(cfg("o2")))?.checkpoint.id).toBe(checkpoint.id);
    expect((await listAll(mine, "o2"))[0]!.checkpoint.id).toBe(checkpoint.id);
    expect((await mine.getTuple(cfg("o2")))?.checkpoint.channel_values).toEqual(head.checkpoint.channel_values);
  });

  it("a thread deleted by either saver is gone for both", async () => {
    await official().deleteThread("o3");
    expect(await ours().getTuple(cfg("o3"))).toBeUndefined();
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM langgraph.checkpoint_blobs WHERE thread_id = 'o3'");
    expect(rows[0].n).toBe(0);
    await ours().deleteThread("o4");
    expect(await official().getTuple(cfg("o4"))).toBeUndefined();
    const { rows: left } = await db.pool.query("SELECT count(*)::int AS n FROM public.checkpoint_writes WHERE thread_id = 'o4'");
    expect(left[0].n).toBe(0);
    // A thread the official saver started and this package continued with lists stored by their elements: the
    // official deleteThread takes its element rows too (the bridge says it knows them to migration 0008's guard).
    // Words of a realistic length: a list of short ones is stored whole (issue 40).
    await logGraph(official()).invoke({ word: "zero" }, cfg("o5"));
    const elements = new PostgresSaver(db.pool, undefined, { schema, elementStorage: true });
    for (const word of ["one", "two"]) await logGraph(elements).invoke({ word: longText(word) }, cfg("o5"));
    const before = await db.pool.query("SELECT count(*)::int AS n FROM langgraph.checkpoint_blobs WHERE thread_id = 'o5' AND channel = '__elements__'");
    expect(before.rows[0].n).toBeGreaterThan(0);
    await official().deleteThread("o5");
    const after = await db.pool.query("SELECT count(*)::int AS n FROM langgraph.checkpoint_blobs WHERE thread_id = 'o5'");
    expect(after.rows[0].n).toBe(0);
  });

  it("a thread deleted by either saver leaves a tombstone here: an official instance's write continuing it is refused (LGB04), a new conversation is not", async () => {
    for (const [thread, deleter] of [
      ["d1", official()],
      ["d2", ours()],
    ] as const) {
      await logGraph(official()).invoke({ word: "before" }, cfg(thread));
      const head = (await official().getTuple(cfg(thread)))!;
      await deleter.deleteThread(thread);
      const { rows } = await db.pool.query("SELECT last_checkpoint_id FROM langgraph.checkpoint_tombstones WHERE thread_id = $1", [thread]);
      expect(rows, thread).toEqual([{ last_checkpoint_id: head.checkpoint.id }]);
      // A run that was in flight on an official instance puts its next checkpoint: refused, nothing written anywhere.
      const next = { ...head.checkpoint, id: uuid6(-3) };
      const err = await official()
        .put(head.config, next, { ...head.metadata!, step: (head.metadata!.step ?? 0) + 1 }, {})
        .catch((e: unknown) => e);
      expect(err, thread).toMatchObject({ code: "LGB04" });
      expect((err as Error).message).toMatch(/was deleted; this official write continues its deleted history.*Nothing was written/);
      const left = await db.pool.query(
        "SELECT (SELECT count(*) FROM public.checkpoints WHERE thread_id = $1)::int AS theirs, (SELECT count(*) FROM langgraph.checkpoints WHERE thread_id = $1)::int AS mine",
        [thread],
      );
      expect(left.rows[0], thread).toEqual({ theirs: 0, mine: 0 });
      // A new conversation on the id, through the official saver, starts and reaches this package.
      await logGraph(official()).invoke({ word: "again" }, cfg(thread));
      expect((await logGraph(ours()).getState(cfg(thread))).values.word, thread).toBe("again");
    }
  });

  it("finishing (CLI): the official tables refuse writes with a clear error; this package goes on", async () => {
    const dry = await runCli(["migrate", "--schema", schema, "--finish-adoption", "--dry-run", "--database-url", db.url]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain("CREATE TRIGGER langgraph_checkpoint_pg_guard BEFORE INSERT OR UPDATE OR DELETE ON \"public\".checkpoints");
    expect((await adoptionStatus({ pool: db.pool, schema }))?.state).toBe("bridging");
    const run = await runCli(["migrate", "--schema", schema, "--finish-adoption", "--database-url", db.url]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Finished: the official tables in schema "public" are no longer copied and refuse writes/);
    const before = await officialRows(from);
    const err = await logGraph(official()).invoke({ word: "late" }, cfg("o2")).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "LGB02" });
    expect((err as Error).message).toMatch(/the switch is finished: the official saver must not write here any more/);
    await expect(official().deleteThread("o2")).rejects.toMatchObject({ code: "LGB02" });
    expect(await officialRows(from)).toEqual(before);
    await logGraph(ours()).invoke({ word: "after finish" }, cfg("o2"));
    const status = await runCli(["status", "--schema", schema, "--database-url", db.url]);
    expect(status.stdout).toMatch(/adoption\s+of schema "public" \(official JS saver\): finished/);
  });

  it("rollback (CLI): the official saver reads every thread afterwards, including the checkpoints written after adoption, and goes on with them", async () => {
    const mine = ours();
    // Work done by this package after the switch: a new chat thread, an interrupted run, more turns on adopted threads.
    for (const text of ["hi", "how are you?"]) await chatGraph(mine).invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg("n1"));
    await approvalGraph(mine).invoke({}, cfg("n2"));
    await logGraph(mine).invoke({ word: "more" }, cfg("o1"));
    const threadsNow = ["o1", "o2", "n1", "n2"];
    const expected = new Map<string, { tuples: CheckpointTuple[]; shape: unknown }>();
    const graphOf = (saver: BaseCheckpointSaver, thread: string) => (thread === "n1" ? chatGraph(saver) : thread === "n2" ? approvalGraph(saver) : logGraph(saver));
    for (const thread of threadsNow) {
      expected.set(thread, { tuples: await listAll(mine, thread), shape: shape(await history(graphOf(mine, thread), cfg(thread))) });
    }

    const dry = await runCli(["migrate", "--schema", schema, "--rollback-adoption", "--dry-run", "--database-url", db.url]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/^Would convert [1-9]\d* checkpoint\(s\), [1-9]\d* blob\(s\) and [1-9]\d* pending write\(s\) into the official JS saver's tables/);
    const run = await runCli(["migrate", "--schema", schema, "--rollback-adoption", "--database-url", db.url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^Rolled back: /);

    const theirs = official();
    for (const thread of threadsNow) {
      const want = expected.get(thread)!;
      const got = await listAll(theirs, thread);
      // Every checkpoint, with its values, metadata, parent and pending writes (versions are the official saver's numbers).
      expect(got.map((t) => t.checkpoint.id), thread).toEqual(want.tuples.map((t) => t.checkpoint.id));
      got.forEach((t, i) => {
        const w = want.tuples[i]!;
        // Values of channels without a version (LangGraph's `__pregel_tasks: []`) are not carried: the official saver does not store them.
        const versioned = Object.fromEntries(Object.entries(w.checkpoint.channel_values).filter(([ch]) => ch in w.checkpoint.channel_versions));
        expect(t.checkpoint.channel_values, `${thread} ${t.checkpoint.id}`).toEqual(versioned);
        expect(t.metadata).toEqual(w.metadata);
        expect(t.parentConfig?.configurable?.checkpoint_id).toBe(w.parentConfig?.configurable?.checkpoint_id);
        expect(t.pendingWrites).toEqual(w.pendingWrites);
        for (const v of Object.values(t.checkpoint.channel_versions)) expect(typeof v).toBe("number");
      });
      expect(shape(await history(graphOf(theirs, thread), cfg(thread))), thread).toEqual(want.shape);
    }
    // The official saver goes on with them: the same results as LangGraph's own MemorySaver.
    const reference = new MemorySaver();
    for (const text of ["hi", "how are you?", "and now?"]) await chatGraph(reference).invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg("ref"));
    await chatGraph(theirs).invoke({ messages: [new HumanMessage({ id: "h-and now?", content: "and now?" })] }, cfg("n1"));
    expect(shape(await history(chatGraph(theirs), cfg("n1")))).toEqual(shape(await history(chatGraph(reference), cfg("ref"))));
    expect(await approvalGraph(theirs).invoke(new Command({ resume: "yes" }), cfg("n2"))).toMatchObject({ draft: "hello world", approved: "yes", published: true });
    await logGraph(theirs).invoke({ word: "official again" }, cfg("o1"));
    expect((await logGraph(theirs).getState(cfg("o1"))).values.log.slice(-3)).toEqual(["ours", "more", "official again"]);

    // The official tables carry no trigger of this package; this package's instances cannot write any more.
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal");
    expect(rows[0].n).toBe(0);
    const err = await logGraph(mine).invoke({ word: "too late" }, cfg("o2")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdoptionRolledBackError);
    await expect(mine.deleteThread("o2")).rejects.toBeInstanceOf(AdoptionRolledBackError);
    expect((await adoptionStatus({ pool: db.pool, schema }))?.state).toBe("rolled-back");
    // Running it again converts nothing new; adopting into the rolled-back schema is refused.
    expect(await rollbackAdoption({ pool: db.pool, schema })).toMatchObject({ checkpoints: 0, blobs: 0, writes: 0, rolledBack: true });
    await expect(migrate({ pool: db.pool, schema, adopt: { from } })).rejects.toBeInstanceOf(MigrationError);
  });
});
