/**
 * Hash partitioned schemas in tests (README "Scaling out"): which partitions a
 * statement really touched, read from Postgres's own per-transaction table
 * statistics, and which partition a key hashes to.
 *
 * `pg_stat_xact_user_tables` counts, for the current transaction only, every
 * scan started on a table (sequential or through one of its indexes) and every
 * row inserted, updated or deleted. A partition the planner pruned, at plan
 * time or when the executor starts or rescans a node, is never opened and
 * counts nothing; so the partitions with counts are exactly those the
 * statement read or wrote, whatever the shape of its plan.
 *
 * @example
 * ```ts
 * const touched = await touchedPartitions(client, () => client.query(sql, values));
 * expect(remainders(touched)).toEqual(new Set([await remainderOf(client, "checkpoints", "thread-1")]));
 * ```
 */
import type pg from "pg";

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
 */
export async function touchedPartitions(client: pg.ClientBase, fn: () => Promise<unknown>): Promise<{ partitions: Touched[]; plain: string[] }> {
  await client.query("BEGIN");
  try {
    await fn();
    const { rows } = await client.query<{ relname: string; parent: string | null }>(
      `SELECT s.relname, p.relname AS parent
         FROM pg_stat_xact_user_tables s
         LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
         LEFT JOIN pg_class p ON p.oid = i.inhparent
        WHERE s.seq_scan + coalesce(s.idx_scan, 0) + s.n_tup_ins + s.n_tup_upd + s.n_tup_del > 0
        ORDER BY 1`,
    );
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
