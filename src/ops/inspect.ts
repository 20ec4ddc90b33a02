/**
 * Read what the checkpointer stored, and move threads between databases.
 * Plain functions over a pool (pg or PGlite), the same shapes the CLI prints:
 * {@link migrationStatus}, {@link listThreads}, {@link history}, {@link show},
 * {@link exportThread} and {@link importThread}.
 *
 * The export format is JSON lines, one record per stored row: `value`
 * (base64 of the exact stored bytes, with its `type`) is what
 * {@link importThread} writes back; on request (`decoded: true`), `decoded`
 * shows the value as JSON with type-preserving tags (see {@link toJsonSafe}),
 * for people and tools, and is ignored on import.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { dbOf, type Db, type PGliteLike, type Row } from "../db/db.js";
import { CheckpointerError, DatabaseOperationError, HistoryCorruptError, InvalidInputError } from "../errors.js";
import { ADOPTION_TABLE, readAdoption, type AdoptionRecord } from "./adopt.js";
import { assertSchemaCurrent, loadMigrations, MIGRATIONS_TABLE, schemaLevel } from "../db/migrate.js";
import type { ValueRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { LIMITS, checkKey, checkSchemaName, quoteIdent } from "../validate.js";
import { decodeMetadataRaw, decodeStored, loadElements, type Elements } from "./decode.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_WRITES, CHECKPOINTS, COL } from "../db/names.js";

/** Where to read or write: a pool, client or PGlite instance the caller owns (never closed here), and a schema. */
export interface InspectOptions {
  /** A `pg.Pool`, a `pg.Client` or a PGlite instance. */
  pool: pg.Pool | pg.Client | PGliteLike;
  /** Postgres schema holding the tables. Default `public`. */
  schema?: string;
  /** Decodes stored values. Default {@link MsgpackSerializer}; pass the saver's own if it has a custom one. */
  serde?: SerializerProtocol;
}

function toDb(pool: InspectOptions["pool"]): Db {
  if (pool === null || typeof pool !== "object" || typeof (pool as { query?: unknown }).query !== "function") {
    throw new InvalidInputError("pool", "expected a pg.Pool, a pg.Client or a PGlite instance");
  }
  return dbOf(pool);
}

interface Ctx {
  db: Db;
  schema: string;
  t: { checkpoints: string; writes: string; blobs: string; heads: string };
  serde: SerializerProtocol;
}

/** Resolve options and refuse a schema this code cannot read (not migrated, or migrated by a newer release). */
export async function open(options: InspectOptions): Promise<Ctx> {
  if (options === null || typeof options !== "object") throw new InvalidInputError("options", "expected { pool, schema? }");
  const db = toDb(options.pool);
  const schema = checkSchemaName(options.schema ?? "public");
  await assertSchemaCurrent(db, schema, "inspect");
  const s = quoteIdent(schema);
  return {
    db,
    schema,
    t: {
      checkpoints: `${s}.${CHECKPOINTS.table}`,
      writes: `${s}.${CHECKPOINT_WRITES.table}`,
      blobs: `${s}.${CHECKPOINT_BLOBS.table}`,
      heads: `${s}.${CHECKPOINT_HEADS.table}`,
    },
    serde: options.serde ?? new MsgpackSerializer(),
  };
}

export async function run<R extends Row>(db: Pick<Db, "query">, what: string, text: string, values: unknown[] = []): Promise<R[]> {
  try {
    return (await db.query<R>(text, values)).rows;
  } catch (err) {
    throw err instanceof CheckpointerError ? err : new DatabaseOperationError(what, err);
  }
}

// ---------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------

