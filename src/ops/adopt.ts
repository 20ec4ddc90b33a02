/**
 * Adoption: switching from the official LangGraph Postgres saver
 * (`@langchain/langgraph-checkpoint-postgres`, or Python's
 * `langgraph-checkpoint-postgres`) while its instances keep running.
 *
 * The official saver's tables have the same names as ours, so ours live in
 * another schema and the official ones are never altered: no column, type,
 * index or row of theirs changes. Adoption (one transaction, under both
 * schemas' migration locks) only
 * - copies every official row into our schema (values are not re-encoded:
 *   JSON values of the JS saver and msgpack values of the Python saver are
 *   read as they are; Python's inline primitive values also get a blob);
 * - adds triggers to the official tables that copy, in the official writer's
 *   own transaction, every checkpoint, blob and write it stores afterwards
 *   (a checkpoint it acknowledges is in our schema when it commits), and its
 *   deletes; a write on a thread that our saver has continued since (its
 *   head there is not an official checkpoint) is refused with a clear error
 *   (SQLSTATE LGB01) instead of forking the thread behind its back;
 * - adds a trigger to our `checkpoint_heads` that deletes, in the official
 *   tables, a thread our saver deletes, so a rollback cannot bring it back.
 *
 * {@link finishAdoption} (all official instances replaced) turns the copying
 * triggers into guards that refuse every official write (SQLSTATE LGB02).
 * `rollbackAdoption` (rollback.ts) converts what our saver wrote back into the
 * official format, removes every trigger from the official tables, and makes
 * our tables refuse writes (SQLSTATE LGB03).
 *
 * Trigger functions live in our schema, run as their owner (SECURITY DEFINER,
 * fixed search_path), so official-saver roles need no privilege on our tables;
 * the session setting `langgraph_checkpoint_pg.bridge = off` (transaction-local)
 * lets our own statements pass without being copied back.
 */
import type { Queryable } from "../db/db.js";
import { MigrationError, type OfficialTables } from "../errors.js";
import { PY_MSGPACK_TYPE } from "../serde/pyserde.js";
import { quoteIdent } from "../validate.js";

/** The official savers' own migrations table (one integer column `v`). */
export const OFFICIAL_MIGRATIONS_TABLE = "checkpoint_migrations";
/** Our record of an adoption, in our schema (one row). */
export const ADOPTION_TABLE = "checkpointer_adoption";

/** Both official savers record versions 0..4 (JS: all of its migrations); Python goes on to 9. */
const JS_LAST = 4;
const PY_LAST = 9;
/** Python migration 9 adds `checkpoint_writes.task_path`. */
const PY_TASK_PATH = 9;

const TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] as const;
type Table = (typeof TABLES)[number];
/** The official put writes blobs, then the checkpoint; deleteThread blobs, checkpoints, writes: lock in that order. */
const OFFICIAL_LOCK_ORDER: readonly Table[] = ["checkpoint_blobs", "checkpoints", "checkpoint_writes"];

/** Every trigger this package puts on a table starts with this. */
const TRIGGER_PREFIX = "langgraph_checkpoint_pg_";
const BRIDGE = `${TRIGGER_PREFIX}bridge`;
const BRIDGE_DELETE = `${TRIGGER_PREFIX}bridge_delete`;
const GUARD = `${TRIGGER_PREFIX}guard`;
const FORGET = `${TRIGGER_PREFIX}forget`;
const ROLLED_BACK = `${TRIGGER_PREFIX}rolled_back`;
/** Transaction-local switch: `off` while our own statements write the other side. */
export const BRIDGE_SETTING = "langgraph_checkpoint_pg.bridge";

/**
 * SQLSTATEs the adoption's triggers raise.
 *
 * @example
 * ```ts
 * catch (e) { if ((e as { code?: string }).code === ADOPTION_SQLSTATE.threadMovedOn) retryOnAnUpgradedInstance(); }
 * ```
 */
export const ADOPTION_SQLSTATE = {
  /** An official write on a thread our saver has continued since the switch. */
  threadMovedOn: "LGB01",
  /** An official write after the switch was finished. */
  finished: "LGB02",
  /** A write to our schema after it was rolled back. */
  rolledBack: "LGB03",
} as const;

export type AdoptionState = "bridging" | "finished" | "rolled-back";

