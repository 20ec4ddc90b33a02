/**
 * Hash partitioning of a schema's tables by their thread key (issue 32), on
 * Postgres's own declarative partitioning: opt-in when a schema is first
 * migrated (`migrate({ partitions: 16 })`, `setup({ partitions })`, CLI
 * `migrate --partitions 16`), the same statements and guarantees after.
 *
 * Which tables: every table a migration of a track creates with the track's
 * key column, `thread_id` for the checkpointer's (checkpoints, writes, blobs,
 * heads, tombstones) and `ns_key` for the store's (items, vectors); each
 * into `count` partitions `<table>_p<i>` by `PARTITION BY HASH (<key>)`.
 * The same modulus on the same key puts a thread's rows of every table in the
 * partitions of one remainder. Bookkeeping without the key
 * (`checkpointer_retention`, the migrations tables) stays plain.
 *
 * Why a rule instead of partitioned copies of the migrations: the migration
 * files stay drizzle-kit output, one for both layouts (their checksums do not
 * change), and a migration added later that creates a table with the key is
 * partitioned without anyone remembering to (test/scaling/migrate.test.ts
 * applies the whole chain partitioned, and checks that every table with the
 * key is). What Postgres refuses on a partitioned table is rewritten here:
 * storage parameters (`ALTER TABLE ... SET (fillfactor = 70)`) are set on
 * each partition (a partitioned table has no storage of its own). Everything
 * else runs as written: Postgres applies `ADD COLUMN`, `CREATE INDEX` and row
 * triggers to every partition. What a new migration must respect is in docs/scaling-out.md: a unique index or key includes the key column, and no
 * statement reads system columns (`xmax`, `ctid`) of these tables.
 *
 * A schema's layout is decided when it is first created and read back from the
 * catalog afterwards (the number of partitions of the track's first table):
 * later migrations follow it, and asking for another one is refused
 * ({@link PartitionsMismatchError}), never ignored.
 */
import type { Queryable } from "./db.js";
import { InvalidOptionsError, PartitionsMismatchError } from "../errors.js";
import { quoteIdent } from "../validate.js";

/** The most partitions per table `partitions` accepts. */
export const MAX_PARTITIONS = 1024;

/**
 * A database or role setting (`ALTER DATABASE app SET langgraph_checkpoint_pg.partitions = 16`)
 * that a first migration without a `partitions` option follows: for deployments where the
 * application's own `setup()` or `open()` creates the schema. The option wins over it;
 * a schema that exists already keeps its layout whatever it says.
 */
export const PARTITIONS_SETTING = "langgraph_checkpoint_pg.partitions";

/**
 * How one track's tables are partitioned in a schema.
 *
 * @example
 * ```ts
 * const layout: Partitioning = { key: "thread_id", count: 16 };
 * ```
 */
export interface Partitioning {
  /** The column every partitioned table is hashed on. */
  readonly key: string;
  /** Partitions per table (the hash modulus). */
  readonly count: number;
}

/**
 * `partitions` checked: undefined (plain tables), or an integer from 2 to
 * {@link MAX_PARTITIONS}. Called before any SQL.
 *
 * @example
 * ```ts
 * checkPartitions(16); // 16
 * checkPartitions(1.5); // throws InvalidOptionsError naming "partitions"
 * ```
 */
export function checkPartitions(value: unknown, option = "partitions"): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 2 || value > MAX_PARTITIONS) {
    const got = typeof value === "number" || typeof value === "boolean" ? String(value) : typeof value === "string" ? JSON.stringify(value) : typeof value;
    throw new InvalidOptionsError(option, `expected an integer from 2 to ${MAX_PARTITIONS} (hash partitions per table), got ${got}`);
  }
  return value;
}

/** The name of partition `i` of `table`. */
export const partitionName = (table: string, i: number): string => `${table}_p${i}`;

/**
 * A `CREATE TABLE` statement made partitioned: the table hashed on the key,
 * then its partitions. `prefix` qualifies the names (`"agents".`, or `""` where
 * the search_path names the schema, as in migrations).
 *
 * @example
 * ```ts
 * partitionedCreate(`CREATE TABLE "t" ("thread_id" text PRIMARY KEY)`, "t", "", { key: "thread_id", count: 2 });
 * // [`CREATE TABLE "t" (...) PARTITION BY HASH ("thread_id")`, `CREATE TABLE "t_p0" PARTITION OF "t" FOR VALUES WITH (MODULUS 2, REMAINDER 0)`, ...]
 * ```
 */
