/**
 * Adoption: taking over, in place, the tables of the official LangGraph
 * Postgres saver (`@langchain/langgraph-checkpoint-postgres`, or Python's
 * `langgraph-checkpoint-postgres`), which have the same names as ours.
 *
 * `migrate()` calls {@link planAdoption} inside its transaction, under its
 * lock, when the target schema has no `checkpointer_migrations` table yet. If
 * the official tables are there, the plan replaces our first migration
 * (`0000_init`, which would CREATE the tables) with statements that turn the
 * official tables into exactly what `0000_init` creates; `migrate()` then
 * records `0000_init` as applied and applies the later migrations as usual.
 * One transaction: either the whole switch happens or nothing does.
 *
 * What the statements do, and why each is safe for the data:
 * - add our columns (`row_version`, `is_head`, `created_at`, `metadata_raw`,
 *   `task_path` where missing) with constant defaults: no table rewrite;
 * - backfill `is_head` (per lineage, the greatest `checkpoint_id`: the
 *   checkpoint the official saver returns as latest, computed with the
 *   column's original collation) and `created_at` (the checkpoint's own `ts`);
 * - rename `blob` to `value`, relax / tighten NOT NULL where ours differs
 *   (refused beforehand if a row would violate it), drop `checkpoints.type`
 *   (refused beforehand unless every row holds NULL there: neither official
 *   saver ever writes it);
 * - key columns to `COLLATE "C"`: the stored bytes stay as they are (text to
 *   text is binary-coercible, so Postgres does not rewrite the table); only
 *   the primary-key indexes are rebuilt with byte-wise ordering, the ordering
 *   our reads and `before` cursors assume;
 * - drop the Python saver's `*_thread_id_idx` indexes (our primary keys lead
 *   with `thread_id`, so they are redundant) and create our head index
 *   (`0000_init`'s form; migration `0005_heads_table` then moves the heads
 *   into `checkpoint_heads`, as on any schema);
 * - retag Python's `"msgpack"` values as `"msgpack-py"` (its extension table
 *   differs from ours: see pyserde.ts) — the bytes are untouched;
 * - store the primitive channel values the Python saver keeps inline in the
 *   checkpoint JSONB as blobs too (type `"json"`, the same JSON text), so that
 *   checkpoints our saver writes on those threads, which refer to unchanged
 *   channels by version only, find them. The JSONB itself is not modified.
 *
 * Anything else is refused before the first statement, with an error that
 * says what was found: a partly migrated or newer official schema, unknown
 * columns or constraints, views or foreign keys on the tables.
 */
import type { Queryable } from "./db.js";
import { MigrationError } from "./errors.js";
import { PY_MSGPACK_TYPE } from "./pyserde.js";
import { quoteIdent } from "./validate.js";

/** The official savers' own migrations table (one integer column `v`). */
export const OFFICIAL_MIGRATIONS_TABLE = "checkpoint_migrations";

/** Both official savers record versions 0..4 (JS: all of its migrations); Python goes on to 9. */
const JS_LAST = 4;
const PY_LAST = 9;
/** Python migration 9 adds `checkpoint_writes.task_path`. */
const PY_TASK_PATH = 9;
/** Python migrations 6..8 create these (CONCURRENTLY, so one may be left invalid). */
const PY_THREAD_INDEXES: Record<string, string> = {
  checkpoints_thread_id_idx: "checkpoints",
  checkpoint_blobs_thread_id_idx: "checkpoint_blobs",
  checkpoint_writes_thread_id_idx: "checkpoint_writes",
};

const TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] as const;
type Table = (typeof TABLES)[number];

/** Which official saver left the schema, as far as its layout tells. */
export interface AdoptionSummary {
  /**
   * `"python"` when its migrations went past version 4 (only the Python saver
   * has those); `"js"` at version 4, which is also where Python savers before
   * its version 5 stopped: the layouts are identical, and so is the adoption.
   */
  source: "js" | "python";
  /** The highest version in the official `checkpoint_migrations` table. */
  officialVersion: number;
  /** The statements that replace `0000_init`, for a dry run's plan. */
  sql: string;
}

