/**
 * Every statement the saver and the store send on their hot paths names one
 * thread (the store: one namespace) for every table it reads or writes: what
 * Citus needs to route a statement to one shard of co-located tables, and
 * what lets Postgres prune a schema hash partitioned by thread to one
 * partition per table (issue 32, README "Scaling out").
 *
 * The statements are captured as sent (every `query()` of the saver's and
 * the store's pool, with its values), operation by operation, on a schema
 * with 16 partitions per table and rows in all of them. Each statement must
 * pass three checks, on the thread's remainder r:
 * - its custom plan (the values known when Postgres plans) names partitions of
 *   r only: every table it scans is pruned when planned, by the key compared
 *   with a value (directly, or through an equality Postgres derives);
 * - its generic plan (what a prepared statement may run) keeps partitions of r
 *   only once the executor starts ("Subplans Removed");
 * - run (then rolled back), it touched partitions of r only, inserts and the
 *   functions it calls included (pg_stat_xact_user_tables).
 * A join on anything but the key fails all three; a join on the key through
 * a materialized CTE passes the third only (Postgres prunes it per row when it
 * runs; a router planner, Citus's, sees no value there): both are checked to
 * fail, so the checks can. Operations that span threads are listed apart, as
 * fan-out, and checked to be so.
 */
import { uuid6 } from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listThreads, migrate, migrateStore, PostgresSaver, PostgresStore, prune } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { partitionsIn, planOf, remainderOf, touchedPartitions, type Touched } from "../helpers/partitions.js";
import { recordStatements, type Sent } from "../helpers/statements.js";

const PARTITIONS = 16;
const SCHEMA = "sharded";
const db = withTestDatabase("scaling-audit");
/** The saver's and the store's pool, recorded; JIT off as README "Scaling out" advises (fan-out reads would compile). */
let pool: ReturnType<typeof testPool>;
let sent: Sent[];
let saver: PostgresSaver;
let store: PostgresStore;
/** The connection the checks run on, and its pool. */
let checks: ReturnType<typeof testPool>;
let checker: pg.PoolClient;
const summary: string[] = [];

beforeAll(async () => {
  pool = testPool({ connectionString: db.url, options: "-c jit=off" });
  sent = recordStatements(pool); // before any client connects: each is recorded from its first statement
  await migrate({ pool, schema: SCHEMA, partitions: PARTITIONS });
  await migrateStore({ pool, schema: SCHEMA, partitions: PARTITIONS });
  saver = new PostgresSaver(pool, { schema: SCHEMA, elementStorage: true });
  store = new PostgresStore(pool, { schema: SCHEMA, ttl: { defaultTtl: 60 } });
  // Rows in every partition of every table: other threads, other namespaces.
  for (let t = 0; t < 64; t++) {
    const config = { configurable: { thread_id: `other-${t}`, checkpoint_ns: "" } };
    const cp = makeCheckpoint({ messages: [`m${t}`], n: t });
    const stored = await saver.put(config, cp, meta(-1), cp.channel_versions);
    await saver.putWrites(stored, [["n", t]], "task");
    await store.put(["users", `u${t}`], "k", { text: `item ${t}` });
  }
  await saver.deleteThread("other-0"); // a tombstone
  await pool.query(`ANALYZE`);
  checks = testPool({ connectionString: db.url, max: 1, options: "-c jit=off" });
  checker = await checks.connect();
  await checker.query(`SET search_path TO ${SCHEMA}, public`);
});

afterAll(async () => {
  checker?.release();
  await checks?.end();
  console.log(`[audit] statements per operation (${PARTITIONS} partitions per table):\n${summary.join("\n")}`);
  await store?.stop();
  await pool?.end();
});

/** Statements that touch none of the partitioned tables: transaction control and settings, the schema check (checkpointer_migrations: a reference table). */
const bookkeeping = (s: Sent) => /^(BEGIN|COMMIT|ROLLBACK|SET LOCAL)\b/i.test(s.text.trim()) || /checkpointer(_store)?_migrations/.test(s.text);