/** An adoption as recorded in our schema. */
export interface AdoptionRecord {
  /** The schema holding the official tables. */
  from: string;
  source: "js" | "python";
  officialVersion: number;
  state: AdoptionState;
  adoptedAt: string;
  finishedAt: string | null;
  rolledBackAt: string | null;
}

/** What `migrate({ adopt })` did (or, in a dry run, would do). */
export interface AdoptionSummary {
  from: string;
  source: "js" | "python";
  officialVersion: number;
  /** False when the schema had adopted `from` already (nothing was done again). */
  adopted: boolean;
  /** The statements, as a plan a DBA can read. */
  sql: string;
}

/** What {@link planAdoption} returns: the statements to run, and the same as a readable plan. */
export interface AdoptionPlan {
  from: string;
  source: "js" | "python";
  officialVersion: number;
  statements: string[];
  sql: string;
}

const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** A dollar-quoted body whose tag does not occur in it (schema names may hold `$`). */
function dollar(body: string): string {
  let tag = "$body$";
  for (let i = 0; body.includes(tag); i++) tag = `$body${i}$`;
  return `${tag}${body}${tag}`;
}

/** `statements` run with the bridge switched off (our own writes to the other side), then restored. */
const quiet = (statements: string) => `
  prev := current_setting('${BRIDGE_SETTING}', true);
  PERFORM set_config('${BRIDGE_SETTING}', 'off', true);
${statements}
  PERFORM set_config('${BRIDGE_SETTING}', coalesce(prev, ''), true);`;

const skipWhenQuiet = `IF current_setting('${BRIDGE_SETTING}', true) = 'off' THEN RETURN NULL; END IF;`;

function fn(schema: string, name: string, body: string, declare = ""): string {
  return `CREATE OR REPLACE FUNCTION ${quoteIdent(schema)}.${name}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS ${dollar(`
${declare ? `DECLARE ${declare}\n` : ""}BEGIN
  ${body}
  RETURN NULL;
END`)}`;
}

/**
 * The official tables of every schema in the database (their
 * `checkpoint_migrations` and `checkpoints` tables), except schemas already
 * adopted by this package (their tables carry our triggers, or an earlier
 * release converted them in place). Reads only.
 *
 * @example
 * ```ts
 * const found = await findOfficialTables(tx);
 * if (found.length > 0) console.log(found.map((f) => `${f.schema}: ${f.source} v${f.officialVersion}`));
 * ```
 */