export interface AdoptionPlan extends AdoptionSummary {
  statements: string[];
}

interface Column {
  type: string;
  notNull: boolean;
  default: string | null;
}

const text = (notNull = true, dflt: string | null = null): Column => ({ type: "text", notNull, default: dflt });
const EMPTY_TEXT = "''::text";

/** The official layout at `version` (4..9). Keys: the columns whose collation becomes "C". */
function expectedLayout(version: number): Record<Table, { columns: Record<string, Column>; keys: string[]; pk: string[] }> {
  const writes: Record<string, Column> = {
    thread_id: text(),
    checkpoint_ns: text(true, EMPTY_TEXT),
    checkpoint_id: text(),
    task_id: text(),
    idx: { type: "integer", notNull: true, default: null },
    channel: text(),
    type: text(false),
    blob: { type: "bytea", notNull: true, default: null },
  };
  if (version >= PY_TASK_PATH) writes.task_path = text(true, EMPTY_TEXT);
  return {
    checkpoints: {
      columns: {
        thread_id: text(),
        checkpoint_ns: text(true, EMPTY_TEXT),
        checkpoint_id: text(),
        parent_checkpoint_id: text(false),
        type: text(false),
        checkpoint: { type: "jsonb", notNull: true, default: null },
        metadata: { type: "jsonb", notNull: true, default: "'{}'::jsonb" },
      },
      keys: ["thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id"],
      pk: ["thread_id", "checkpoint_ns", "checkpoint_id"],
    },
    checkpoint_blobs: {
      columns: {
        thread_id: text(),
        checkpoint_ns: text(true, EMPTY_TEXT),
        channel: text(),
        version: text(),
        type: text(),
        blob: { type: "bytea", notNull: false, default: null },
      },
      keys: ["thread_id", "checkpoint_ns", "channel", "version"],
      pk: ["thread_id", "checkpoint_ns", "channel", "version"],
    },
    checkpoint_writes: {
      columns: writes,
      keys: ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "channel", ...(version >= PY_TASK_PATH ? ["task_path"] : [])],
      pk: ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
    },
  };
}

/**
 * Inspect `schema` (inside the caller's transaction, under the migration lock).
 * Returns undefined when none of the official tables is there (a fresh schema),
 * a plan when they are there in a layout the official savers leave, and throws
 * a {@link MigrationError} saying what was found otherwise. Reads only.
 *
 * @example
 * ```ts
 * const plan = await planAdoption(tx, "public");
 * if (plan) console.log(`adopting the ${plan.source} saver's tables:\n${plan.sql}`);
 * ```
 */