/** What {@link migrationStatus} reports. */
export interface MigrationStatus {
  schema: string;
  /** The migration version this code requires. */
  codeVersion: number;
  /** The version recorded in the schema (0: never migrated). */
  schemaVersion: number;
  /**
   * `up-to-date`; `pending` (run migrate); `newer-compatible` (a newer release
   * migrated it, and its newer migrations say this code keeps working);
   * `too-new` (a newer release migrated it and this code must not run on it: upgrade the package).
   */
  state: "up-to-date" | "pending" | "newer-compatible" | "too-new";
  /** For `too-new`: the oldest code level the schema works with. */
  compatibleFrom?: number;
  /** The adoption of the official saver's tables recorded in this schema, if any. */
  adoption?: AdoptionRecord;
  /** Applied migrations; `modified` when the shipped file differs from what was applied. */
  applied: { version: number; name: string; appliedAt: string; modified: boolean; known: boolean }[];
  pending: { version: number; name: string }[];
  /** Row counts per table (absent for tables that do not exist yet). */
  rows: Partial<Record<"checkpoints" | "checkpoint_writes" | "checkpoint_blobs" | "checkpoint_heads", number>>;
}

/**
 * Applied and pending migrations of a schema, and row counts per table.
 * Read-only; works on a schema in any state (never migrated, behind, ahead).
 *
 * @example
 * ```ts
 * const s = await migrationStatus({ pool, schema: "agents" });
 * if (s.state !== "up-to-date") console.log(`${s.pending.length} pending`);
 * ```
 */
export async function migrationStatus(options: Omit<InspectOptions, "serde">): Promise<MigrationStatus> {
  const db = toDb(options.pool);
  const schema = checkSchemaName(options.schema ?? "public");
  const s = quoteIdent(schema);
  const migrations = loadMigrations();
  const present = await run<{ name: string; ok: boolean }>(
    db,
    "reading the schema status",
    `SELECT n AS name, pg_catalog.to_regclass($1 || '.' || pg_catalog.quote_ident(n)) IS NOT NULL AS ok FROM pg_catalog.unnest($2::text[]) AS n`,
    [s, [MIGRATIONS_TABLE, CHECKPOINTS.table, CHECKPOINT_WRITES.table, CHECKPOINT_BLOBS.table, CHECKPOINT_HEADS.table, ADOPTION_TABLE]],
  );
  const has = new Set(present.filter((r) => r.ok).map((r) => r.name));
  const appliedRows = has.has(MIGRATIONS_TABLE)
    ? await run<{ version: number; name: string; sha256: string; applied_at: string }>(
        db,
        "reading applied migrations",
        `SELECT version, name, sha256, pg_catalog.to_json(applied_at) #>> '{}' AS applied_at FROM ${s}.${MIGRATIONS_TABLE} ORDER BY version`,
      )
    : [];
  const applied = appliedRows.map((r) => {
    const known = migrations[r.version - 1];
    return { version: r.version, name: r.name, appliedAt: r.applied_at, known: known !== undefined, modified: known !== undefined && known.sha256 !== r.sha256 };
  });
  const version = applied.reduce((m, r) => Math.max(m, r.version), 0);
  // Both read through `run`, so a failure is a typed error.
  const reader = { query: <R extends Row>(text: string, values?: unknown[]) => run<R>(db, "reading the schema status", text, values).then((rows) => ({ rows })) };
  const level = version > migrations.length ? await schemaLevel(reader, schema) : undefined;
  const adoption = has.has(ADOPTION_TABLE) ? await readAdoption(reader, schema) : undefined;
  const rows: MigrationStatus["rows"] = {};
  for (const table of [CHECKPOINTS.table, CHECKPOINT_WRITES.table, CHECKPOINT_BLOBS.table, CHECKPOINT_HEADS.table] as const) {
    if (!has.has(table)) continue;
    const [r] = await run<{ n: string }>(db, "counting rows", `SELECT pg_catalog.count(*)::text AS n FROM ${s}.${table}`);
    rows[table] = Number(r!.n);
  }
  return {
    schema,
    codeVersion: migrations.length,
    schemaVersion: version,
    state: level ? (level.compatibleFrom > migrations.length ? "too-new" : "newer-compatible") : version < migrations.length ? "pending" : "up-to-date",
    ...(level && level.compatibleFrom > migrations.length ? { compatibleFrom: level.compatibleFrom } : {}),
    ...(adoption ? { adoption } : {}),
    applied,
    pending: migrations.slice(version).map((m) => ({ version: m.version, name: m.name })),
    rows,
  };
}

