/**
 * Recognising the official saver's tables: which schemas hold them, and
 * whether a schema's tables are exactly the layout one of its migrations
 * left (JS or Python), so adoption copies only what it understands.
 */
import type { Queryable } from "../db/db.js";
import { MigrationError, type OfficialTables } from "../errors.js";
import { quoteIdent } from "../validate.js";
import { ELEMENTS_CHANNEL } from "../saver/element-names.js";
import { JS_LAST, OFFICIAL_MIGRATIONS_TABLE, PY_LAST, PY_TASK_PATH, type Table, TABLES } from "../db/official.js";

interface ColumnSpec {
  type: string;
  notNull: boolean;
  default: string | null;
}

/** The official layout after migration `version` (JS 0..4 and Python 0..4 are the same). */
function expectedLayout(version: number): Record<Table, { columns: Record<string, ColumnSpec>; pk: string[] }> {
  const text = (notNull = true, def: string | null = null): ColumnSpec => ({ type: "text", notNull, default: def });
  const EMPTY_TEXT = "''::text";
  const writes: Record<string, ColumnSpec> = {
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
      pk: ["thread_id", "checkpoint_ns", "channel", "version"],
    },
    checkpoint_writes: { columns: writes, pk: ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"] },
  };
}

/**
 * Check that `from` holds the official saver's tables in a layout it leaves,
 * and say which saver and version. Throws a {@link MigrationError} saying what
 * was found otherwise. Reads only.
 */
export async function inspectOfficial(tx: Queryable, from: string): Promise<{ source: "js" | "python"; version: number }> {
  const names = [...TABLES, OFFICIAL_MIGRATIONS_TABLE];
  const refuse = (found: string, advice = "This is not a layout the official LangGraph Postgres saver leaves."): never => {
    throw new MigrationError(`Cannot adopt schema "${from}": it holds ${found}. ${advice} Nothing was changed.`, { migration: "adoption" });
  };
  const rels = (
    await tx.query<{ name: string; kind: string }>(
      `SELECT c.relname AS name, c.relkind::text AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relname = ANY ($2::text[])`,
      [from, names],
    )
  ).rows;
  if (rels.length === 0) refuse("none of the official saver's tables");
  const present = new Map(rels.map((r) => [r.name, r.kind]));
  for (const [name, kind] of present) if (kind !== "r") refuse(`"${name}", which is not a plain table (relkind ${kind})`);
  if (!present.has(OFFICIAL_MIGRATIONS_TABLE)) refuse(`table(s) ${[...present.keys()].join(", ")} but no ${OFFICIAL_MIGRATIONS_TABLE} table`);

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
      [from, names],
    )
  ).rows;
  const migrationColumns = columns.filter((c) => c.table === OFFICIAL_MIGRATIONS_TABLE);
  if (migrationColumns.length !== 1 || migrationColumns[0]!.column !== "v" || migrationColumns[0]!.type !== "integer") {
    refuse(`a ${OFFICIAL_MIGRATIONS_TABLE} table with columns (${migrationColumns.map((c) => `${c.column} ${c.type}`).join(", ")}), not (v integer)`);
  }
  const q = quoteIdent(from);
  const versions = (await tx.query<{ v: number }>(`SELECT v FROM ${q}.${OFFICIAL_MIGRATIONS_TABLE} ORDER BY v`)).rows.map((r) => r.v);
  const last = versions.length === 0 ? -1 : versions[versions.length - 1]!;
  const shown = versions.length === 0 ? "no versions" : `versions ${versions.join(", ")}`;
  if (!versions.every((v, i) => v === i)) refuse(`the official saver's ${OFFICIAL_MIGRATIONS_TABLE} with ${shown}, not a complete run 0..N`);
  if (last < JS_LAST) {
    refuse(
      `a partly migrated official saver schema (${OFFICIAL_MIGRATIONS_TABLE} has ${shown}; complete is 0..${JS_LAST}, or 0..${PY_LAST} for Python)`,
      "Run the official saver's setup() once to finish its own migrations, then adopt again.",
    );
  }
  if (last > PY_LAST) {
    refuse(
      `an official saver schema at version ${last}, newer than the versions this package can adopt (up to ${PY_LAST})`,
      "Upgrade langgraph-checkpoint-pg, or ask for support of this version.",
    );
  }
  for (const t of TABLES) if (!present.has(t)) refuse(`the official ${OFFICIAL_MIGRATIONS_TABLE} (${shown}) but no ${t} table`);

  // Columns: exactly the official layout of that version (a column we do not know is data we would not carry over).
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
      if (got.collation !== null && got.collation !== "default" && got.collation !== "C") problems.push(`${t}.${name} has collation "${got.collation}"`);
    }
    for (const extra of found.keys()) problems.push(`${t}.${extra} is not an official column`);
  }
  // Primary keys: the conflict targets of the official statements (and of a rollback's).
  const pks = (
    await tx.query<{ table: string; columns: string[] }>(
      `SELECT c.relname AS "table",
              ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(num, ord)
                      JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.num ORDER BY u.ord) AS columns
         FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE k.contype = 'p' AND n.nspname = $1 AND c.relname = ANY ($2::text[])`,
      [from, TABLES],
    )
  ).rows;
  for (const t of TABLES) {
    const pk = pks.find((k) => k.table === t);
    if (!pk || pk.columns.join(",") !== layout[t].pk.join(",")) {
      problems.push(`${t} has primary key ${pk ? `(${pk.columns.join(", ")})` : "none"}, expected (${layout[t].pk.join(", ")})`);
    }
  }
  if (problems.length > 0) refuse(`the official saver's tables at version ${last}, changed: ${problems.join("; ")}`);
  return { source: last > JS_LAST ? "python" : "js", version: last };
}

