/**
 * The SQL names of our tables and their columns, for the statements that are
 * written as SQL text (the operations tools: prune, inspect, export/import,
 * adoption, grants, migrate). Checked against the drizzle definitions in
 * schema.ts when the package compiles (`satisfies`): renaming a table or a
 * column there, adding or dropping one, is a type error here until this file
 * says the same. At run time they are plain strings, so neither the saver nor
 * the tools load drizzle (an optional peer dependency, see docs/data-model.md).
 *
 * @example
 * ```ts
 * const sql = `SELECT ${CHECKPOINTS.checkpointId} FROM ${quoteIdent(schema)}.${CHECKPOINTS.table}`;
 * ```
 */
import type { Table } from "drizzle-orm";
import type { checkpointBlobs, checkpointerRetention, checkpointHeads, checkpointTombstones, checkpointWrites, checkpoints } from "./schema.js";

/** A table's SQL name, and each column's under its key in the drizzle definition. */
type Names<T extends Table> = { readonly table: T["_"]["name"] } & { readonly [K in keyof T["_"]["columns"]]: T["_"]["columns"][K]["_"]["name"] };

export const CHECKPOINTS = {
  table: "checkpoints",
  threadId: "thread_id",
  checkpointNs: "checkpoint_ns",
  checkpointId: "checkpoint_id",
  parentCheckpointId: "parent_checkpoint_id",
  checkpoint: "checkpoint",
  metadata: "metadata",
  metadataRaw: "metadata_raw",
  rowVersion: "row_version",
  createdAt: "created_at",
  ttlSeconds: "ttl_seconds",
  stateVersion: "state_version",
  hasPendingTasks: "has_pending_tasks",
  unversionedType: "unversioned_type",
  unversionedValues: "unversioned_values",
} as const satisfies Names<typeof checkpoints>;

export const CHECKPOINT_HEADS = {
  table: "checkpoint_heads",
  threadId: "thread_id",
  checkpointNs: "checkpoint_ns",
  checkpointId: "checkpoint_id",
  rowVersion: "row_version",
  movedAt: "moved_at",
  hasPendingTasks: "has_pending_tasks",
} as const satisfies Names<typeof checkpointHeads>;

export const CHECKPOINT_WRITES = {
  table: "checkpoint_writes",
  threadId: "thread_id",
  checkpointNs: "checkpoint_ns",
  checkpointId: "checkpoint_id",
  taskId: "task_id",
  idx: "idx",
  channel: "channel",
  type: "type",
  value: "value",
  taskPath: "task_path",
  rowVersion: "row_version",
  createdAt: "created_at",
} as const satisfies Names<typeof checkpointWrites>;

export const CHECKPOINT_BLOBS = {
  table: "checkpoint_blobs",
  threadId: "thread_id",
  checkpointNs: "checkpoint_ns",
  channel: "channel",
  version: "version",
  type: "type",
  value: "value",
  rowVersion: "row_version",
} as const satisfies Names<typeof checkpointBlobs>;

export const CHECKPOINT_TOMBSTONES = {
  table: "checkpoint_tombstones",
  threadId: "thread_id",
  deletedAt: "deleted_at",
  lastCheckpointId: "last_checkpoint_id",
} as const satisfies Names<typeof checkpointTombstones>;

export const CHECKPOINTER_RETENTION = {
  table: "checkpointer_retention",
  job: "job",
  startedAt: "started_at",
  finishedAt: "finished_at",
  runs: "runs",
} as const satisfies Names<typeof checkpointerRetention>;

/** Our tables, in the order a migration or a rollback locks them (a put locks the head first). */
export const OWN_TABLES = [CHECKPOINT_HEADS.table, CHECKPOINTS.table, CHECKPOINT_BLOBS.table, CHECKPOINT_WRITES.table] as const;

type Cols<T> = Omit<T, "table">;
type Cp = Cols<typeof CHECKPOINTS>;
type Hd = Cols<typeof CHECKPOINT_HEADS>;
type Wr = Cols<typeof CHECKPOINT_WRITES>;
type Bl = Cols<typeof CHECKPOINT_BLOBS>;

/**
 * Every column name of our tables under its drizzle key, for statements whose
 * aliases range over several tables (or over rows derived from them). A key
 * the tables share names the same column in each: the `satisfies` below picks
 * it from every table that has it, so renaming it in one table, or dropping it
 * from one, is a type error here; dropping a column altogether is a type error
 * in every statement still naming it. Our tables only: the official saver's
 * columns, which have the same names, are in `OFFICIAL` (adopt-official.ts).
 *
 * @example
 * ```ts
 * const sql = `SELECT c.${COL.checkpointId} FROM ${s}.${CHECKPOINTS.table} c WHERE c.${COL.threadId} = $1`;
 * ```
 */
export const COL = {
  threadId: "thread_id",
  checkpointNs: "checkpoint_ns",
  checkpointId: "checkpoint_id",
  parentCheckpointId: "parent_checkpoint_id",
  checkpoint: "checkpoint",
  metadata: "metadata",
  metadataRaw: "metadata_raw",
  rowVersion: "row_version",
  createdAt: "created_at",
  ttlSeconds: "ttl_seconds",
  stateVersion: "state_version",
  hasPendingTasks: "has_pending_tasks",
  unversionedType: "unversioned_type",
  unversionedValues: "unversioned_values",
  movedAt: "moved_at",
  taskId: "task_id",
  idx: "idx",
  channel: "channel",
  type: "type",
  value: "value",
  taskPath: "task_path",
  version: "version",
} as const satisfies Cp & Hd & Wr & Bl & Shared;

/** The columns the tables share; `Pick` fails when one of them lacks a key listed here. */
type Shared = Pick<Cp, "threadId" | "checkpointNs" | "checkpointId" | "rowVersion" | "createdAt" | "hasPendingTasks"> &
  Pick<Hd, "threadId" | "checkpointNs" | "checkpointId" | "rowVersion" | "hasPendingTasks"> &
  Pick<Wr, "threadId" | "checkpointNs" | "checkpointId" | "rowVersion" | "createdAt" | "channel" | "type" | "value"> &
  Pick<Bl, "threadId" | "checkpointNs" | "rowVersion" | "channel" | "type" | "value">;