/** The statements `fn` sends (the checks' own are not recorded: another pool). */
async function capture(fn: () => Promise<unknown>): Promise<Sent[]> {
  const from = sent.length;
  await fn();
  return sent.slice(from);
}

interface Verdict {
  statement: string;
  custom: Touched[];
  generic: Touched[];
  touched: Touched[];
  genericPlan: string;
}

/** The three checks' findings for one statement (see the top of this file). */
async function audit(statement: Sent): Promise<Verdict> {
  const custom = partitionsIn(await planOf(checker, statement, "custom"));
  const genericPlan = await planOf(checker, statement, "generic");
  const { partitions: touched } = await touchedPartitions(checker, () => checker.query(statement.text, statement.values));
  return { statement: statement.text.replace(/\s+/g, " ").slice(0, 90), custom, generic: partitionsIn(genericPlan), touched, genericPlan };
}

/** The remainders of partitions that are not of `r`, by check: empty when the statement keeps to r. */
function strays(v: Verdict, r: number): Record<string, string[]> {
  const off = (ts: Touched[]) => [...new Set(ts.filter((t) => t.remainder !== r).map((t) => t.partition))];
  return Object.fromEntries(Object.entries({ custom: off(v.custom), generic: off(v.generic), touched: off(v.touched) }).filter(([, xs]) => xs.length > 0));
}

/** Run `op`, audit what it sent: every statement keeps to the partitions of `key`'s remainder; returns the verdicts. */
async function expectSingle(name: string, table: string, key: string, op: () => Promise<unknown>): Promise<Verdict[]> {
  const statements = (await capture(op)).filter((s) => !bookkeeping(s));
  expect(statements.length, `${name} sent no statement`).toBeGreaterThan(0);
  const r = await remainderOf(checker, table, key, SCHEMA);
  const verdicts: Verdict[] = [];
  for (const s of statements) {
    const v = await audit(s);
    expect(strays(v, r), `${name}: ${v.statement}\n${v.genericPlan}`).toEqual({});
    verdicts.push(v);
  }
  expect(verdicts.some((v) => v.touched.length > 0), `${name} touched no partition`).toBe(true);
  const tables = [...new Set(verdicts.flatMap((v) => v.touched.map((t) => t.parent)))].sort();
  // A statement that names no table (deleteThread's lock) runs where the client is connected: on Citus, the coordinator.
  const none = verdicts.filter((v) => v.touched.length === 0 && v.custom.length === 0).length;
  summary.push(
    `  ${name}: ${statements.length} statement(s), single partition (remainder ${r}) of ${tables.join(", ")}` + (none ? `; ${none} naming no table` : ""),
  );
  return verdicts;
}