/**
 * Check that the rows of the official tables in `from` (whose layout
 * {@link inspectOfficial} checked) can be carried over as they are. Throws a
 * {@link MigrationError} saying what was found otherwise. Reads only: one
 * scan per table.
 */
export async function inspectOfficialRows(tx: Queryable, from: string): Promise<void> {
  const q = quoteIdent(from);
  const refuse = (found: string, advice: string): never => {
    throw new MigrationError(`Cannot adopt schema "${from}": it holds ${found}. ${advice} Nothing was changed.`, { migration: "adoption" });
  };
  const data = (
    await tx.query<{ typed_checkpoints: boolean; reserved_versions: boolean; reserved_blobs: boolean; untyped_writes: boolean }>(
      `SELECT c.typed AS typed_checkpoints, c.reserved AS reserved_versions,
              EXISTS (SELECT 1 FROM ${q}.checkpoint_blobs WHERE channel = '${ELEMENTS_CHANNEL}') AS reserved_blobs,
              EXISTS (SELECT 1 FROM ${q}.checkpoint_writes WHERE type IS NULL) AS untyped_writes
         FROM (SELECT coalesce(bool_or(type IS NOT NULL), false) AS typed, coalesce(bool_or(checkpoint -> 'channel_versions' ? '${ELEMENTS_CHANNEL}'), false) AS reserved
                 FROM ${q}.checkpoints) c`,
    )
  ).rows[0]!;
  if (data.typed_checkpoints) {
    refuse('checkpoints whose "type" column is set; neither official saver writes it, so something else did', "Adoption would not carry those values over.");
  }
  // Element rows are content-addressed: one copied in would be read in place of a value this package stores later (issue 26, row 4).
  if (data.reserved_versions || data.reserved_blobs) {
    refuse(
      `${data.reserved_blobs ? "checkpoint_blobs rows" : "checkpoints naming a channel"} called "${ELEMENTS_CHANNEL}", which this package reserves for its element rows; no LangGraph graph writes it, so something else did`,
      "Delete those rows, or adopt another copy.",
    );
  }
  if (data.untyped_writes) refuse("checkpoint_writes rows without a type; their values cannot be decoded by any saver", "This is not a layout the official LangGraph Postgres saver leaves.");
}
