/**
 * The one definition of the tables: the three that mirror the
 * in-memory saver's three dictionaries, and the lineage heads (see
 * docs/data-model.md). It is the source of `migrations/` (change it, run
 * `npm run generate`, commit the new SQL file; a test fails when the two
 * drift), the names the operations' statements use (`names.ts`), and what
 * users import as `langgraph-checkpoint-pg/schema` to query the tables with
 * drizzle.
 *
 * The exported tables are declared without a Postgres schema: `migrate()`
 * applies the generated SQL inside whichever schema the saver is configured
 * for, and drizzle-kit must generate unqualified SQL. {@link checkpointTables}
 * gives the same tables in a named schema.
 *
 * @example
 * ```ts
 * import { checkpoints, checkpointTables } from "langgraph-checkpoint-pg/schema";
 * const agents = checkpointTables("agents"); // new PostgresSaver(pool, { schema: "agents" })
 * await db.select({ id: agents.checkpoints.checkpointId }).from(agents.checkpoints);
 * await db.select().from(checkpoints); // schema "public" (the saver's default), through search_path
 * ```
 */
import {
  bigint,
  boolean,
  customType,
  index,
  integer,
  jsonb,
  PgSchema,
  type AnyPgColumn,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from "drizzle-orm/pg-core";

const bytea = customType<{ data: Uint8Array; driverData: Buffer }>({
  dataType: () => "bytea",
});

/**
 * Key text compared byte-wise (`COLLATE "C"`): ordering and `before` match
 * JavaScript's code-point order whatever the database locale, and btree
 * comparisons skip locale rules.
 */
const key = customType<{ data: string }>({
  dataType: () => 'text COLLATE "C"',
});

/** The columns an index or key of a table names. */
type Columns<K extends string> = Record<K, AnyPgColumn>;

/** Every row carries a version, bumped by each update (compare-and-set). */
const rowVersion = () => bigint("row_version", { mode: "number" }).notNull().default(1);

/**
 * storage: thread -> namespace -> checkpoint id -> (checkpoint, metadata, parent).
 *
 * `checkpoint` is the checkpoint without `channel_values` (those live in
 * `checkpoint_blobs`, once per channel version) and without `id` (the
 * `checkpoint_id` column). `metadata` is JSONB so
 * `list({ filter })` can query it; `metadata_raw` holds the exact msgpack
 * encoding only when JSONB cannot represent the metadata losslessly (NUL
 * characters, `undefined`, dates, ...). Rows are only inserted (a re-put of
 * the same id updates its row): the lineage head lives in `checkpoint_heads`.
 */
const checkpointsColumns = () => ({
  threadId: key("thread_id").notNull(),
  checkpointNs: key("checkpoint_ns").notNull().default(""),
  checkpointId: key("checkpoint_id").notNull(),
  parentCheckpointId: key("parent_checkpoint_id"),
  checkpoint: jsonb("checkpoint").notNull(),
  metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull().default({}),
  metadataRaw: bytea("metadata_raw"),
  rowVersion: rowVersion(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  /** The saver's `ttl` when this checkpoint was written; the head's value is the thread's TTL, enforced by `prune`. */
  ttlSeconds: integer("ttl_seconds"),
  /** The saver's `stateVersion` when this checkpoint was written (NULL: written without one, read as version 1). */
  stateVersion: integer("state_version"),
  /**
   * True when the checkpoint still has tasks to run (a pending `__start__` or
   * `branch:to:*` trigger, or pending sends). Computed from the values at put
   * time, so linear mode can tell a settled head from a run in progress
   * without reading (possibly encrypted) blobs.
   */
  hasPendingTasks: boolean("has_pending_tasks").notNull().default(false),
  /**
   * Channel values the checkpoint holds without a version (LangGraph hands
   * e.g. `__pregel_tasks: []`, or a reducer's default before its first
   * write, in `channel_values` but not in `channel_versions`): no blob can
   * name them, so they are kept here, all of them as one serialized map
   * `{ channel: value }` (`serde.dumpsTyped`; NULL: none), and come back as stored.
   * The map also lists the versioned channels the checkpoint holds as
   * `undefined`: a blob holding `undefined` reads as no value (saver/encode.ts).
   */
  unversionedType: text("unversioned_type"),
  unversionedValues: bytea("unversioned_values"),
});

const checkpointsExtra = (t: Columns<"threadId" | "checkpointNs" | "checkpointId" | "createdAt">) => [
  primaryKey({ name: "checkpoints_pkey", columns: [t.threadId, t.checkpointNs, t.checkpointId] }),
  /**
   * For `prune` (src/ops/prune.ts): its retention rules are time ranges inside one
   * lineage (kept because younger than `olderThan` or than the grace period,
   * the parents of recent puts, a thread's last activity). With this index
   * each is a range read, so the work prune does while it holds a lineage's
   * head lock grows with what it keeps and deletes in that round, not with
   * the length of the thread's history.
   */
  index("checkpoints_lineage_created_at").on(t.threadId, t.checkpointNs, t.createdAt),
];

export const checkpoints = pgTable("checkpoints", checkpointsColumns(), checkpointsExtra);

/**
 * The head of each (thread, namespace) lineage: the checkpoint the latest put
 * made current. One row per lineage (its primary key makes "one head" a
 * database invariant); every put locks it (`FOR UPDATE`), compares it and
 * moves it with a compare-and-set on `row_version`. No column of it is
 * indexed except the key, so the move is a HOT update: `checkpoints` stays
 * insert-only (no dead row, no index entry per put). Kept apart from the three
 * tables that mirror the in-memory saver: it is the lock and the pointer, not data.
 */
const checkpointHeadsColumns = () => ({
  threadId: key("thread_id").notNull(),
  checkpointNs: key("checkpoint_ns").notNull().default(""),
  checkpointId: key("checkpoint_id").notNull(),
  rowVersion: rowVersion(),
  /** When the head last moved (linear mode's run lease counts from it). */
  movedAt: timestamp("moved_at", { withTimezone: true }).notNull().defaultNow(),
  /** The head checkpoint's `has_pending_tasks`, so a put decides without reading the checkpoint row. */
  hasPendingTasks: boolean("has_pending_tasks").notNull().default(false),
});

const checkpointHeadsExtra = (t: Columns<"threadId" | "checkpointNs">) => [primaryKey({ name: "checkpoint_heads_pkey", columns: [t.threadId, t.checkpointNs] })];

export const checkpointHeads = pgTable("checkpoint_heads", checkpointHeadsColumns(), checkpointHeadsExtra);

/**
 * writes: (thread, namespace, checkpoint) -> (task, idx) -> (channel, typed value, task path).
 * The pending writes each task produced from a checkpoint. No foreign key to
 * `checkpoints`: with async durability LangGraph may store a task's writes
 * before the put of their checkpoint commits.
 */
const checkpointWritesColumns = () => ({
  threadId: key("thread_id").notNull(),
  checkpointNs: key("checkpoint_ns").notNull().default(""),
  checkpointId: key("checkpoint_id").notNull(),
  taskId: key("task_id").notNull(),
  idx: integer("idx").notNull(),
  channel: key("channel").notNull(),
  type: text("type").notNull(),
  value: bytea("value"),
  taskPath: key("task_path").notNull().default(""),
  rowVersion: rowVersion(),
  /**
   * When the write was first stored. A write whose checkpoint row does not
   * exist is normal for a moment (async durability stores a task's writes
   * before the put of their checkpoint commits) and garbage forever once its
   * run was rejected or crashed; only its age tells the two apart, so `prune`
   * deletes such orphans only after a grace period. It also counts as thread
   * activity (a `Command({ resume })` stores writes without a checkpoint).
   * The insert statements never name it: the default fills it.
   */
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
});

const checkpointWritesExtra = (t: Columns<"threadId" | "checkpointNs" | "checkpointId" | "taskId" | "idx">) => [
  primaryKey({
    name: "checkpoint_writes_pkey",
    columns: [t.threadId, t.checkpointNs, t.checkpointId, t.taskId, t.idx],
  }),
];

export const checkpointWrites = pgTable("checkpoint_writes", checkpointWritesColumns(), checkpointWritesExtra);

/**
 * blobs: (thread, namespace, channel, version) -> typed value. Each channel's
 * value once per version. A version at which the channel holds no value
 * (consumed, cleared) has no row and reads as no value, as MemorySaver's
 * `empty` blob does; rows of `type = 'empty'` (value NULL), which the
 * official saver writes (adoption), read the same.
 */
const checkpointBlobsColumns = () => ({
  threadId: key("thread_id").notNull(),
  checkpointNs: key("checkpoint_ns").notNull().default(""),
  channel: key("channel").notNull(),
  version: key("version").notNull(),
  type: text("type").notNull(),
  value: bytea("value"),
  rowVersion: rowVersion(),
});

const checkpointBlobsExtra = (t: Columns<"threadId" | "checkpointNs" | "channel" | "version">) => [
  primaryKey({
    name: "checkpoint_blobs_pkey",
    columns: [t.threadId, t.checkpointNs, t.channel, t.version],
  }),
];

export const checkpointBlobs = pgTable("checkpoint_blobs", checkpointBlobsColumns(), checkpointBlobsExtra);

/**
 * A deleted thread's record: a put or putWrites that continues its deleted
 * history is refused (`ThreadDeletedError`) instead of bringing it back (a run
 * still in flight when the thread was deleted). Left by every delete path
 * (`deleteThread`, `prune`'s expiry, the CLI, the adoption bridge) and kept
 * until `prune` collects it (`keepTombstones`). The rule that decides, and why
 * it needs nothing but these columns, is in src/saver/tombstones.ts.
 */
const checkpointTombstonesColumns = () => ({
  threadId: key("thread_id").notNull(),
  /** When the thread was (last) deleted, by the database's clock. */
  deletedAt: timestamp("deleted_at", { withTimezone: true }).notNull().defaultNow(),
  /**
   * The greatest checkpoint id the thread held when it was deleted (in any
   * namespace, the checkpoints its writes name included; byte order), and of
   * its earlier deletions; NULL when it held none.
   */
  lastCheckpointId: key("last_checkpoint_id"),
});

const checkpointTombstonesExtra = (t: Columns<"threadId">) => [primaryKey({ name: "checkpoint_tombstones_pkey", columns: [t.threadId] })];

export const checkpointTombstones = pgTable("checkpoint_tombstones", checkpointTombstonesColumns(), checkpointTombstonesExtra);

/**
 * Bookkeeping of the saver's background retention (the `retention` option):
 * when a run last started and finished, so that of several processes one runs
 * it once per interval, by the database's clock. One row per job (`prune`).
 */
const checkpointerRetentionColumns = () => ({
  job: text("job").notNull(),
  startedAt: timestamp("started_at", { withTimezone: true }),
  finishedAt: timestamp("finished_at", { withTimezone: true }),
  runs: bigint("runs", { mode: "number" }).notNull().default(0),
});

const checkpointerRetentionExtra = (t: Columns<"job">) => [primaryKey({ name: "checkpointer_retention_pkey", columns: [t.job] })];

export const checkpointerRetention = pgTable("checkpointer_retention", checkpointerRetentionColumns(), checkpointerRetentionExtra);

/**
 * The tables in the Postgres schema `schema`, for a saver created with
 * `{ schema }` (`migrate({ schema })`). The same definitions as the exported
 * tables, qualified with the schema name in every statement drizzle builds.
 * The tables are read-only for applications: the saver alone writes them,
 * under its own locks and row versions.
 *
 * @example
 * ```ts
 * import { checkpointTables } from "langgraph-checkpoint-pg/schema";
 * const { checkpoints, checkpointHeads } = checkpointTables("agents");
 * ```
 */
export function checkpointTables<S extends string>(schema: S) {
  // PgSchema, not pgSchema(): drizzle's helper refuses "public" (the saver's default), which is a
  // schema name like any other here. The tables are built anew per call: drizzle binds columns to their table.
  const named = new PgSchema(schema);
  return {
    checkpoints: named.table("checkpoints", checkpointsColumns(), checkpointsExtra),
    checkpointWrites: named.table("checkpoint_writes", checkpointWritesColumns(), checkpointWritesExtra),
    checkpointBlobs: named.table("checkpoint_blobs", checkpointBlobsColumns(), checkpointBlobsExtra),
    checkpointHeads: named.table("checkpoint_heads", checkpointHeadsColumns(), checkpointHeadsExtra),
    checkpointTombstones: named.table("checkpoint_tombstones", checkpointTombstonesColumns(), checkpointTombstonesExtra),
    checkpointerRetention: named.table("checkpointer_retention", checkpointerRetentionColumns(), checkpointerRetentionExtra),
  };
}
