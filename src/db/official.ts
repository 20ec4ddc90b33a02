/**
 * The official LangGraph Postgres saver's tables, as the migrator meets them:
 * which schemas hold them (a schema being set up that holds them is refused,
 * others are said once: db/adopt-decision.ts), the adoption this package
 * records beside its own tables, the lock every migration and adoption step
 * of a schema takes, and the SQLSTATEs the adoption's triggers raise. The
 * adoption itself (copying, the bridge, finishing, rolling back) is the
 * operations wing's (src/ops/adopt*.ts), which the migrator is handed when
 * asked to adopt.
 */
import type { Queryable } from "./db.js";
import type { OfficialTables } from "../errors.js";
import { quoteIdent } from "../validate.js";

/** The official savers' own migrations table (one integer column `v`). */
export const OFFICIAL_MIGRATIONS_TABLE = "checkpoint_migrations";
/** Our record of an adoption, in our schema (one row). */
export const ADOPTION_TABLE = "checkpointer_adoption";

/** Both official savers record versions 0..4 (JS: all of its migrations); Python goes on to 9. */
export const JS_LAST = 4;
export const PY_LAST = 9;
/** Python migration 9 adds `checkpoint_writes.task_path`. */
export const PY_TASK_PATH = 9;

/** The official saver's tables: its layout, not ours (ours are named in db/names.ts), though the names coincide. */
export const TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] as const;
export type Table = (typeof TABLES)[number];

/** Every trigger this package puts on a table starts with this. */
export const TRIGGER_PREFIX = "langgraph_checkpoint_pg_";

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
  /** An official write continuing a thread that was deleted (saver/tombstones.ts). */
  threadDeleted: "LGB04",
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

/** What an adoption's plan is (src/ops/adopt-plan.ts): the statements to run, and the same as a readable plan. */
export interface AdoptionPlan {
  from: string;
  source: "js" | "python";
  officialVersion: number;
  statements: string[];
  sql: string;
}

/**
 * What the migrator runs to adopt the official tables when told to (`adopt`):
 * the operations wing's (src/ops/adopt-plan.ts), handed in by the entry points
 * that may adopt (`migrate()`, `PostgresSaver`'s `setup()`, the CLI's
 * `migrate --adopt`). The core holds no adoption of its own.
 */
export interface AdoptionStep {
  /** Whether `schema` holds no thread yet: an adoption copies into an empty schema only. */
  isEmpty(tx: Queryable, schema: string): Promise<boolean>;
  /** The statements that adopt the official tables of `from` into `schema` (`lock`: lock them first). */
  plan(tx: Queryable, schema: string, from: string, options: { lock: boolean }): Promise<AdoptionPlan>;
}