// ---------------------------------------------------------------------------
// threads
// ---------------------------------------------------------------------------

/** What {@link ThreadSummary.bytes} (the CLI's SIZE column) counts, in one line for people. */
export const THREAD_SIZE_MEANS =
  "SIZE: the thread's values as stored (compressed where Postgres compressed them; each element row once, however many values name it); " +
  "keys, row headers and indexes not counted";

/** One line of {@link listThreads}. */
export interface ThreadSummary {
  threadId: string;
  checkpoints: number;
  namespaces: number;
  writes: number;
  /** Rows in `checkpoint_blobs`, element rows of list channels included (saver/elements.ts). */
  blobs: number;
  /**
   * Bytes the thread's values take as stored (`pg_column_size`: compressed where Postgres compressed
   * them): checkpoint and metadata JSON, values without a version, channel values and pending writes,
   * and element rows each once, however many values name them. Not counted: keys, row headers and
   * indexes, so the tables take more on disk ({@link THREAD_SIZE_MEANS}).
   */
  bytes: number;
  /** When the newest checkpoint of the thread was stored (ISO 8601). */
  lastUpdate: string;
}

/**
 * Threads, most recently updated first: all of them (up to `limit`), or the
 * ones named in `threadIds` that have a checkpoint.
 *
 * Without `threadIds` it reads the whole checkpoints table to group it: fine
 * for an operator's command, not for a request path.
 *
 * @example
 * ```ts
 * for (const t of await listThreads({ pool, limit: 10 })) console.log(t.threadId, t.checkpoints, t.lastUpdate);
 * const [one] = await listThreads({ pool, threadIds: ["12345"] }); // undefined: no such thread
 * ```
 */
export async function listThreads(options: InspectOptions & { limit?: number; threadIds?: readonly string[] }): Promise<ThreadSummary[]> {
  const limit = options.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1) throw new InvalidInputError("limit", "expected a positive integer");
  const ids = options.threadIds;
  if (ids !== undefined) {
    if (!Array.isArray(ids)) throw new InvalidInputError("threadIds", "expected an array of thread ids");
    ids.forEach((id: unknown, i) => checkKey(`threadIds[${i}]`, id, LIMITS.thread_id));
  }
  const { db, t } = await open(options);
  const rows = await run<{
    thread_id: string;
    checkpoints: string;
    namespaces: string;
    writes: string | null;
    blobs: string | null;
    bytes: string;
    last_update: string;
  }>(
    db,
    "listing threads",
    `WITH c AS (
       SELECT ${COL.threadId} AS thread_id, pg_catalog.count(*) AS checkpoints, pg_catalog.count(DISTINCT ${COL.checkpointNs}) AS namespaces, pg_catalog.max(${COL.createdAt}) AS last_update,
              pg_catalog.sum(pg_catalog.pg_column_size(${COL.checkpoint}) + pg_catalog.pg_column_size(${COL.metadata})
                             + coalesce(pg_catalog.pg_column_size(${COL.metadataRaw}), 0) + coalesce(pg_catalog.pg_column_size(${COL.unversionedValues}), 0)) AS bytes
         FROM ${t.checkpoints} WHERE $2::text[] IS NULL OR ${COL.threadId} = ANY($2::text[])
        GROUP BY ${COL.threadId} ORDER BY pg_catalog.max(${COL.createdAt}) DESC, ${COL.threadId} LIMIT $1
     )
     SELECT c.thread_id, c.checkpoints::text, c.namespaces::text, pg_catalog.to_json(c.last_update) #>> '{}' AS last_update,
            w.n::text AS writes, b.n::text AS blobs, (c.bytes + coalesce(w.bytes, 0) + coalesce(b.bytes, 0))::text AS bytes
       FROM c
       LEFT JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.sum(coalesce(pg_catalog.pg_column_size(${COL.value}), 0)) AS bytes FROM ${t.writes} WHERE ${COL.threadId} = c.thread_id) w ON true
       LEFT JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.sum(coalesce(pg_catalog.pg_column_size(${COL.value}), 0)) AS bytes FROM ${t.blobs} WHERE ${COL.threadId} = c.thread_id) b ON true
      ORDER BY c.last_update DESC, c.thread_id`,
    [ids === undefined ? limit : Math.max(limit, ids.length), ids ?? null],
  );
  return rows.map((r) => ({
    threadId: r.thread_id,
    checkpoints: Number(r.checkpoints),
    namespaces: Number(r.namespaces),
    writes: Number(r.writes ?? 0),
    blobs: Number(r.blobs ?? 0),
    bytes: Number(r.bytes),
    lastUpdate: r.last_update,
  }));
}