export async function planAdoption(tx: Queryable, schema: string): Promise<AdoptionPlan | undefined> {
  const names = [...TABLES, OFFICIAL_MIGRATIONS_TABLE];
  const rels = (
    await tx.query<{ name: string; kind: string }>(
      `SELECT c.relname AS name, c.relkind::text AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relname = ANY ($2::text[])`,
      [schema, names],
    )
  ).rows;
  if (rels.length === 0) return undefined;

  const refuse = (found: string, advice = "This is not a layout the official LangGraph Postgres saver leaves."): never => {
    throw new MigrationError(
      `Schema "${schema}" has no ${"checkpointer_migrations"} table but holds ${found}. ${advice} Nothing was changed.`,
      { migration: "0000_init" },
    );
  };
  const present = new Map(rels.map((r) => [r.name, r.kind]));
  const listed = names.filter((n) => present.has(n)).join(", ");
  for (const [name, kind] of present) {
    if (kind !== "r") refuse(`"${name}", which is not a plain table (relkind ${kind})`);
  }
  if (!present.has(OFFICIAL_MIGRATIONS_TABLE)) refuse(`table(s) ${listed} but no ${OFFICIAL_MIGRATIONS_TABLE} table`);

  const q = quoteIdent(schema);
  const columns = (
    await tx.query<{ table: string; column: string; type: string; not_null: boolean; default: string | null; collation: string | null }>(
      `SELECT c.relname AS "table", a.attname AS "column", format_type(a.atttypid, a.atttypmod) AS type,
              a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS "default", co.collname AS collation
         FROM pg_attribute a
         JOIN pg_class c ON c.oid = a.attrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         LEFT JOIN pg_collation co ON co.oid = a.attcollation
        WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY c.relname, a.attnum`,
      [schema, names],
    )
  ).rows;
  const migrationColumns = columns.filter((c) => c.table === OFFICIAL_MIGRATIONS_TABLE);
  if (migrationColumns.length !== 1 || migrationColumns[0]!.column !== "v" || migrationColumns[0]!.type !== "integer") {
    refuse(`a ${OFFICIAL_MIGRATIONS_TABLE} table with columns (${migrationColumns.map((c) => `${c.column} ${c.type}`).join(", ")}), not (v integer)`);
  }
  const versions = (await tx.query<{ v: number }>(`SELECT v FROM ${q}.${OFFICIAL_MIGRATIONS_TABLE} ORDER BY v`)).rows.map((r) => r.v);
  const last = versions.length === 0 ? -1 : versions[versions.length - 1]!;
  const shown = versions.length === 0 ? "no versions" : `versions ${versions.join(", ")}`;
  if (!versions.every((v, i) => v === i)) {
    refuse(`the official saver's ${OFFICIAL_MIGRATIONS_TABLE} with ${shown}, not a complete run 0..N`);
  }
  if (last < JS_LAST) {
    refuse(
      `a partly migrated official saver schema (${OFFICIAL_MIGRATIONS_TABLE} has ${shown}; complete is 0..${JS_LAST}, or 0..${PY_LAST} for Python)`,
      "Run the official saver's setup() once to finish its own migrations, then run migrate again.",
    );
  }
  if (last > PY_LAST) {
    refuse(
      `an official saver schema at version ${last}, newer than the versions this package can adopt (up to ${PY_LAST})`,
      "Upgrade langgraph-checkpoint-pg, or ask for support of this version.",
    );
  }
  for (const t of TABLES) if (!present.has(t)) refuse(`the official ${OFFICIAL_MIGRATIONS_TABLE} (${shown}) but no ${t} table`);

  // Columns: exactly the official layout of that version.
  const layout = expectedLayout(last);
  const problems: string[] = [];
  for (const t of TABLES) {
    const found = new Map(columns.filter((c) => c.table === t).map((c) => [c.column, c]));
    for (const [name, want] of Object.entries(layout[t].columns)) {
      const got = found.get(name);
      if (!got) {
        problems.push(`${t}.${name} is missing`);
        continue;
      }
      found.delete(name);
      const gotDefault = got.default ?? null;
      if (got.type !== want.type || got.not_null !== want.notNull || gotDefault !== want.default) {
        problems.push(
          `${t}.${name} is ${got.type}${got.not_null ? " NOT NULL" : ""}${gotDefault ? ` DEFAULT ${gotDefault}` : ""}, ` +
            `expected ${want.type}${want.notNull ? " NOT NULL" : ""}${want.default ? ` DEFAULT ${want.default}` : ""}`,
        );
      }
      if (got.collation !== null && got.collation !== "default" && got.collation !== "C") {
        problems.push(`${t}.${name} has collation "${got.collation}"`);
      }
    }
    for (const extra of found.keys()) problems.push(`${t}.${extra} is not an official column`);
  }
  if (problems.length > 0) refuse(`the official saver's tables at version ${last}, changed: ${problems.join("; ")}`);

  // Constraints: the primary keys only (NOT NULL is a column property before Postgres 18, contype 'n' after).
  const constraints = (
    await tx.query<{ table: string; name: string; type: string; columns: string[]; foreign: boolean }>(
      `SELECT c.relname AS "table", k.conname AS name, k.contype::text AS type,
              ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(num, ord)
                      JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.num ORDER BY u.ord) AS columns,
              (k.confrelid <> 0 AND k.conrelid <> k.confrelid AND c.relname <> ALL ($2::text[])) AS "foreign"
         FROM pg_constraint k
         JOIN pg_class c ON c.oid = k.conrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE k.contype <> 'n'
          AND ((n.nspname = $1 AND c.relname = ANY ($2::text[]))
               OR k.confrelid IN (SELECT c2.oid FROM pg_class c2 JOIN pg_namespace n2 ON n2.oid = c2.relnamespace
                                   WHERE n2.nspname = $1 AND c2.relname = ANY ($2::text[])))`,
      [schema, TABLES],
    )
  ).rows;
  const renames: string[] = [];
  for (const t of TABLES) {
    const pks = constraints.filter((k) => k.table === t && k.type === "p" && !k.foreign);
    const want = layout[t].pk;
    if (pks.length !== 1 || pks[0]!.columns.join(",") !== want.join(",")) {
      problems.push(`${t} has primary key ${pks.length ? `(${pks[0]!.columns.join(", ")})` : "none"}, expected (${want.join(", ")})`);
    } else if (pks[0]!.name !== `${t}_pkey`) {
      renames.push(`ALTER TABLE ${q}.${t} RENAME CONSTRAINT ${quoteIdent(pks[0]!.name)} TO ${quoteIdent(`${t}_pkey`)}`);
    }
  }
  for (const k of constraints) {
    if (k.type === "p" && !k.foreign) continue;
    problems.push(k.foreign ? `foreign key ${k.name} on table ${k.table} references them` : `${k.table} has constraint ${k.name} (type ${k.type})`);
  }
  // Views (and rules) on the tables would block the key columns' collation change.
  const views = (
    await tx.query<{ name: string }>(
      `SELECT DISTINCT pg_catalog.format('%I.%I', vn.nspname, v.relname) AS name
         FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class v ON v.oid = r.ev_class
         JOIN pg_namespace vn ON vn.oid = v.relnamespace
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass AND v.oid <> d.refobjid
          AND d.refobjid IN (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]))`,
      [schema, TABLES],
    )
  ).rows;
  for (const v of views) problems.push(`view ${v.name} depends on them (drop it first, recreate it after)`);
  if (problems.length > 0) refuse(`the official saver's tables at version ${last}, with: ${problems.join("; ")}`);

  // Data that our NOT NULLs and the dropped column must not lose.
  const data = (
    await tx.query<{ typed_checkpoints: boolean; untyped_writes: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM ${q}.checkpoints WHERE type IS NOT NULL) AS typed_checkpoints,
              EXISTS (SELECT 1 FROM ${q}.checkpoint_writes WHERE type IS NULL) AS untyped_writes`,
    )
  ).rows[0]!;
  if (data.typed_checkpoints) {
    refuse(
      "checkpoints whose \"type\" column is set; neither official saver writes it, so something else did",
      "Adoption would drop that column: move those values elsewhere first.",
    );
  }
  if (data.untyped_writes) refuse("checkpoint_writes rows without a type; their values cannot be decoded by any saver");

  const indexes = (
    await tx.query<{ name: string; table: string; def: string }>(
      `SELECT i.relname AS name, t.relname AS "table", pg_get_indexdef(x.indexrelid) AS def
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = $1 AND t.relname = ANY ($2::text[]) AND NOT x.indisprimary`,
      [schema, TABLES],
    )
  ).rows;
  const dropIndexes = indexes
    .filter((i) => PY_THREAD_INDEXES[i.name] === i.table && / USING btree \(thread_id\)$/.test(i.def))
    .map((i) => `DROP INDEX ${q}.${quoteIdent(i.name)}`);

  const statements = adoptionStatements(q, last, renames, dropIndexes);
  const kept = indexes.filter((i) => !(PY_THREAD_INDEXES[i.name] === i.table && / USING btree \(thread_id\)$/.test(i.def)));
  const source = last > JS_LAST ? "python" : "js";
  const sql = [
    `-- Adopting the official LangGraph Postgres saver's tables (${OFFICIAL_MIGRATIONS_TABLE} at version ${last}: ${source === "python" ? "Python saver" : "JS saver, or a Python saver before its version 5"})`,
    "-- in place of 0000_init's CREATE TABLEs. Existing rows are kept; values are never re-encoded.",
    ...kept.map((i) => `-- keeping your index ${i.name}: ${i.def}`),
    ...statements.map((s) => `${s};`),
  ].join("\n");
  return { source, officialVersion: last, statements, sql };
}