export async function findOfficialTables(tx: Queryable): Promise<OfficialTables[]> {
  const { rows } = await tx.query<{ schema: string; readable: boolean; adopted: boolean }>(
    `SELECT n.nspname AS schema, has_table_privilege(c.oid, 'SELECT') AS readable,
            EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c3 ON c3.oid = t.tgrelid
                     WHERE c3.relnamespace = n.oid AND c3.relname = 'checkpoints' AND t.tgname LIKE '${TRIGGER_PREFIX}%') AS adopted
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relname = '${OFFICIAL_MIGRATIONS_TABLE}' AND c.relkind IN ('r', 'p')
        AND EXISTS (SELECT 1 FROM pg_class c2 WHERE c2.relnamespace = n.oid AND c2.relname = 'checkpoints')
        -- Adopted in place by an earlier release (the official history kept beside ours): ours now.
        AND NOT EXISTS (SELECT 1 FROM pg_class c4 WHERE c4.relnamespace = n.oid AND c4.relname = 'checkpointer_migrations')
      ORDER BY n.nspname`,
  );
  const found: OfficialTables[] = [];
  for (const r of rows) {
    if (r.adopted) continue;
    let version = -1;
    if (r.readable) {
      // to_jsonb: no error (which would abort the caller's transaction) whatever the columns are.
      const v = await tx.query<{ v: number | null }>(
        `SELECT max(CASE WHEN to_jsonb(m) ->> 'v' ~ '^[0-9]{1,9}$' THEN (to_jsonb(m) ->> 'v')::int END) AS v
           FROM ${quoteIdent(r.schema)}.${OFFICIAL_MIGRATIONS_TABLE} m`,
      );
      version = v.rows[0]?.v ?? -1;
    }
    found.push({ schema: r.schema, source: version > JS_LAST ? "python" : "js", officialVersion: version });
  }
  return found;
}

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
async function inspectOfficial(tx: Queryable, from: string): Promise<{ source: "js" | "python"; version: number }> {
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

  const data = (
    await tx.query<{ typed_checkpoints: boolean; untyped_writes: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM ${q}.checkpoints WHERE type IS NOT NULL) AS typed_checkpoints,
              EXISTS (SELECT 1 FROM ${q}.checkpoint_writes WHERE type IS NULL) AS untyped_writes`,
    )
  ).rows[0]!;
  if (data.typed_checkpoints) {
    refuse('checkpoints whose "type" column is set; neither official saver writes it, so something else did', "Adoption would not carry those values over.");
  }
  if (data.untyped_writes) refuse("checkpoint_writes rows without a type; their values cannot be decoded by any saver");
  return { source: last > JS_LAST ? "python" : "js", version: last };
}

/** The adoption recorded in `schema`, if any. */
export async function readAdoption(tx: Queryable, schema: string): Promise<AdoptionRecord | undefined> {
  const t = `${quoteIdent(schema)}.${ADOPTION_TABLE}`;
  const exists = (await tx.query<{ ok: boolean }>("SELECT to_regclass($1) IS NOT NULL AS ok", [t])).rows[0]!.ok;
  if (!exists) return undefined;
  const { rows } = await tx.query<{
    from: string;
    source: "js" | "python";
    official_version: number;
    state: AdoptionState;
    adopted_at: string;
    finished_at: string | null;
    rolled_back_at: string | null;
  }>(
    `SELECT source_schema AS "from", source, official_version, state, to_json(adopted_at) #>> '{}' AS adopted_at,
            to_json(finished_at) #>> '{}' AS finished_at, to_json(rolled_back_at) #>> '{}' AS rolled_back_at FROM ${t}`,
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    from: r.from,
    source: r.source,
    officialVersion: r.official_version,
    state: r.state,
    adoptedAt: r.adopted_at,
    finishedAt: r.finished_at,
    rolledBackAt: r.rolled_back_at,
  };
}

/** Per database and schema, the same key as `migrate`'s: adoption work on a schema queues behind its migrations. */
export const SCHEMA_LOCK_SQL =
  "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('langgraph-checkpoint-pg:migrate'), " +
  "pg_catalog.hashtext(pg_catalog.concat(pg_catalog.current_database(), '.', $1::text)))";

/**
 * Lock the official tables, in the official saver's own order (no deadlock
 * with its put): against writers (`SHARE ROW EXCLUSIVE`, what CREATE TRIGGER
 * takes: official reads go on), or against everyone (`ACCESS EXCLUSIVE`, what
 * DROP TRIGGER takes: taken up front, never upgraded, which could deadlock).
 */
export function lockOfficial(from: string, mode: "SHARE ROW EXCLUSIVE" | "ACCESS EXCLUSIVE"): string {
  return `LOCK TABLE ${OFFICIAL_LOCK_ORDER.map((t) => `${quoteIdent(from)}.${t}`).join(", ")} IN ${mode} MODE`;
}

/**
 * Plan the adoption of the official tables in `from` into `schema` (whose
 * tables `migrate` has just created, inside the same transaction): the
 * statements that copy the rows, install the triggers and record the
 * adoption. Throws a {@link MigrationError} for a layout it does not know.
 * Reads only.
 *
 * @example
 * ```ts
 * const plan = await planAdoption(tx, "langgraph", "public");
 * console.log(plan.sql);
 * ```
 */
export async function planAdoption(tx: Queryable, schema: string, from: string): Promise<AdoptionPlan> {
  if (from === schema) {
    throw new MigrationError(
      `Cannot adopt schema "${from}" into itself: the official tables and this package's have the same names. Choose another schema for this saver. Nothing was changed.`,
      { migration: "adoption" },
    );
  }
  const { source, version } = await inspectOfficial(tx, from);
  const { rows: triggers } = await tx.query<{ name: string; table: string }>(
    `SELECT t.tgname AS name, c.relname AS "table" FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND t.tgname LIKE '${TRIGGER_PREFIX}%'`,
    [from, TABLES],
  );
  if (triggers.length > 0) {
    throw new MigrationError(
      `Cannot adopt schema "${from}": another schema adopted it already (its tables carry trigger ${triggers[0]!.name}). Nothing was changed.`,
      { migration: "adoption" },
    );
  }
  const statements = bridgeStatements(schema, from, source, version);
  const sql = [
    `-- Adopting the official LangGraph Postgres saver's tables in schema ${quoteIdent(from)} (${OFFICIAL_MIGRATIONS_TABLE} at version ${version}: ` +
      `${source === "python" ? "Python saver" : "JS saver, or a Python saver before its version 5"}) into schema ${quoteIdent(schema)}.`,
    "-- The official tables keep their columns, indexes and rows; they get triggers that copy what official instances",
    "-- still write (until `migrate --finish-adoption`). Runs in the migration transaction; official writers wait meanwhile.",
    ...statements.map((s) => `${s};`),
  ].join("\n");
  return { from, source, officialVersion: version, statements, sql };
}