describe("hot paths: one thread's (one namespace's) partitions, planned and run", () => {
  const thread = "audited-thread";
  const config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
  let head: { configurable?: Record<string, unknown> };

  it("put: a thread's first checkpoint, the next ones (parent stored), and one whose parent is not stored", async () => {
    const first = makeCheckpoint({ messages: ["hello"], n: 0 });
    await expectSingle("put (first)", "checkpoints", thread, async () => {
      head = await saver.put(config, first, meta(-1), first.channel_versions);
    });
    const next = makeCheckpoint({ messages: ["hello", "world"], n: 1 }, { messages: "00000000000000000000000000000002.1", n: "00000000000000000000000000000002.1" });
    await expectSingle("put (parent stored)", "checkpoints", thread, async () => {
      head = await saver.put(head, next, meta(0), next.channel_versions);
    });
    const orphan = makeCheckpoint({ n: 2 }, { n: "00000000000000000000000000000003.1" });
    const verdicts = await expectSingle("put (parent not stored)", "checkpoints", thread, () =>
      saver.put({ configurable: { ...config.configurable, checkpoint_id: uuid6(-1) } }, orphan, meta(1), orphan.channel_versions),
    );
    expect(verdicts.length).toBeGreaterThanOrEqual(2); // put, then putChecked
    // A statement pinned by its parameter is pruned as the executor starts, in a generic plan too.
    expect(verdicts[0]!.genericPlan).toMatch(/Subplans Removed: 15/);
  });

  it("putWrites, and writes coalesced while a put is in flight", async () => {
    await expectSingle("putWrites", "checkpoint_writes", thread, () => saver.putWrites(head, [["n", 5], ["messages", "x"]], "task-1"));
    const cp = makeCheckpoint({ n: 3 }, { n: "00000000000000000000000000000004.1" });
    const verdicts = await expectSingle("put with putWrites coalesced", "checkpoint_writes", thread, () =>
      Promise.all([saver.put(head, cp, meta(2), cp.channel_versions), saver.putWrites(head, [["n", 6]], "task-2"), saver.putWrites(head, [["n", 7]], "task-3")]),
    );
    // The put carried both calls' writes (saver/sql/put.ts putWithWrites): one statement writing both tables.
    expect(verdicts).toHaveLength(1);
    const parents = new Set(verdicts[0]!.touched.map((t) => t.parent));
    expect(parents.has("checkpoints") && parents.has("checkpoint_writes"), [...parents].join(", ")).toBe(true);
  });

  it("getTuple (latest and by id), list with a thread (a page, before, a filter), the delta-channel walk", async () => {
    const latest = await saver.getTuple(config);
    await expectSingle("getTuple latest", "checkpoints", thread, () => saver.getTuple(config));
    await expectSingle("getTuple by id", "checkpoints", thread, () => saver.getTuple(latest!.config));
    const drain = async (it: AsyncIterable<unknown>) => {
      for await (const _ of it);
    };
    await expectSingle("list with a thread", "checkpoints", thread, () => drain(saver.list(config, { limit: 2 })));
    await expectSingle("list with a thread, before, filter", "checkpoints", thread, () =>
      drain(saver.list({ configurable: { thread_id: thread } }, { before: latest!.config, filter: { source: "loop" }, limit: 5 })),
    );
    await expectSingle("getDeltaChannelHistory", "checkpoints", thread, () => saver.getDeltaChannelHistory({ config: latest!.config, channels: ["n"] }));
  });

  it("deleteThread", async () => {
    await expectSingle("deleteThread", "checkpoints", thread, () => saver.deleteThread(thread));
  });

  it("the store: put, get, delete", async () => {
    const ns = ["users", "audited", "memories"];
    const key = ns.join("\u0001");
    await expectSingle("store put", "store_items", key, () => store.put(ns, "a", { text: "likes tea" }));
    await expectSingle("store get", "store_items", key, () => store.get(ns, "a"));
    await expectSingle("store delete", "store_items", key, () => store.delete(ns, "a"));
  });

  it("the store's batch (LangGraph's AsyncBatchedStore in a graph) is not: its keys travel inside a JSON parameter, so even one namespace's batch is planned over every partition", async () => {
    const ns = ["users", "batched", "memories"];
    const r = await remainderOf(checker, "store_items", ns.join("\u0001"), SCHEMA);
    for (const [name, op] of [
      ["store batch of puts (one namespace)", () => store.batch([{ namespace: ns, key: "b", value: { text: "x" } }, { namespace: ns, key: "c", value: { text: "y" } }])],
      ["store batch of gets (one namespace)", () => store.batch([{ namespace: ns, key: "b" }, { namespace: ns, key: "c" }])],
    ] as const) {
      const statements = (await capture(op)).filter((s) => !bookkeeping(s));
      expect(statements.length).toBe(1);
      const v = await audit(statements[0]!);
      expect(strays(v, r).custom, v.statement).toBeDefined();
      summary.push(`  ${name}: planned over ${new Set(v.custom.map((t) => t.remainder)).size} remainders, ran on ${new Set(v.touched.map((t) => t.remainder)).size} (keys inside a JSON parameter: fan-out)`);
    }
  });
});