function adoptionStatements(q: string, version: number, renames: string[], dropIndexes: string[]): string[] {
  const layout = expectedLayout(version);
  const collate = (t: Table) => layout[t].keys.map((k) => `ALTER COLUMN ${k} TYPE text COLLATE "C"`);
  const ts = "checkpoint ->> 'ts'";
  // ISO 8601 as both official savers write it (toISOString(), isoformat()); anything else keeps the adoption time.
  const isoTs = "'^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{1,9})?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'";
  const values = "c.checkpoint -> 'channel_values'";
  const version_ = "c.checkpoint -> 'channel_versions' ->> v.key";
  return [
    ...renames,
    ...dropIndexes,
    // checkpoints: our columns, backfilled while the keys still sort as the official saver sorted them.
    `ALTER TABLE ${q}.checkpoints
  ADD COLUMN metadata_raw bytea,
  ADD COLUMN is_head boolean DEFAULT false NOT NULL,
  ADD COLUMN row_version bigint DEFAULT 1 NOT NULL,
  ADD COLUMN created_at timestamp with time zone DEFAULT now() NOT NULL`,
    `UPDATE ${q}.checkpoints c
   SET is_head = (c.checkpoint_id = h.checkpoint_id),
       created_at = CASE WHEN c.${ts} ~ ${isoTs} THEN (c.${ts})::timestamptz ELSE c.created_at END
  FROM (SELECT DISTINCT ON (thread_id, checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id
          FROM ${q}.checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC) h
 WHERE c.thread_id = h.thread_id AND c.checkpoint_ns = h.checkpoint_ns`,
    `ALTER TABLE ${q}.checkpoints
  DROP COLUMN type,
  ${collate("checkpoints").join(",\n  ")}`,
    `CREATE UNIQUE INDEX checkpoints_one_head_per_lineage ON ${q}.checkpoints USING btree (thread_id, checkpoint_ns) WHERE is_head`,
    // blobs
    `ALTER TABLE ${q}.checkpoint_blobs RENAME COLUMN blob TO value`,
    `ALTER TABLE ${q}.checkpoint_blobs
  ${collate("checkpoint_blobs").join(",\n  ")},
  ADD COLUMN row_version bigint DEFAULT 1 NOT NULL`,
    `UPDATE ${q}.checkpoint_blobs SET type = '${PY_MSGPACK_TYPE}' WHERE type = 'msgpack'`,
    // Python keeps None/str/int/float/bool channel values inline in the checkpoint; a blob makes
    // them reachable by version (existing blobs win: a DeltaSnapshot leaves a `true` marker inline).
    `INSERT INTO ${q}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
SELECT DISTINCT ON (c.thread_id, c.checkpoint_ns, v.key, ${version_})
       c.thread_id, c.checkpoint_ns, v.key, ${version_}, 'json', convert_to(v.value::text, 'UTF8')
  FROM ${q}.checkpoints c
 CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(${values}) = 'object' THEN ${values} ELSE '{}'::jsonb END) AS v
 WHERE jsonb_typeof(v.value) IN ('string', 'number', 'boolean', 'null') AND ${version_} IS NOT NULL
ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`,
    // writes
    `ALTER TABLE ${q}.checkpoint_writes RENAME COLUMN blob TO value`,
    `ALTER TABLE ${q}.checkpoint_writes
  ALTER COLUMN value DROP NOT NULL,
  ALTER COLUMN type SET NOT NULL,
  ${collate("checkpoint_writes").join(",\n  ")},
  ${version >= PY_TASK_PATH ? "" : `ADD COLUMN task_path text COLLATE "C" DEFAULT '' NOT NULL,\n  `}ADD COLUMN row_version bigint DEFAULT 1 NOT NULL`,
    `UPDATE ${q}.checkpoint_writes SET type = '${PY_MSGPACK_TYPE}' WHERE type = 'msgpack'`,
    `COMMENT ON TABLE ${q}.${OFFICIAL_MIGRATIONS_TABLE} IS 'Migration history of the official LangGraph Postgres saver, kept for reference. ` +
      `This schema was adopted by langgraph-checkpoint-pg (see checkpointer_migrations): the official saver no longer works on these tables.'`,
  ];
}
