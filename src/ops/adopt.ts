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
import { quoteIdent } from "../validate.js";
import { TRIGGER_PREFIX, type Table } from "../db/official.js";

/** The official put writes blobs, then the checkpoint; deleteThread blobs, checkpoints, writes: lock in that order. */
const OFFICIAL_LOCK_ORDER: readonly Table[] = ["checkpoint_blobs", "checkpoints", "checkpoint_writes"];

export const BRIDGE = `${TRIGGER_PREFIX}bridge`;
export const BRIDGE_DELETE = `${TRIGGER_PREFIX}bridge_delete`;
export const GUARD = `${TRIGGER_PREFIX}guard`;
export const FORGET = `${TRIGGER_PREFIX}forget`;
export const ROLLED_BACK = `${TRIGGER_PREFIX}rolled_back`;


/**
 * Lock the official tables, in the official saver's own order (no deadlock
 * with its put): against writers (`SHARE ROW EXCLUSIVE`, what CREATE TRIGGER
 * takes: official reads go on), or against everyone (`ACCESS EXCLUSIVE`, what
 * DROP TRIGGER takes: taken up front, never upgraded, which could deadlock).
 */
export function lockOfficial(from: string, mode: "SHARE ROW EXCLUSIVE" | "ACCESS EXCLUSIVE"): string {
  return `LOCK TABLE ${OFFICIAL_LOCK_ORDER.map((t) => `${quoteIdent(from)}.${t}`).join(", ")} IN ${mode} MODE`;
}
