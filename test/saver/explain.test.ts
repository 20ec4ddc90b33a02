/**
 * The hot queries have an index to use: with sequential scans disabled, the
 * planner would still choose one only if no index fits. Checked on generic
 * plans (what a prepared statement runs with), on tables with real data.
 */
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { beforeAll, expect, it } from "vitest";
import { migrate, PostgresSaver } from "../../src/index.js";
import { saverStatements } from "../../src/saver/sql/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("explain");
const BIG = ["checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_heads"];
let threadId: string;
let checkpointId: string;

beforeAll(async () => {
  await migrate({ pool: db.pool });
  const saver = new PostgresSaver(db.pool);
  threadId = uuid6(-3);
  let config = await saver.put({ configurable: { thread_id: threadId } }, makeCheckpoint({ a: 1 }), meta(-1), { a: 1 });
  for (let i = 0; i < 30; i++) {
    const v = String(i + 2);
    config = await saver.put(config, makeCheckpoint({ a: i }, { a: v }), meta(i), { a: v });
    await saver.putWrites(config, [["a", i]], `task-${i}`);
  }
  checkpointId = config.configurable!.checkpoint_id;
  // Many other threads, cloned in SQL, so the tables are not trivially small.
  await db.pool.query(`
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    SELECT 'other-' || g, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata
      FROM checkpoints, generate_series(1, 300) g WHERE thread_id = $1`, [threadId]);
  await db.pool.query(`
    INSERT INTO checkpoint_heads (thread_id, checkpoint_ns, checkpoint_id)
    SELECT 'other-' || g, checkpoint_ns, checkpoint_id FROM checkpoint_heads, generate_series(1, 300) g WHERE thread_id = $1`, [threadId]);
  await db.pool.query(`
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
    SELECT 'other-' || g, checkpoint_ns, channel, version, type, value FROM checkpoint_blobs, generate_series(1, 300) g WHERE thread_id = $1`, [threadId]);
  await db.pool.query(`
    INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path)
    SELECT 'other-' || g, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path
      FROM checkpoint_writes, generate_series(1, 300) g WHERE thread_id = $1`, [threadId]);
  await db.pool.query("ANALYZE");
});

async function plan(sql: string, params: unknown[], types: string[]): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SET LOCAL enable_seqscan = off");
    await client.query("SET LOCAL plan_cache_mode = force_generic_plan");
    await client.query(`PREPARE hot(${types.join(", ")}) AS ${sql}`);
    const quote = (x: unknown) => `'${(typeof x === "object" ? JSON.stringify(x) : String(x)).replace(/'/g, "''")}'`;
    const literal = params.map((p, i) =>
      p === null ? `NULL::${types[i]}` : Array.isArray(p) ? `ARRAY[${p.map(quote).join(",")}]::${types[i]}` : `${quote(p)}::${types[i]}`,
    );
    const { rows } = await client.query(`EXPLAIN (COSTS OFF) EXECUTE hot(${literal.join(", ")})`);
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  } finally {
    await client.query("ROLLBACK");
    await client.query("DEALLOCATE ALL"); // prepared statements outlive the transaction
    client.release();
  }
}

function expectNoSeqScan(text: string) {
  // `_p<n>`: a partition, when the tables are partitioned (TEST_PARTITIONS).
  for (const table of BIG) expect(text, text).not.toMatch(new RegExp(`Seq Scan on ${table}(_p\\d+)?\\b`));
}

const q = saverStatements("public");

it("getTuple (latest and by id) uses indexes", async () => {
  expectNoSeqScan(await plan(q.getHead, [threadId, ""], ["text", "text"]));
  expectNoSeqScan(await plan(q.getById, [threadId, "", checkpointId], ["text", "text", "text"]));
});

it("list on one thread uses indexes: first page, a later page, with before and a filter", async () => {
  const first = q.listPage({ threadId, checkpointNs: "", limit: 10 });
  expectNoSeqScan(await plan(first.text, first.values, ["text", "text", "int"]));
  const later = q.listPage({ threadId, checkpointNs: "", before: checkpointId, cursor: [checkpointId, threadId, ""], limit: 10 });
  const text = await plan(later.text, later.values, ["text", "text", "text", "int"]);
  expectNoSeqScan(text);
  expect(text).toMatch(/Index Cond: .*checkpoint_id < /); // the page bound is an index range, not a filter
  const filtered = q.listPage({ threadId, filter: { json: { source: "loop" }, keys: ["source"], values: ['"loop"'] }, limit: 10 });
  expectNoSeqScan(await plan(filtered.text, filtered.values, ["text", "text[]", "jsonb[]", "jsonb", "int"]));
});

it("put, putWrites, the delta-channel walk and deleteThread use indexes", async () => {
  const putParams = [threadId, "", "new-id", checkpointId, "{}", "{}", null, "true", ["a"], ["99"], ["msgpack"], ["0"], "true", "300", null, null, "false", ["1"], "\\x01", null, null];
  const putTypes = [
    "text", "text", "text", "text", "jsonb", "jsonb", "bytea", "boolean", "text[]", "text[]", "text[]", "int[]", "boolean", "float8", "int", "int", "boolean",
    "int[]", "bytea", "text", "bytea",
  ];
  expectNoSeqScan(await plan(q.put, putParams, putTypes));
  expectNoSeqScan(await plan(q.putChecked, [...putParams, ["b"], ["98"]], [...putTypes, "text[]", "text[]"]));
  const writes = await plan(q.putWrites, [threadId, "", checkpointId, "t", "", ["0"], ["a"], ["pg:refs"], ["0"], ["16"], "\\x01", ["00"], ["msgpack"], ["16"], ["1"]], [
    "text", "text", "text", "text", "text", "int[]", "text[]", "text[]", "int[]", "int[]", "bytea", "text[]", "text[]", "int[]", "int[]",
  ]);
  expectNoSeqScan(writes);
  const history = await plan(q.deltaHistory, [threadId, "", checkpointId, ["a"], [], []], ["text", "text", "text", "text[]", "text[]", "text[]"]);
  expectNoSeqScan(history);
  const del = await plan(q.deleteThread, [threadId], ["text"]);
  expectNoSeqScan(del);
});

it("the delta-channel walk reads the rows of its walk, not the thread's (issue 41)", async () => {
  // Every checkpoint of the thread holds a value of "a", so a walk from the head stops at its parent:
  // one seed, the parent's writes. Rows read are counted by Postgres (pg_stat_xact_user_tables), whatever
  // the plan: a join planned as a scan of the thread's blobs, once per ancestor, read them all.
  const client = await db.pool.connect();
  try {
    await client.query("BEGIN");
    const read = async () =>
      (
        await client.query<{ relname: string; n: string }>(
          "SELECT relname, seq_tup_read + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relname IN ('checkpoint_blobs', 'checkpoint_writes')",
        )
      ).rows;
    const before = new Map((await read()).map((r) => [r.relname, Number(r.n)]));
    const { rows } = await client.query<{ kind: string }>(q.deltaHistory, [threadId, "", checkpointId, ["a"], [], []]);
    expect(rows.filter((r) => r.kind === "seed")).toHaveLength(1);
    for (const r of await read()) expect(Number(r.n) - (before.get(r.relname) ?? 0), r.relname).toBeLessThanOrEqual(3);
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
});