// ---------------------------------------------------------------------------
// history
// ---------------------------------------------------------------------------

/** One checkpoint in {@link history}. */
export interface HistoryEntry {
  checkpointId: string;
  parentCheckpointId: string | null;
  /** `metadata.source`: input, loop, update, fork. */
  source: string | undefined;
  step: number | undefined;
  createdAt: string;
  isHead: boolean;
  /** Ids of the checkpoints whose parent this is, oldest first (more than one: a branch point). */
  children: string[];
}

/** The checkpoints of one namespace of a thread, oldest first. */
export interface Lineage {
  checkpointNs: string;
  /** The current head (where the next run continues), if any. */
  head: string | null;
  checkpoints: HistoryEntry[];
}

/**
 * The parent-linked history of a thread, per namespace (`""` first, then
 * subgraph namespaces). Empty when the thread does not exist.
 *
 * @example
 * ```ts
 * const [top] = await history({ pool, threadId: "12345" });
 * console.log(top.checkpoints.map((c) => `${c.source} ${c.step}`)); // ["input -1", "loop 0", "loop 1"]
 * ```
 */
export async function history(options: InspectOptions & { threadId: string; checkpointNs?: string }): Promise<Lineage[]> {
  const threadId = checkKey("threadId", options.threadId, LIMITS.thread_id);
  const ns = options.checkpointNs === undefined ? null : checkKey("checkpointNs", options.checkpointNs, LIMITS.checkpoint_ns, { allowEmpty: true });
  const { db, t } = await open(options);
  const rows = await run<{
    checkpoint_ns: string;
    checkpoint_id: string;
    parent_checkpoint_id: string | null;
    source: string | null;
    step: string | null;
    is_head: boolean;
    created_at: string;
  }>(
    db,
    "reading thread history",
    `SELECT c.${COL.checkpointNs} AS checkpoint_ns, c.${COL.checkpointId} AS checkpoint_id, c.${COL.parentCheckpointId} AS parent_checkpoint_id,
            c.${COL.metadata} ->> 'source' AS source, c.${COL.metadata} ->> 'step' AS step,
            EXISTS (SELECT 1 FROM ${t.heads} h WHERE h.${COL.threadId} = c.${COL.threadId} AND h.${COL.checkpointNs} = c.${COL.checkpointNs} AND h.${COL.checkpointId} = c.${COL.checkpointId}) AS is_head,
            pg_catalog.to_json(c.${COL.createdAt}) #>> '{}' AS created_at
       FROM ${t.checkpoints} c WHERE c.${COL.threadId} = $1 AND ($2::text IS NULL OR c.${COL.checkpointNs} = $2)
      ORDER BY c.${COL.checkpointNs}, c.${COL.checkpointId}`,
    [threadId, ns],
  );
  const lineages = new Map<string, Lineage>();
  const byId = new Map<string, HistoryEntry>();
  for (const r of rows) {
    let lineage = lineages.get(r.checkpoint_ns);
    if (!lineage) lineages.set(r.checkpoint_ns, (lineage = { checkpointNs: r.checkpoint_ns, head: null, checkpoints: [] }));
    const step = r.step === null ? undefined : Number(r.step);
    const entry: HistoryEntry = {
      checkpointId: r.checkpoint_id,
      parentCheckpointId: r.parent_checkpoint_id,
      source: r.source ?? undefined,
      step: step !== undefined && Number.isFinite(step) ? step : undefined,
      createdAt: r.created_at,
      isHead: r.is_head,
      children: [],
    };
    if (r.is_head) lineage.head = r.checkpoint_id;
    lineage.checkpoints.push(entry);
    byId.set(`${r.checkpoint_ns}\u0000${r.checkpoint_id}`, entry);
  }
  for (const lineage of lineages.values()) {
    for (const c of lineage.checkpoints) {
      if (c.parentCheckpointId !== null) byId.get(`${lineage.checkpointNs}\u0000${c.parentCheckpointId}`)?.children.push(c.checkpointId);
    }
    const loop = findCycle(lineage.checkpoints);
    if (loop !== undefined) throw new HistoryCorruptError({ threadId, checkpointNs: lineage.checkpointNs, checkpointId: loop, reason: "cycle", operation: "history" });
  }
  return [...lineages.values()];
}