/** Our schema is empty (nothing to mix the official rows with). */
export async function isEmpty(tx: Queryable, schema: string): Promise<boolean> {
  const q = quoteIdent(schema);
  const { rows } = await tx.query<{ used: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ${q}.checkpoints) OR EXISTS (SELECT 1 FROM ${q}.checkpoint_heads)
         OR EXISTS (SELECT 1 FROM ${q}.checkpoint_writes) OR EXISTS (SELECT 1 FROM ${q}.checkpoint_blobs) AS used`,
  );
  return !rows[0]!.used;
}

function bridgeStatements(schema: string, from: string, source: "js" | "python", version: number): string[] {
  const t = quoteIdent(schema);
  const s = quoteIdent(from);
  const python = source === "python";
  const taskPath = version >= PY_TASK_PATH;
  /** Python's msgpack differs from ours (extension types): tagged apart, bytes untouched. */
  const retag = (col: string) => (python ? `CASE ${col} WHEN 'msgpack' THEN '${PY_MSGPACK_TYPE}' ELSE ${col} END` : col);
  // ISO 8601 as both official savers write `ts` (toISOString(), isoformat()); anything else: the adoption time.
  const isoTs = "'^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{1,9})?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'";
  const createdAt = (cp: string) => `CASE WHEN ${cp} ->> 'ts' ~ ${isoTs} THEN (${cp} ->> 'ts')::timestamptz ELSE now() END`;
  /** Python keeps None/str/int/float/bool channel values inline in the checkpoint: a blob makes them reachable by version. */
  const inlineBlobs = (rows: string, alias: string) => `INSERT INTO ${t}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
SELECT DISTINCT ON (${alias}.thread_id, ${alias}.checkpoint_ns, v.key, ${alias}.checkpoint -> 'channel_versions' ->> v.key)
       ${alias}.thread_id, ${alias}.checkpoint_ns, v.key, ${alias}.checkpoint -> 'channel_versions' ->> v.key, 'json', convert_to(v.value::text, 'UTF8')
  FROM ${rows}
 CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(${alias}.checkpoint -> 'channel_values') = 'object'
                                    THEN ${alias}.checkpoint -> 'channel_values' ELSE '{}'::jsonb END) AS v
 WHERE jsonb_typeof(v.value) IN ('string', 'number', 'boolean', 'null') AND ${alias}.checkpoint -> 'channel_versions' ->> v.key IS NOT NULL
ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`;
  /** A trigger not consumed yet (`__start__`, `branch:to:*` with a value): the head still has tasks to run (linear mode). */
  const pending = (cp: string, thread: string, ns: string) => `EXISTS (
    SELECT 1 FROM jsonb_each_text(${cp} -> 'channel_versions') AS cv(channel, version)
      JOIN ${t}.checkpoint_blobs b ON b.thread_id = ${thread} AND b.checkpoint_ns = ${ns} AND b.channel = cv.channel AND b.version = cv.version
     WHERE (cv.channel = '__start__' OR cv.channel LIKE 'branch:to:%') AND b.type <> 'empty')`;
  /** Key equality across the two schemas' collations, in the one whose index serves it (idx is an integer). */
  const eq = (a: string, b: string, cols: string[], collate: string) =>
    cols.map((c) => (c === "idx" ? `${a}.idx = ${b}.idx` : `${a}.${c} = ${b}.${c} COLLATE ${collate}`)).join(" AND ");
  const lineage = ["thread_id", "checkpoint_ns"];
  const keys = {
    checkpoints: [...lineage, "checkpoint_id"],
    checkpoint_blobs: [...lineage, "channel", "version"],
    checkpoint_writes: [...lineage, "checkpoint_id", "task_id", "idx"],
  };
  const movedOn = `format('langgraph-checkpoint-pg: thread %s (namespace %s) was continued by langgraph-checkpoint-pg in schema %s after the switch; ` +
    `this official-saver instance would fork it from an older checkpoint. Nothing was written. Retry the request on an upgraded instance.', ` +
    `to_json(NEW.thread_id), to_json(NEW.checkpoint_ns), ${lit(quoteIdent(schema))})`;

  return [
    `CREATE TABLE ${t}.${ADOPTION_TABLE} (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  source_schema text NOT NULL,
  source text NOT NULL,
  official_version integer NOT NULL,
  state text NOT NULL CHECK (state IN ('bridging', 'finished', 'rolled-back')),
  adopted_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  rolled_back_at timestamptz
)`,
    `INSERT INTO ${t}.${ADOPTION_TABLE} (source_schema, source, official_version, state) VALUES (${lit(from)}, ${lit(source)}, ${version}, 'bridging')`,
    // Official writers wait from here to the commit: every row is either copied below or by the triggers.
    lockOfficial(from, "SHARE ROW EXCLUSIVE"),
    `INSERT INTO ${t}.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, created_at)
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, ${createdAt("checkpoint")} FROM ${s}.checkpoints`,
    `INSERT INTO ${t}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
SELECT thread_id, checkpoint_ns, channel, version, ${retag("type")}, blob FROM ${s}.checkpoint_blobs`,
    ...(python ? [inlineBlobs(`${t}.checkpoints c`, "c")] : []),
    `INSERT INTO ${t}.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path)
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, ${retag("type")}, blob, ${taskPath ? "task_path" : "''"} FROM ${s}.checkpoint_writes`,
    // One head per lineage: the greatest checkpoint id in the official column's own collation (what the official saver returns as latest).
    `INSERT INTO ${t}.checkpoint_heads (thread_id, checkpoint_ns, checkpoint_id, moved_at)
SELECT DISTINCT ON (thread_id, checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id, ${createdAt("checkpoint")}
  FROM ${s}.checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC`,
    `UPDATE ${t}.checkpoint_heads h SET has_pending_tasks = true
  FROM ${t}.checkpoints c
 WHERE c.thread_id = h.thread_id AND c.checkpoint_ns = h.checkpoint_ns AND c.checkpoint_id = h.checkpoint_id
   AND ${pending("c.checkpoint", "c.thread_id", "c.checkpoint_ns")}`,
    `UPDATE ${t}.checkpoints c SET has_pending_tasks = true
  FROM ${t}.checkpoint_heads h
 WHERE c.thread_id = h.thread_id AND c.checkpoint_ns = h.checkpoint_ns AND c.checkpoint_id = h.checkpoint_id AND h.has_pending_tasks`,
    // What official instances write from now on, copied in their own transactions.
    fn(
      schema,
      "checkpointer_bridge_blob",
      `${skipWhenQuiet}
  -- The lineage head first: the lock order of this package's put (head, then blobs and row).
  PERFORM 1 FROM ${t}.checkpoint_heads WHERE thread_id = NEW.thread_id AND checkpoint_ns = NEW.checkpoint_ns FOR UPDATE;
  INSERT INTO ${t}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
  VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.channel, NEW.version, ${retag("NEW.type")}, NEW.blob)
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING;`,
    ),
    fn(
      schema,
      "checkpointer_bridge_checkpoint",
      `${skipWhenQuiet}
  SELECT h.checkpoint_id INTO head FROM ${t}.checkpoint_heads h
   WHERE h.thread_id = NEW.thread_id AND h.checkpoint_ns = NEW.checkpoint_ns FOR UPDATE;
  -- Our saver wrote the head (it is not an official row): this instance read an older state.
  IF head IS NOT NULL AND head <> NEW.checkpoint_id AND NOT EXISTS (
       SELECT 1 FROM ${s}.checkpoints o WHERE o.thread_id = NEW.thread_id AND o.checkpoint_ns = NEW.checkpoint_ns AND o.checkpoint_id = head) THEN
    RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.threadMovedOn}', MESSAGE = ${movedOn};
  END IF;
  ${python ? `${inlineBlobs("(SELECT NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint) AS n(thread_id, checkpoint_ns, checkpoint)", "n")};` : ""}
  tasks := ${pending("NEW.checkpoint", "NEW.thread_id", "NEW.checkpoint_ns")};
  INSERT INTO ${t}.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, created_at, has_pending_tasks)
  VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.parent_checkpoint_id, NEW.checkpoint, NEW.metadata, ${createdAt("NEW.checkpoint")}, tasks)
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
     SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata,
         metadata_raw = NULL, has_pending_tasks = EXCLUDED.has_pending_tasks, row_version = c.row_version + 1;
  -- Every official put becomes the head, with or without new blobs (as it becomes the official saver's latest).
  INSERT INTO ${t}.checkpoint_heads AS h (thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks)
  VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, tasks)
  ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE
     SET checkpoint_id = EXCLUDED.checkpoint_id, has_pending_tasks = EXCLUDED.has_pending_tasks, moved_at = now(), row_version = h.row_version + 1;`,
      "head text; tasks boolean;",
    ),
    fn(
      schema,
      "checkpointer_bridge_write",
      `${skipWhenQuiet}
  -- Writes on a thread our saver continued would be replayed from an older checkpoint: refused too.
  SELECT h.checkpoint_id INTO head FROM ${t}.checkpoint_heads h WHERE h.thread_id = NEW.thread_id AND h.checkpoint_ns = NEW.checkpoint_ns;
  IF head IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM ${s}.checkpoints o WHERE o.thread_id = NEW.thread_id AND o.checkpoint_ns = NEW.checkpoint_ns AND o.checkpoint_id = head) THEN
    RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.threadMovedOn}', MESSAGE = ${movedOn};
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO ${t}.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path)
    VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.task_id, NEW.idx, NEW.channel, ${retag("NEW.type")}, NEW.blob, ${taskPath ? "NEW.task_path" : "''"})
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING;
  ELSE
    INSERT INTO ${t}.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path)
    VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.task_id, NEW.idx, NEW.channel, ${retag("NEW.type")}, NEW.blob, ${taskPath ? "NEW.task_path" : "''"})
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
       SET channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value, task_path = EXCLUDED.task_path, row_version = w.row_version + 1;
  END IF;`,
      "head text;",
    ),
    ...TABLES.map((table) =>
      fn(
        schema,
        `checkpointer_bridge_delete_${table}`,
        `${skipWhenQuiet}${quiet(`
  DELETE FROM ${t}.${table} x USING gone g WHERE ${eq("x", "g", keys[table], '"C"')};${
    table === "checkpoints"
      ? `
  -- Lineages the official saver emptied (its deleteThread): this package's rows on them go too.
  WITH emptied AS (SELECT DISTINCT g.thread_id, g.checkpoint_ns FROM gone g
                    WHERE NOT EXISTS (SELECT 1 FROM ${s}.checkpoints o WHERE o.thread_id = g.thread_id AND o.checkpoint_ns = g.checkpoint_ns)),
       h AS (DELETE FROM ${t}.checkpoint_heads x USING emptied e WHERE ${eq("x", "e", lineage, '"C"')}),
       c AS (DELETE FROM ${t}.checkpoints x USING emptied e WHERE ${eq("x", "e", lineage, '"C"')}),
       w AS (DELETE FROM ${t}.checkpoint_writes x USING emptied e WHERE ${eq("x", "e", lineage, '"C"')})
  DELETE FROM ${t}.checkpoint_blobs x USING emptied e WHERE ${eq("x", "e", lineage, '"C"')};`
      : ""
  }`)}`,
        "prev text;",
      ),
    ),
    fn(
      schema,
      "checkpointer_forget_official",
      `${skipWhenQuiet}${quiet(`
  -- A lineage this package deleted (deleteThread, prune of a whole thread): its official copy goes too,
  -- so a rollback does not bring it back.
  DELETE FROM ${s}.checkpoint_writes x USING gone g WHERE ${eq("x", "g", lineage, '"default"')};
  DELETE FROM ${s}.checkpoint_blobs x USING gone g WHERE ${eq("x", "g", lineage, '"default"')};
  DELETE FROM ${s}.checkpoints x USING gone g WHERE ${eq("x", "g", lineage, '"default"')};`)}`,
      "prev text;",
    ),
    ...TABLES.map((table) =>
      table === "checkpoint_writes"
        ? `CREATE TRIGGER ${BRIDGE} AFTER INSERT OR UPDATE ON ${s}.${table} FOR EACH ROW EXECUTE FUNCTION ${t}.checkpointer_bridge_write()`
        : `CREATE TRIGGER ${BRIDGE} AFTER INSERT OR UPDATE ON ${s}.${table} FOR EACH ROW EXECUTE FUNCTION ${t}.checkpointer_bridge_${table === "checkpoints" ? "checkpoint" : "blob"}()`,
    ),
    ...TABLES.map(
      (table) =>
        `CREATE TRIGGER ${BRIDGE_DELETE} AFTER DELETE ON ${s}.${table} REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_bridge_delete_${table}()`,
    ),
    `CREATE TRIGGER ${FORGET} AFTER DELETE ON ${t}.checkpoint_heads REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_forget_official()`,
  ];
}

