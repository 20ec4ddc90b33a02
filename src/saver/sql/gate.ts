/**
 * The tombstone gates and the thread deletion lock, as SQL (the rule they
 * decide, and why they are airtight: saver/tombstones.ts): the names of the
 * gate functions (migrations 0007 and 0009), the calls and locks the saver's
 * statements and the operations' (prune, compact, the adoption bridge, copy)
 * are written with.
 */
import { CHECKPOINT_TOMBSTONES as T } from "../../db/names.js";
import { quoteIdent } from "../../validate.js";

/** The writes' gate (migration 0007), and its argument types for GRANT and REVOKE. */
export const GATE_FUNCTION = "checkpointer_thread_gate";
export const GATE_SIGNATURE = `${GATE_FUNCTION}(text, text, text, text[], boolean)`;
/** A put's gate (migration 0009), and its argument types. */
export const PUT_GATE_FUNCTION = "checkpointer_put_gate";
export const PUT_GATE_SIGNATURE = `${PUT_GATE_FUNCTION}(text, text, text, text, text, jsonb, boolean)`;
/** Both gates' signatures: what a role that writes needs EXECUTE on. */
export const GATE_SIGNATURES = [GATE_SIGNATURE, PUT_GATE_SIGNATURE] as const;

/** Why the gate refused a write (see the rule above). */
export type RefusalReason = "history" | "thread";


/**
 * The name of the per-thread advisory lock between writers (shared, in the
 * gate) and deletions (exclusive), with the thread id:
 * `pg_advisory_xact_lock(hashtext(name), hashtext(thread))`.
 *
 * @example
 * ```ts
 * await tx.query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1), pg_catalog.hashtext($2))", [deleteLockName("public"), threadId]);
 * ```
 */
export function deleteLockName(schema: string): string {
  return `langgraph-checkpoint-pg:delete:${schema}`;
}

/** A SQL string literal. */
const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * A call of the writes' gate, as an SQL expression: NULL (write) or the refusal
 * reason. Arguments are SQL expressions: the thread, the namespace, a text[]
 * of the checkpoint ids the write names, and whether it starts a conversation.
 */
export function gateCall(schema: string, args: { thread: string; ns: string; ids: string; starts: string }): string {
  return `${quoteIdent(schema)}.${GATE_FUNCTION}(${lit(deleteLockName(schema))}, ${args.thread}, ${args.ns}, ${args.ids}, ${args.starts})`;
}

/** SQL: take the deletion lock of thread `thread` (an SQL expression) exclusively, waiting. */
export function lockForDelete(schema: string, thread: string): string {
  return `pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(${lit(deleteLockName(schema))}), pg_catalog.hashtext(${thread}))`;
}

/**
 * SQL: take the deletion lock of thread `thread` (an SQL expression) shared, waiting: what a
 * writer outside the gate (compact) holds so that a deletion waits for it, then sees what it wrote.
 */
export function lockForWrite(schema: string, thread: string): string {
  return `pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtext(${lit(deleteLockName(schema))}), pg_catalog.hashtext(${thread}))`;
}

/** SQL: try the deletion lock of thread `thread` (an SQL expression) exclusively; true if taken. */
export function tryLockForDelete(schema: string, thread: string): string {
  return `pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext(${lit(deleteLockName(schema))}), pg_catalog.hashtext(${thread}))`;
}

/**
 * SQL: leave (or refresh) tombstones. `source` selects `(thread_id, last_id)`
 * rows, one per thread: the thread and the greatest checkpoint id it holds
 * now (NULL: none). A thread deleted before keeps the greater of both ids.
 */
export function upsertTombstones(schema: string, source: string): string {
  const t = `${quoteIdent(schema)}.${T.table}`;
  return `INSERT INTO ${t} AS t (${T.threadId}, ${T.deletedAt}, ${T.lastCheckpointId})
  SELECT src.thread_id, pg_catalog.now(), src.last_id FROM (${source}) AS src(thread_id, last_id)
  ON CONFLICT (${T.threadId}) DO UPDATE
     SET ${T.deletedAt} = EXCLUDED.${T.deletedAt},
         ${T.lastCheckpointId} = GREATEST(t.${T.lastCheckpointId}, EXCLUDED.${T.lastCheckpointId})`;
}
