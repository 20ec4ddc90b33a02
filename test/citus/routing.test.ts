/**
 * On Citus (`npm run test:citus` only): every statement the saver and the store send on their hot
 * paths runs on the node holding its thread (the store: its namespace) and nowhere else. Its plan,
 * as Citus makes it for the values sent, has only one-task scans (no multi-shard fan-out), each on
 * that worker, or on the coordinator where it reads what an earlier step gathered. Citus plans a
 * statement's CTEs one by one (a "Distributed Subplan" each, its rows passed through the coordinator),
 * so a put is several steps between the coordinator and the worker, not one: the test counts them
 * (docs/scaling-out.md says so). `list` without a thread, the fan-out, is one multi-shard scan, then
 * one routed read per thread. The statements are captured as sent (test/helpers/statements.ts), on
 * the test database's `public` schema, distributed as docs/scaling-out.md says.
 */
import { uuid6 } from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresSaver, PostgresStore } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { planOf } from "../helpers/partitions.js";
import { recordStatements, type Sent } from "../helpers/statements.js";

const db = withTestDatabase("citus-routing");
let pool: ReturnType<typeof testPool>;
let sent: Sent[];
let saver: PostgresSaver;
let store: PostgresStore;
let checks: ReturnType<typeof testPool>;
let checker: pg.PoolClient;