/**
 * The statements that finish an adoption: the official tables stop being
 * copied and refuse every write from then on (official instances still
 * running fail with SQLSTATE LGB02 and a message saying so).
 */
export function finishStatements(schema: string, from: string): string[] {
  const t = quoteIdent(schema);
  const s = quoteIdent(from);
  const message =
    `format('langgraph-checkpoint-pg: schema %s was adopted into schema %s and the switch is finished: the official saver must not write here any more ` +
    `(this instance was not replaced). Nothing was written. Replace it, or roll back with: npx langgraph-checkpoint-pg migrate --schema %s --rollback-adoption', ` +
    `${lit(quoteIdent(from))}, ${lit(quoteIdent(schema))}, ${lit(schema)})`;
  return [
    lockOfficial(from, "ACCESS EXCLUSIVE"),
    fn(schema, "checkpointer_guard_official", `${skipWhenQuiet}\n  RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.finished}', MESSAGE = ${message};`),
    ...TABLES.flatMap((table) => [
      `DROP TRIGGER IF EXISTS ${BRIDGE} ON ${s}.${table}`,
      `DROP TRIGGER IF EXISTS ${BRIDGE_DELETE} ON ${s}.${table}`,
      `CREATE TRIGGER ${GUARD} BEFORE INSERT OR UPDATE OR DELETE ON ${s}.${table} FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_guard_official()`,
    ]),
    `UPDATE ${t}.${ADOPTION_TABLE} SET state = 'finished', finished_at = now()`,
  ];
}