describe("the checks fail a statement that does not name the thread for every table", () => {
  const rOf = () => remainderOf(checker, "checkpoints", "other-5", SCHEMA);

  it("a join on the checkpoint id alone fails all three checks", async () => {
    const v = await audit({
      text: `SELECT w.task_id FROM ${SCHEMA}.checkpoints c JOIN ${SCHEMA}.checkpoint_writes w ON w.checkpoint_id = c.checkpoint_id WHERE c.thread_id = $1`,
      values: ["other-5"],
    });
    expect(Object.keys(strays(v, await rOf())).sort()).toEqual(["custom", "generic", "touched"]);
  });

  it("a join on the thread through a materialized CTE fails the planned checks (a router planner sees no value), though it runs on one partition", async () => {
    const v = await audit({
      text: `WITH p AS MATERIALIZED (SELECT thread_id, checkpoint_id FROM ${SCHEMA}.checkpoints WHERE thread_id = $1)
             SELECT w.task_id FROM p CROSS JOIN LATERAL (SELECT task_id FROM ${SCHEMA}.checkpoint_writes w
                                                          WHERE w.thread_id = p.thread_id AND w.checkpoint_id = p.checkpoint_id OFFSET 0) w`,
      values: ["other-5"],
    });
    expect(Object.keys(strays(v, await rOf())).sort()).toEqual(["custom", "generic"]);
  });
});

describe("fan-out: operations across threads read every partition", () => {
  /** Run `op`; the remainders its statements touched, over all of them (run again after `reset`, each rolled back). */
  async function remaindersOf(name: string, op: () => Promise<unknown>, reset?: () => Promise<unknown>): Promise<Set<number>> {
    const statements = (await capture(op)).filter((s) => !bookkeeping(s));
    await reset?.();
    const touched = new Set<number>();
    for (const s of statements) {
      const { partitions } = await touchedPartitions(checker, () => checker.query(s.text, s.values));
      for (const t of partitions) touched.add(t.remainder);
    }
    summary.push(`  ${name}: fan-out, ${statements.length} statement(s) touching ${touched.size} of ${PARTITIONS} remainders`);
    return touched;
  }
  const drain = async (it: AsyncIterable<unknown>) => {
    for await (const _ of it);
  };

  it.each([
    ["list without a thread", () => drain(saver.list({}, { limit: 100 }))],
    ["list with a filter only", () => drain(saver.list({}, { filter: { source: "input" }, limit: 100 }))],
    ["prune (retention runs it too)", () => prune({ pool, schema: SCHEMA, keepLast: 1, grace: 0 })],
    ["inspect: listThreads (CLI threads)", () => listThreads({ pool, schema: SCHEMA, limit: 100 })],
    ["store search with a namespace prefix", () => store.search(["users"], { limit: 100 })],
    ["store search of one namespace (its prefix covers the namespaces under it)", () => store.search(["users", "u7"])],
    ["store listNamespaces", () => store.listNamespaces({ prefix: ["users"], limit: 100 })],
    ["store batch of gets across namespaces", () => store.batch(Array.from({ length: 40 }, (_, i) => ({ namespace: ["users", `u${i}`], key: "k" })))],
    ["store sweep of expired items", () => store.sweepExpiredItems()],
  ] as const)("%s", async (name, op) => {
    expect((await remaindersOf(name, op)).size).toBeGreaterThan(1);
  });

  it("copyThread: the source's and the target's partitions", async () => {
    const from = "other-7";
    const r = await remainderOf(checker, "checkpoints", from, SCHEMA);
    let to = "copy-of-7";
    while ((await remainderOf(checker, "checkpoints", to, SCHEMA)) === r) to += "'";
    const copy = () => saver.copyThread(from, to, { overwrite: true });
    // Its statements run again on a target as the copy found it: deleted (a tombstone), as overwrite leaves it.
    expect(await remaindersOf("copyThread", copy, () => saver.deleteThread(to))).toEqual(new Set([r, await remainderOf(checker, "checkpoints", to, SCHEMA)]));
  });
});