export function partitionedCreate(create: string, table: string, prefix: string, layout: Partitioning): string[] {
  const parent = `${prefix}${quoteIdent(table)}`;
  return [
    `${create.trim().replace(/;\s*$/, "")} PARTITION BY HASH (${quoteIdent(layout.key)})`,
    ...Array.from(
      { length: layout.count },
      (_, i) => `CREATE TABLE ${prefix}${quoteIdent(partitionName(table, i))} PARTITION OF ${parent} FOR VALUES WITH (MODULUS ${layout.count}, REMAINDER ${i})`,
    ),
  ];
}

/** Leading comment lines, then `CREATE TABLE "name" (...)`: drizzle-kit's form, one statement per chunk. */
const CREATE_TABLE = /^((?:[ \t]*--[^\n]*\n)*)[ \t]*CREATE TABLE "([^"]+)" \(([\s\S]*)\)[ \t]*;?\s*$/;
/** `ALTER TABLE "name" SET (...)` / `RESET (...)`: storage parameters, which a partitioned table does not take. */
const STORAGE_PARAMETERS = /^((?:[ \t]*--[^\n]*\n)*)[ \t]*ALTER TABLE "([^"]+)" ((?:SET|RESET) \([^)]*\))[ \t]*;?\s*$/;

/**
 * The statements of a migration as they run on a schema whose tables are
 * partitioned by `layout` (see the top of this file); unchanged without one.
 * `partitioned` maps the schema's partitioned tables to their partition
 * counts, and learns the tables created here.
 *
 * @example
 * ```ts
 * partitionStatements(migration.statements, { key: "thread_id", count: 16 }, new Map());
 * ```
 */
export function partitionStatements(statements: readonly string[], layout: Partitioning | undefined, partitioned: Map<string, number>): string[] {
  if (!layout) return [...statements];
  const key = new RegExp(`(?:^|[\\s,(])${quoteIdent(layout.key)}\\s`);
  return statements.flatMap((statement) => {
    const create = CREATE_TABLE.exec(statement);
    if (create && key.test(create[3]!)) {
      partitioned.set(create[2]!, layout.count);
      return partitionedCreate(statement, create[2]!, "", layout);
    }
    const storage = STORAGE_PARAMETERS.exec(statement);
    const count = storage ? partitioned.get(storage[2]!) : undefined;
    if (storage && count !== undefined) {
      return Array.from({ length: count }, (_, i) => `${storage[1]}ALTER TABLE ${quoteIdent(partitionName(storage[2]!, i))} ${storage[3]}`);
    }
    return [statement];
  });
}

/**
 * The schema's partitioned tables (any relkind `p`) and their numbers of
 * partitions. Read-only.
 */
export async function partitionedTables(db: Queryable, schema: string): Promise<Map<string, number>> {
  const { rows } = await db.query<{ name: string; n: number }>(
    `SELECT c.relname AS name, (SELECT pg_catalog.count(*) FROM pg_catalog.pg_inherits i WHERE i.inhparent = c.oid)::int AS n
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind = 'p'`,
    [schema],
  );
  return new Map(rows.map((r) => [r.name, r.n]));
}

/** What a migration run does about partitioning: the layout of the track's tables, and every partitioned table of the schema. */
export interface PartitionPlan {
  layout: Partitioning | undefined;
  partitioned: Map<string, number>;
}

/**
 * The layout for a migration run of a track on `schema`, inside its
 * transaction. A track not migrated yet (`fresh`) gets the one asked for
 * (`requested`, else the {@link PARTITIONS_SETTING}), none by default. A track
 * migrated before keeps the layout its first table has; a different one asked
 * for is a {@link PartitionsMismatchError}.
 */
export async function planPartitions(
  tx: Queryable,
  schema: string,
  track: { name: "checkpointer" | "store"; partitionKey: string; firstTable: string },
  { requested, fresh }: { requested: number | undefined; fresh: boolean },
): Promise<PartitionPlan> {
  const partitioned = await partitionedTables(tx, schema);
  if (fresh) {
    const count = requested ?? (await settingPartitions(tx));
    return { layout: count === undefined ? undefined : { key: track.partitionKey, count }, partitioned };
  }
  const found = partitioned.get(track.firstTable);
  if (requested !== undefined && requested !== found) throw new PartitionsMismatchError(schema, track.name, requested, found ?? 0);
  return { layout: found === undefined ? undefined : { key: track.partitionKey, count: found }, partitioned };
}

/** The {@link PARTITIONS_SETTING} of the session (the database's or the role's), checked. */
async function settingPartitions(tx: Queryable): Promise<number | undefined> {
  const { rows } = await tx.query<{ v: string | null }>("SELECT pg_catalog.current_setting($1, true) AS v", [PARTITIONS_SETTING]);
  const text = rows[0]?.v?.trim();
  if (!text) return undefined;
  return checkPartitions(/^\d+$/.test(text) ? Number(text) : text, `${PARTITIONS_SETTING} (a database or role setting)`);
}
