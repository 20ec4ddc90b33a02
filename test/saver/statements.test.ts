/**
 * The saver's statements (src/saver/sql/) name tables and columns as written, not through a
 * builder: each is prepared here against a schema the migrations made, so a name the schema does
 * not have fails (as a misspelled column does below) before any saver runs it.
 */
import { expect, it } from "vitest";
import { migrate } from "../../src/index.js";
import { saverStatements } from "../../src/saver/sql/index.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("statements");
const SCHEMA = 'we"ird schema';

/** Every statement text, list's page in its variants. */
function texts(): [string, string][] {
  const q = saverStatements(SCHEMA);
  const out: [string, string][] = [];
  for (const [name, statement] of Object.entries(q)) {
    if (typeof statement === "string") out.push([name, statement]);
  }
  out.push(["listPage (one lineage, before)", q.listPage({ threadId: "t", checkpointNs: "", before: "x", limit: 10 }).text]);
  out.push(["listPage (every thread, filter, cursor)", q.listPage({ filter: { json: {}, keys: ["k"], values: ["1"] }, cursor: ["a", "b", "c"], limit: 10 }).text]);
  out.push(["listPage (one thread, checkpoint id)", q.listPage({ threadId: "t", checkpointId: "c", limit: 1 }).text]);
  return out;
}

async function prepare(text: string): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query(`PREPARE statement AS ${text}`);
  } finally {
    await client.query("DEALLOCATE ALL").catch(() => undefined);
    client.release();
  }
}

it("every statement prepares against the migrated schema; one naming a column it does not have does not", async () => {
  await migrate({ pool: db.pool, schema: SCHEMA });
  const all = texts();
  expect(all.length).toBeGreaterThan(18);
  for (const [name, text] of all) await expect(prepare(text), name).resolves.toBeUndefined();
  const misspelled = saverStatements(SCHEMA).put.replace("parent_checkpoint_id, checkpoint, metadata", "parent_id, checkpoint, metadata");
  await expect(prepare(misspelled)).rejects.toMatchObject({ code: "42703" });
});

it("an ON CONFLICT clause calls no function that is not IMMUTABLE and holds no subquery (Citus runs it on the worker: issue 43)", () => {
  // What follows DO UPDATE: its SET list and WHERE, up to the end of the INSERT (RETURNING or the CTE's close).
  const clauses = texts().flatMap(([name, text]) => [...text.matchAll(/DO UPDATE\s+SET([\s\S]*?)(?=RETURNING|\n\)|$)/g)].map((m) => [name, m[1]!] as const));
  expect(clauses.length).toBeGreaterThanOrEqual(6);
  for (const [name, clause] of clauses) {
    expect(clause, name).not.toMatch(/\bnow\(\)|clock_timestamp|statement_timestamp|random\(/i);
    expect(clause, name).not.toMatch(/\(\s*SELECT\b/i);
  }
});