/**
 * After a rollback's conversion: the official tables carry none of our
 * triggers any more, and ours refuse every write (SQLSTATE LGB03), so an
 * instance of this package still running cannot write where the official
 * saver does not look.
 */
export function rollbackStatements(schema: string, from: string): string[] {
  const t = quoteIdent(schema);
  const s = quoteIdent(from);
  const message =
    `format('langgraph-checkpoint-pg: schema %s was rolled back to the official saver in schema %s: it refuses writes. Nothing was written.', ` +
    `${lit(quoteIdent(schema))}, ${lit(quoteIdent(from))})`;
  return [
    fn(schema, "checkpointer_guard_rolled_back", `${skipWhenQuiet}\n  RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.rolledBack}', MESSAGE = ${message};`),
    ...TABLES.flatMap((table) => [
      `DROP TRIGGER IF EXISTS ${BRIDGE} ON ${s}.${table}`,
      `DROP TRIGGER IF EXISTS ${BRIDGE_DELETE} ON ${s}.${table}`,
      `DROP TRIGGER IF EXISTS ${GUARD} ON ${s}.${table}`,
    ]),
    `DROP TRIGGER IF EXISTS ${FORGET} ON ${t}.checkpoint_heads`,
    ...["checkpoint_heads", ...TABLES].flatMap((table) => [
      `DROP TRIGGER IF EXISTS ${ROLLED_BACK} ON ${t}.${table}`,
      `CREATE TRIGGER ${ROLLED_BACK} BEFORE INSERT OR UPDATE OR DELETE ON ${t}.${table} FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_guard_rolled_back()`,
    ]),
    `UPDATE ${t}.${ADOPTION_TABLE} SET state = 'rolled-back', rolled_back_at = now()`,
  ];
}
