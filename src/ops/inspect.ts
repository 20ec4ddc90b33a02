/**
 * Read what the checkpointer stored, and move threads between databases.
 * Plain functions over a pool (pg or PGlite), the same shapes the CLI prints:
 * {@link listThreads}, {@link history} and {@link threadIds} here;
 * `migrationStatus` in status.ts, `show` in show.ts (it decodes values, so it
 * loads the serializer), `exportThread` and `importThread` in transfer.ts.
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
import { assertSchemaCurrent } from "../db/migrate.js";
import { LIMITS, checkKey, checkSchemaName, quoteIdent } from "../validate.js";
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

export function toDb(pool: InspectOptions["pool"]): Db {
  if (pool === null || typeof pool !== "object" || typeof (pool as { query?: unknown }).query !== "function") {
    throw new InvalidInputError("pool", "expected a pg.Pool, a pg.Client or a PGlite instance");
  }
  return dbOf(pool);
}

interface Ctx {
  db: Db;
  schema: string;
  t: { checkpoints: string; writes: string; blobs: string; heads: string };
  /** The caller's serializer, if any (show.ts and transfer.ts default it: nothing here decodes values). */
  serde: SerializerProtocol | undefined;
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
    serde: options.serde,
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
  const { db, t, schema } = await open(options);
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
    if (loop !== undefined) throw new HistoryCorruptError({ schema, threadId, checkpointNs: lineage.checkpointNs, checkpointId: loop, reason: "cycle", operation: "history" });
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
