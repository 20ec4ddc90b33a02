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
 * only the owner may EXECUTE them, and each runs only as the trigger it was
 * made for. No switch lets a statement pass a trigger unseen (a setting would
 * be one any client could set): deletes echo between the two sides until one
 * finds nothing left, and a rollback removes the triggers before it writes.
 *
 * This file holds what every step shares (the records, the locks, the
 * names); the steps are in adopt-official.ts (recognising the official
 * tables), adopt-plan.ts (the plan `migrate` runs), adopt-bridge.ts (the
 * triggers' SQL), adopt-steps.ts (status, finish) and rollback.ts.
 */
import type { Queryable } from "../db/db.js";
import type { CompactResult } from "./compact.js";
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
/** The official put writes blobs, then the checkpoint; deleteThread blobs, checkpoints, writes: lock in that order. */
const OFFICIAL_LOCK_ORDER: readonly Table[] = ["checkpoint_blobs", "checkpoints", "checkpoint_writes"];

/** Every trigger this package puts on a table starts with this. */
export const TRIGGER_PREFIX = "langgraph_checkpoint_pg_";
export const BRIDGE = `${TRIGGER_PREFIX}bridge`;
export const BRIDGE_DELETE = `${TRIGGER_PREFIX}bridge_delete`;
export const GUARD = `${TRIGGER_PREFIX}guard`;
export const FORGET = `${TRIGGER_PREFIX}forget`;
export const ROLLED_BACK = `${TRIGGER_PREFIX}rolled_back`;

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
  /**
   * What `setup({ adopt })` and `migrate --adopt` converted right after the adoption committed: the
   * values it copied whole, stored by content as element storage stores them (see `compact`).
   * Absent for a dry run, an adoption done before, `migrate()` (run `compact` after it), a saver
   * with `elementStorage: false`, or a serializer that cannot store values by content.
   */
  compacted?: CompactResult;
}

/** What {@link planAdoption} returns: the statements to run, and the same as a readable plan. */
export interface AdoptionPlan {
  from: string;
  source: "js" | "python";
  officialVersion: number;
  statements: string[];
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
 * Lock the official tables, in the official saver's own order (no deadlock
 * with its put): against writers (`SHARE ROW EXCLUSIVE`, what CREATE TRIGGER
 * takes: official reads go on), or against everyone (`ACCESS EXCLUSIVE`, what
 * DROP TRIGGER takes: taken up front, never upgraded, which could deadlock).
 */
export function lockOfficial(from: string, mode: "SHARE ROW EXCLUSIVE" | "ACCESS EXCLUSIVE"): string {
  return `LOCK TABLE ${OFFICIAL_LOCK_ORDER.map((t) => `${quoteIdent(from)}.${t}`).join(", ")} IN ${mode} MODE`;
}