beforeAll(async () => {
  pool = testPool({ connectionString: db.url });
  sent = recordStatements(pool);
  saver = new PostgresSaver(pool, { elementStorage: true });
  store = new PostgresStore(pool);
  for (let t = 0; t < 8; t++) {
    const cp = makeCheckpoint({ messages: [`m${t}`], n: t });
    await saver.put({ configurable: { thread_id: `other-${t}`, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
  }
  checks = testPool({ connectionString: db.url, max: 1 });
  checker = await checks.connect();
});

afterAll(async () => {
  checker?.release();
  await checks?.end();
  await store?.stop();
  await pool?.end();
});

/** Statements that touch no distributed table: transaction control, settings, the schema check, deleteThread's lock. */
const local = (s: Sent) =>
  /^(BEGIN|COMMIT|ROLLBACK|SET LOCAL)\b/i.test(s.text.trim()) || /checkpointer(_store)?_migrations/.test(s.text) || /^SELECT pg_catalog\.pg_advisory_xact_lock\(/.test(s.text.trim());

async function statementsOf(fn: () => Promise<unknown>): Promise<Sent[]> {
  const from = sent.length;
  await fn();
  return sent.slice(from).filter((s) => !local(s));
}

/** The Citus plan of `s` for its values: the task count of each Citus scan, the port of each task's node, the distributed subplans. */
async function citusPlan(s: Sent): Promise<{ tasks: number[]; ports: number[]; subplans: number; plan: string }> {
  const plan = await planOf(checker, s, "custom");
  return {
    tasks: [...plan.matchAll(/Task Count: (\d+)/g)].map((m) => Number(m[1])),
    ports: [...plan.matchAll(/Node: host=\S+ port=(\d+)/g)].map((m) => Number(m[1])),
    subplans: (plan.match(/Distributed Subplan/g) ?? []).length,
    plan,
  };
}

/** The port of the worker holding `key` of `table`'s shards, and the coordinator's. */
async function nodesOf(table: string, key: string): Promise<{ worker: number; coordinator: number }> {
  const { rows } = await checker.query<{ worker: number; coordinator: number }>(
    `SELECT (SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column($1::regclass, $2::text)) AS worker,
            (SELECT nodeport FROM pg_dist_node WHERE groupid = 0) AS coordinator`,
    [table, key],
  );
  return rows[0]!;
}

const steps: string[] = [];
afterAll(() => console.log(`[citus] distributed subplans per statement:\n${steps.join("\n")}`));

/** Every statement `fn` sends runs on `key`'s worker (or the coordinator, reading what it gathered), one task per scan. */
async function expectRouted(name: string, table: string, key: string, fn: () => Promise<unknown>): Promise<void> {
  const statements = await statementsOf(fn);
  expect(statements.length, `${name} sent no statement`).toBeGreaterThan(0);
  const { worker, coordinator } = await nodesOf(table, key);
  const subplans: number[] = [];
  for (const s of statements) {
    const { tasks, ports, plan } = await citusPlan(s);
    const where = `${name}: ${s.text.replace(/\s+/g, " ").slice(0, 100)}\n${plan}`;
    expect(tasks.every((n) => n === 1), where).toBe(true);
    expect(ports.filter((p) => p !== worker && p !== coordinator), where).toEqual([]);
    subplans.push((await citusPlan(s)).subplans);
  }
  steps.push(`  ${name}: ${subplans.join(", ")}`);
}

describe("single-thread statements run whole on the thread's node", () => {
  const thread = "routed-thread";
  const config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
  let head: { configurable?: Record<string, unknown> };
  let stored: { configurable?: Record<string, unknown> };

  it("put (first, parent stored, parent not stored), putWrites, a put carrying writes", async () => {
    const first = makeCheckpoint({ messages: ["hello"], n: 0 });
    await expectRouted("put (first)", "checkpoints", thread, async () => {
      head = await saver.put(config, first, meta(-1), first.channel_versions);
    });
    const next = makeCheckpoint({ messages: ["hello", "world"], n: 1 }, { messages: "00000000000000000000000000000002.1", n: "00000000000000000000000000000002.1" });
    await expectRouted("put (parent stored)", "checkpoints", thread, async () => {
      head = await saver.put(head, next, meta(0), next.channel_versions);
    });
    stored = head;
    const orphan = makeCheckpoint({ n: 2 }, { n: "00000000000000000000000000000003.1" });
    await expectRouted("put (parent not stored)", "checkpoints", thread, () =>
      saver.put({ configurable: { ...config.configurable, checkpoint_id: uuid6(-1) } }, orphan, meta(1), orphan.channel_versions),
    );
    await expectRouted("putWrites", "checkpoints", thread, () => saver.putWrites(head, [["n", 5], ["messages", "x"]], "task-1"));
    const cp = makeCheckpoint({ n: 3 }, { n: "00000000000000000000000000000004.1" });
    await expectRouted("put with putWrites coalesced", "checkpoints", thread, () =>
      Promise.all([saver.put(head, cp, meta(2), cp.channel_versions), saver.putWrites(head, [["n", 6]], "task-2")]),
    );
  });

  it("getTuple (latest, by id), list with a thread, the delta-channel walk, deleteThread", async () => {
    const latest = await saver.getTuple(config);
    await expectRouted("getTuple latest", "checkpoints", thread, () => saver.getTuple(config));
    await expectRouted("getTuple by id", "checkpoints", thread, () => saver.getTuple(latest!.config));
    const drain = async (it: AsyncIterable<unknown>) => {
      for await (const _ of it);
    };
    await expectRouted("list with a thread", "checkpoints", thread, () => drain(saver.list(config, { limit: 2, filter: { source: "loop" } })));
    await expectRouted("getDeltaChannelHistory", "checkpoints", thread, () => saver.getDeltaChannelHistory({ config: stored, channels: ["n"] }));
    await expectRouted("deleteThread", "checkpoints", thread, () => saver.deleteThread(thread));
  });

  it("the store: put, get, delete", async () => {
    const ns = ["users", "routed", "memories"];
    const key = ns.join("\u0001");
    await expectRouted("store put", "store_items", key, () => store.put(ns, "a", { text: "likes tea" }));
    await expectRouted("store get", "store_items", key, () => store.get(ns, "a"));
    await expectRouted("store delete", "store_items", key, () => store.delete(ns, "a"));
  });
});

it("list without a thread: one multi-shard statement for the page's keys, then each thread's read routed", async () => {
  const threads = new Set<string>();
  const statements = await statementsOf(async () => {
    for await (const t of saver.list({}, { limit: 3 })) threads.add(t.config.configurable!.thread_id as string);
  });
  const plans: number[][] = [];
  for (const s of statements) plans.push((await citusPlan(s)).tasks);
  expect(plans[0]!.length).toBe(1);
  expect(plans[0]![0]).toBeGreaterThan(1);
  expect(plans.slice(1)).toEqual(statements.slice(1).map(() => [1]));
  expect(statements.length).toBe(1 + threads.size);
});