/**
 * A checkpoint on a cycle of parent links, if there is one. Each checkpoint
 * has at most one parent, so following parents from every start, marking the
 * current path, finds any cycle in one pass. A parent that is not stored (a
 * pruned ancestor) simply ends a path: that is what pruning leaves.
 */
function findCycle(checkpoints: HistoryEntry[]): string | undefined {
  const parentOf = new Map(checkpoints.map((c) => [c.checkpointId, c.parentCheckpointId]));
  const state = new Map<string, "on-path" | "done">();
  for (const start of parentOf.keys()) {
    const path: string[] = [];
    let id: string | null | undefined = start;
    while (id !== null && id !== undefined && parentOf.has(id) && !state.has(id)) {
      state.set(id, "on-path");
      path.push(id);
      id = parentOf.get(id);
    }
    if (id !== null && id !== undefined && state.get(id) === "on-path") return id;
    for (const p of path) state.set(p, "done");
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// show
// ---------------------------------------------------------------------------

/** A checkpoint as stored, decoded (what {@link show} returns). */
export interface StoredCheckpoint {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  parentCheckpointId: string | null;
  isHead: boolean;
  createdAt: string;
  ttlSeconds: number | null;
  /** The stored checkpoint: `v`, `ts`, `channel_versions`, `versions_seen`, `updated_channels` (channel values live in blobs), and its `id` (from its column). */
  checkpoint: Record<string, unknown>;
  metadata: unknown;
  /**
   * One per `channel_versions` entry: the blob it points at. `type` is `empty` for a channel without a value, `missing` if no blob row exists,
   * `pg:refs`, `pg:val` or `pg:obj:<type>` for a value stored by content (saver/stored.ts; `value` is the whole value, put back together).
   */
  channels: { channel: string; version: string; type: string; value: unknown }[];
  /** Channel values the checkpoint holds without a version (e.g. `__pregel_tasks: []`), stored with its row. */
  unversioned: { channel: string; value: unknown }[];
  /** The writes tasks produced from this checkpoint, in `(task_path, task_id, idx)` order; `value` decoded whole, also when stored by content. */
  pendingWrites: { taskId: string; idx: number; channel: string; type: string; taskPath: string; value: unknown }[];
}

/**
 * One checkpoint (default: the head of the namespace) with its metadata,
 * channel values and pending writes, decoded. Undefined when it does not exist.
 * A value that cannot be decoded comes back as `{ $type: "undecodable", error }`.
 *
 * @example
 * ```ts
 * const cp = await show({ pool, threadId: "12345" });
 * console.log(cp?.channels.map((c) => [c.channel, c.value]));
 * ```
 */
export async function show(options: InspectOptions & { threadId: string; checkpointId?: string; checkpointNs?: string }): Promise<StoredCheckpoint | undefined> {
  const threadId = checkKey("threadId", options.threadId, LIMITS.thread_id);
  const ns = checkKey("checkpointNs", options.checkpointNs ?? "", LIMITS.checkpoint_ns, { allowEmpty: true });
  const id = options.checkpointId === undefined ? null : checkKey("checkpointId", options.checkpointId, LIMITS.checkpoint_id);
  const { db, t, serde } = await open(options);
  const [cp] = await run<{
    checkpoint_id: string;
    parent_checkpoint_id: string | null;
    checkpoint: Record<string, unknown>;
    metadata: unknown;
    metadata_raw: Uint8Array | null;
    is_head: boolean;
    created_at: string;
    ttl_seconds: number | null;
    unversioned_type: string | null;
    unversioned_values: Uint8Array | null;
  }>(
    db,
    "reading a checkpoint",
    `SELECT c.${COL.checkpointId} AS checkpoint_id, c.${COL.parentCheckpointId} AS parent_checkpoint_id, c.${COL.checkpoint} AS checkpoint,
            c.${COL.metadata} AS metadata, c.${COL.metadataRaw} AS metadata_raw, h.${COL.checkpointId} IS NOT NULL AS is_head,
            pg_catalog.to_json(c.${COL.createdAt}) #>> '{}' AS created_at, c.${COL.ttlSeconds} AS ttl_seconds,
            c.${COL.unversionedType} AS unversioned_type, c.${COL.unversionedValues} AS unversioned_values
       FROM ${t.checkpoints} c
       LEFT JOIN ${t.heads} h ON h.${COL.threadId} = c.${COL.threadId} AND h.${COL.checkpointNs} = c.${COL.checkpointNs} AND h.${COL.checkpointId} = c.${COL.checkpointId}
      WHERE c.${COL.threadId} = $1 AND c.${COL.checkpointNs} = $2
        AND c.${COL.checkpointId} = coalesce($3::text, (SELECT ${COL.checkpointId} FROM ${t.heads} WHERE ${COL.threadId} = $1 AND ${COL.checkpointNs} = $2))`,
    [threadId, ns, id],
  );
  if (!cp) return undefined;
  const versions = Object.entries((cp.checkpoint.channel_versions ?? {}) as Record<string, unknown>).map(([c, v]) => [c, String(v)] as const);
  const blobs = await run<{ channel: string; version: string; type: string; value: Uint8Array | null }>(
    db,
    "reading channel values",
    `SELECT b.${COL.channel} AS channel, b.${COL.version} AS version, b.${COL.type} AS type, b.${COL.value} AS value FROM ${t.blobs} b
       JOIN ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[])) AS cv(channel, version) ON b.${COL.channel} = cv.channel AND b.${COL.version} = cv.version
      WHERE b.${COL.threadId} = $1 AND b.${COL.checkpointNs} = $2`,
    [threadId, ns, versions.map(([c]) => c), versions.map(([, v]) => v)],
  );
  const writes = await run<{ task_id: string; idx: number; channel: string; type: string; value: Uint8Array | null; task_path: string }>(
    db,
    "reading pending writes",
    `SELECT ${COL.taskId} AS task_id, ${COL.idx} AS idx, ${COL.channel} AS channel, ${COL.type} AS type, ${COL.value} AS value, ${COL.taskPath} AS task_path FROM ${t.writes}
      WHERE ${COL.threadId} = $1 AND ${COL.checkpointNs} = $2 AND ${COL.checkpointId} = $3 ORDER BY ${COL.taskPath}, ${COL.taskId}, ${COL.idx}`,
    [threadId, ns, cp.checkpoint_id],
  );
  const blobOf = new Map(blobs.map((b) => [b.channel, b]));
  // Channel values and pending writes alike may be stored by content: the element rows of both, in one go.
  const elements = await loadElements(
    (text, values) => run(db, "reading list elements", text, values),
    t.blobs,
    [...blobs, ...writes].map((v) => ({ threadId, checkpointNs: ns, type: v.type, value: v.value })),
  );
  const decode = async (type: string, value: Uint8Array | null, row: ValueRow, list?: Elements) => {
    const d = await decodeStored(serde, type, value, row, list);
    return d.ok ? d.value : { $type: "undecodable", error: d.error };
  };
  const key = { threadId, checkpointNs: ns };
  const { channel_values: _none, ...stored } = cp.checkpoint;
  const checkpoint = { ...stored, id: cp.checkpoint_id };
  // One map { channel: value }; if it cannot be decoded, one entry says so.
  const unversioned =
    cp.unversioned_values === null
      ? {}
      : await decode(cp.unversioned_type ?? "", cp.unversioned_values, { table: "checkpoints", ...key, checkpointId: cp.checkpoint_id });
  const metadata = await decodeMetadataRaw(cp.metadata, cp.metadata_raw);
  const undecodable = unversioned === null || typeof unversioned !== "object" || (unversioned as { $type?: unknown }).$type === "undecodable";
  return {
    threadId,
    checkpointNs: ns,
    checkpointId: cp.checkpoint_id,
    parentCheckpointId: cp.parent_checkpoint_id,
    isHead: cp.is_head,
    createdAt: cp.created_at,
    ttlSeconds: cp.ttl_seconds,
    checkpoint,
    metadata: metadata.ok ? metadata.value : cp.metadata,
    channels: await Promise.all(
      versions.map(async ([channel, version]) => {
        const b = blobOf.get(channel);
        if (!b) return { channel, version, type: "missing", value: undefined };
        return { channel, version, type: b.type, value: await decode(b.type, b.value, { table: "checkpoint_blobs", ...key, channel, version: b.version }, elements) };
      }),
    ),
    unversioned: undecodable
      ? [{ channel: "*", value: unversioned }]
      : // The map also lists versioned channels the checkpoint holds as undefined (saver/encode.ts): those are in `channels`.
        Object.entries(unversioned)
          .filter(([channel]) => !versions.some(([c]) => c === channel))
          .map(([channel, value]) => ({ channel, value })),
    pendingWrites: await Promise.all(
      writes.map(async (w) => ({
        taskId: w.task_id,
        idx: w.idx,
        channel: w.channel,
        type: w.type,
        taskPath: w.task_path,
        value: await decode(w.type, w.value, { table: "checkpoint_writes", ...key, checkpointId: cp.checkpoint_id, taskId: w.task_id, idx: w.idx }, elements),
      })),
    ),
  };
}

/**
 * The thread ids of a schema, most recently updated first (for exporting everything).
 *
 * @example
 * ```ts
 * for (const id of await threadIds({ pool })) console.log(id);
 * ```
 */
export async function threadIds(options: Omit<InspectOptions, "serde">): Promise<string[]> {
  const { db, t } = await open(options);
  const rows = await run<{ thread_id: string }>(
    db,
    "listing thread ids",
    // Writes or blobs without a checkpoint (a run killed between putWrites and put) belong to a thread too.
    `SELECT x.${COL.threadId} AS thread_id FROM (
       SELECT ${COL.threadId}, pg_catalog.max(${COL.createdAt}) AS at FROM ${t.checkpoints} GROUP BY ${COL.threadId}
       UNION ALL SELECT DISTINCT ${COL.threadId}, NULL::timestamptz FROM ${t.writes}
       UNION ALL SELECT DISTINCT ${COL.threadId}, NULL::timestamptz FROM ${t.blobs}
     ) x GROUP BY ${COL.threadId} ORDER BY pg_catalog.max(at) DESC NULLS LAST, ${COL.threadId}`,
  );
  return rows.map((r) => r.thread_id);
}
