/**
 * Hash partitioned schemas in tests (README "Scaling out"): which partitions a
 * statement really touched, read from Postgres's own per-transaction table
 * statistics, and which partition a key hashes to.
 *
 * `pg_stat_xact_user_tables` counts every scan started on a table (sequential
 * or through one of its indexes) and every row inserted, updated or deleted,
 * that the backend has not sent to the statistics yet. A partition the planner
 * pruned, at plan time or when the executor starts or rescans a node, is never
 * opened and counts nothing; so the partitions whose counts grew while a
 * statement ran are exactly those it read or wrote, whatever the shape of its
 * plan.
 *
 * @example
 * ```ts
 * const touched = await touchedPartitions(client, () => client.query(sql, values));
 * expect(remainders(touched)).toEqual(new Set([await remainderOf(client, "checkpoints", "thread-1")]));
 * ```
 */
import pg from "pg";
import type { Sent } from "./statements.js";

/** TEST_PARTITIONS: the number of hash partitions per table test databases get (test/helpers/db.ts), or undefined. */
export function testPartitions(): number | undefined {
  const text = process.env.TEST_PARTITIONS;
  if (text === undefined || text === "") return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 2 || n > 1024) throw new Error(`TEST_PARTITIONS must be an integer from 2 to 1024, got ${JSON.stringify(text)}`);
  return n;
}

/** One partition a statement touched: its parent table and its remainder (the `_p<i>` suffix partitions.ts gives it). */
export interface Touched {
  parent: string;
  partition: string;
  remainder: number;
}

/**
 * Run `fn` (statements on `client`) in a transaction rolled back afterwards,
 * and return the partitions of partitioned tables it touched. Plain tables it
 * touched are returned as `plain`.
 *
 * The counts are taken before and after: a backend keeps its counts pending,
 * earlier transactions' included, until it sends them, which it does only
 * between transactions and at most once a second; inside the transaction
 * nothing is sent, so the difference is exactly what `fn` did.
 */
export async function touchedPartitions(client: pg.ClientBase, fn: () => Promise<unknown>): Promise<{ partitions: Touched[]; plain: string[] }> {
  const counts = async () => {
    const { rows } = await client.query<{ relid: number; relname: string; parent: string | null; n: string }>(
      `SELECT s.relid, s.relname, p.relname AS parent, s.seq_scan + coalesce(s.idx_scan, 0) + s.n_tup_ins + s.n_tup_upd + s.n_tup_del AS n
         FROM pg_stat_xact_user_tables s
         LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
         LEFT JOIN pg_class p ON p.oid = i.inhparent`,
    );
    return new Map(rows.map((r) => [r.relid, r]));
  };
  await client.query("BEGIN");
  try {
    const before = await counts();
    await fn();
    const rows = [...(await counts()).values()].filter((r) => Number(r.n) > Number(before.get(r.relid)?.n ?? 0)).sort((a, b) => a.relname.localeCompare(b.relname));
    return {
      partitions: rows
        .filter((r) => r.parent !== null)
        .map((r) => ({ parent: r.parent!, partition: r.relname, remainder: Number(/_p(\d+)$/.exec(r.relname)?.[1] ?? Number.NaN) })),
      plain: rows.filter((r) => r.parent === null).map((r) => r.relname),
    };
  } finally {
    await client.query("ROLLBACK");
  }
}

/** The remainders among `touched`. */
export const remainders = (touched: { partitions: Touched[] }): Set<number> => new Set(touched.partitions.map((t) => t.remainder));

/** The remainder `key` hashes to in `table` (of `schema`), asked of Postgres (`satisfies_hash_partition`). */
export async function remainderOf(db: Pick<pg.ClientBase, "query">, table: string, key: string, schema = "public"): Promise<number> {
  const { rows } = await db.query<{ r: number }>(
    `SELECT r FROM (SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = format('%I.%I', $1::text, $2::text)::regclass) c,
            generate_series(0, c.n - 1) r
      WHERE satisfies_hash_partition(format('%I.%I', $1::text, $2::text)::regclass, c.n, r, $3::text)`,
    [schema, table, key],
  );
  if (rows.length !== 1) throw new Error(`${schema}.${table} is not hash partitioned on one text column`);
  return rows[0]!.r;
}

/** A value in the text form pg sends it in (arrays as array literals, Buffers as bytea hex, objects as JSON). */
function textOf(value: unknown): string {
  if (Buffer.isBuffer(value)) return `\\x${value.toString("hex")}`;
  if (Array.isArray(value)) {
    const item = (x: unknown) => (x === null || x === undefined ? "NULL" : Array.isArray(x) ? textOf(x) : `"${textOf(x).replace(/[\\"]/g, (c) => `\\${c}`)}"`);
    return `{${value.map(item).join(",")}}`;
  }
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A value as pg sends it, written as an untyped SQL literal (Postgres casts it to the parameter's type). */
const literal = (value: unknown): string => (value === null || value === undefined ? "NULL" : pg.escapeLiteral(textOf(value)));

/**
 * The partitions an EXPLAIN scans (`Index Scan using ... on checkpoints_p3 c`), with their remainders; a
 * parent table never appears as a scan. Not the result relations an INSERT, UPDATE or DELETE lists
 * (`Update on checkpoint_blobs_p3 b_4`): a generic plan lists them all, and prunes what it scans.
 */
export function partitionsIn(plan: string): Touched[] {
  return plan
    .split("\n")
    .filter((line) => !/^\s*(->\s*)?(Insert|Update|Delete|Merge) on /.test(line))
    .flatMap((line) => [...line.matchAll(/ on (?:\w+\.)?(\w+)_p(\d+)\b/g)])
    .map((m) => ({ parent: m[1]!, partition: `${m[1]}_p${m[2]}`, remainder: Number(m[2]) }));
}

/**
 * The plan Postgres makes for a statement as sent (its text; its values as
 * the parameters), as a prepared statement whose parameter types the server
 * infers (as pg's are): a custom plan (the values known when it plans: pruning
 * at plan time) or a generic one (what a prepared statement runs after five
 * executions when it is cheaper: pruning when the executor starts). Without
 * ANALYZE: only what the planner and the executor's start keep is shown.
 */
export async function planOf(client: pg.ClientBase, statement: Sent, mode: "custom" | "generic"): Promise<string> {
  await client.query("BEGIN");
  try {
    await client.query(`SET LOCAL plan_cache_mode = force_${mode}_plan`);
    await client.query(`PREPARE audited AS ${statement.text}`);
    const args = statement.values.length ? `(${statement.values.map(literal).join(", ")})` : "";
    const { rows } = await client.query(`EXPLAIN (COSTS OFF) EXECUTE audited${args}`);
    return rows.map((r: Record<string, string>) => r["QUERY PLAN"]).join("\n");
  } finally {
    await client.query("ROLLBACK");
    await client.query("DEALLOCATE ALL"); // a prepared statement outlives the transaction
  }
}

/** The tables (and views) of `schema`, by name, without the partitions of partitioned ones (TEST_PARTITIONS makes them). */
export async function tableNames(db: Pick<pg.ClientBase, "query">, schema: string): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    "SELECT c.relname AS name FROM pg_class c WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition ORDER BY 1",
    [schema],
  );
  return rows.map((r) => r.name);
}
