/**
 * Read what the checkpointer stored, and move threads between databases.
 * Plain functions over a pool (pg or PGlite), the same shapes the CLI prints:
 * {@link migrationStatus}, {@link listThreads}, {@link history}, {@link show},
 * {@link exportThread} and {@link importThread}.
 *
 * The export format is JSON lines, one record per stored row. Each value is
 * carried twice: `value` (base64 of the exact stored bytes, with its `type`)
 * is what {@link importThread} writes back, byte for byte; `decoded` is the
 * same value decoded into JSON with type-preserving tags (see
 * {@link toJsonSafe}), for people and tools, and is ignored on import.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { dbOf, type Db, type PGliteLike, type Row } from "../db/db.js";
import { CheckpointerError, DatabaseOperationError, HistoryCorruptError, InvalidInputError, sqlStateOf } from "../errors.js";
import { ADOPTION_TABLE, readAdoption, type AdoptionRecord } from "./adopt.js";
import { MIGRATIONS_TABLE, assertSchemaCurrent, latestVersion, loadMigrations, schemaLevel } from "../db/migrate.js";
import { decodeMetadata } from "../serde/metadata.js";
import { loadsForRow, type ValueRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde.js";
import { LIMITS, checkKey, checkSchemaName, quoteIdent } from "../validate.js";

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
async function open(options: InspectOptions): Promise<Ctx> {
  if (options === null || typeof options !== "object") throw new InvalidInputError("options", "expected { pool, schema? }");
  const db = toDb(options.pool);
  const schema = checkSchemaName(options.schema ?? "public");
  await assertSchemaCurrent(db, schema, "inspect");
  const s = quoteIdent(schema);
  return {
    db,
    schema,
    t: { checkpoints: `${s}.checkpoints`, writes: `${s}.checkpoint_writes`, blobs: `${s}.checkpoint_blobs`, heads: `${s}.checkpoint_heads` },
    serde: options.serde ?? new MsgpackSerializer(),
  };
}

async function run<R extends Row>(db: Pick<Db, "query">, what: string, text: string, values: unknown[] = []): Promise<R[]> {
  try {
    return (await db.query<R>(text, values)).rows;
  } catch (err) {
    throw err instanceof CheckpointerError ? err : new DatabaseOperationError(what, err);
  }
}

// ---------------------------------------------------------------------------
// JSON-safe values
// ---------------------------------------------------------------------------

/**
 * A decoded value as JSON, keeping what JSON cannot say in tagged objects:
 * `{"$type":"undefined"}`, `{"$type":"bigint","value":"12"}`,
 * `{"$type":"Date","value":"2026-01-01T00:00:00.000Z"}`, `{"$type":"Map","entries":[[k,v]]}`,
 * `{"$type":"Set","values":[...]}`, `{"$type":"Uint8Array","base64":"..."}`,
 * `{"$type":"number","value":"NaN"}` (also `Infinity`, `-Infinity`, `-0`),
 * `{"$type":"RegExp","source","flags"}`, `{"$type":"Error","name","message"}`,
 * `{"$type":"lc","id":[...],"kwargs":{...}}` (LangChain objects such as messages),
 * `{"$type":"<Class>","value":{...}}` (other class instances). A plain object
 * that itself has a `$type` key is wrapped as `{"$type":"object","value":{...}}`.
 *
 * @example
 * ```ts
 * toJsonSafe({ seen: new Set([1]), at: new Date(0) });
 * // { seen: { $type: "Set", values: [1] }, at: { $type: "Date", value: "1970-01-01T00:00:00.000Z" } }
 * ```
 */
export function toJsonSafe(value: unknown): unknown {
  return jsonSafe(value, 0);
}

function jsonSafe(value: unknown, depth: number): unknown {
  if (depth > 600) return { $type: "truncated" };
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (Object.is(value, -0)) return { $type: "number", value: "-0" };
      return Number.isFinite(value) ? value : { $type: "number", value: String(value) };
    case "bigint":
      return { $type: "bigint", value: value.toString() };
    case "undefined":
      return { $type: "undefined" };
    case "symbol":
    case "function":
      return { $type: typeof value, value: String(value) };
  }
  if (value === null) return null;
  const next = (v: unknown) => jsonSafe(v, depth + 1);
  if (Array.isArray(value)) return Array.from(value, next);
  if (value instanceof Date) return { $type: "Date", value: Number.isNaN(value.getTime()) ? null : value.toISOString() };
  if (value instanceof Map) return { $type: "Map", entries: [...value].map(([k, v]) => [next(k), next(v)]) };
  if (value instanceof Set) return { $type: "Set", values: [...value].map(next) };
  if (value instanceof Uint8Array && (value.constructor === Uint8Array || Buffer.isBuffer(value))) {
    return { $type: "Uint8Array", base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  }
  if (value instanceof ArrayBuffer) return { $type: "ArrayBuffer", base64: Buffer.from(value).toString("base64") };
  if (value instanceof DataView) return { $type: "DataView", base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  if (ArrayBuffer.isView(value)) return { $type: value.constructor.name, values: Array.from(value as unknown as ArrayLike<unknown>, next) };
  if (value instanceof RegExp) return { $type: "RegExp", source: value.source, flags: value.flags };
  if (value instanceof Error) {
    const out: Record<string, unknown> = { $type: "Error", name: value.name, message: value.message };
    if (value.stack !== undefined) out.stack = value.stack;
    if ("cause" in value) out.cause = next(value.cause);
    return out;
  }
  const obj = value as Record<string, unknown>;
  if (obj.lc_serializable === true && typeof obj.toJSON === "function") {
    const json = (obj.toJSON as () => { id?: unknown; kwargs?: unknown })();
    return { $type: "lc", id: json.id, kwargs: next(json.kwargs) };
  }
  const entries: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) entries[k] = next(v);
  const proto = Object.getPrototypeOf(obj) as object | null;
  if (proto !== Object.prototype && proto !== null) return { $type: (proto.constructor as { name?: string } | undefined)?.name || "object", value: entries };
  return Object.prototype.hasOwnProperty.call(obj, "$type") ? { $type: "object", value: entries } : entries;
}

/**
 * Decode a value stored in `row`; never throws (an undecodable value is
 * described, its bytes are kept elsewhere).
 */
async function decodeStored(
  serde: SerializerProtocol,
  type: string,
  value: Uint8Array | null,
  row: ValueRow,
): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  if (type === "empty") return { ok: true, value: undefined };
  try {
    return { ok: true, value: await loadsForRow(serde, type, value ?? new Uint8Array(), row) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

async function decodeSafe(serde: SerializerProtocol, type: string, value: Uint8Array | null, row: ValueRow): Promise<unknown> {
  const d = await decodeStored(serde, type, value, row);
  return d.ok ? toJsonSafe(d.value) : { $type: "undecodable", error: d.error };
}

/** `metadata_raw` is plain msgpack whatever the serializer (metadata is never encrypted): decoded as the saver does. */
async function decodeMetadataRaw(json: unknown, raw: Uint8Array | null): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  try {
    return { ok: true, value: await decodeMetadata(json, raw) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
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
    [s, [MIGRATIONS_TABLE, "checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_heads", ADOPTION_TABLE]],
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
  for (const table of ["checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_heads"] as const) {
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

/** One line of {@link listThreads}. */
export interface ThreadSummary {
  threadId: string;
  checkpoints: number;
  namespaces: number;
  writes: number;
  blobs: number;
  /** Approximate stored size in bytes: checkpoint and metadata columns, blob and write values. */
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
       SELECT thread_id, pg_catalog.count(*) AS checkpoints, pg_catalog.count(DISTINCT checkpoint_ns) AS namespaces, pg_catalog.max(created_at) AS last_update,
              pg_catalog.sum(pg_catalog.pg_column_size(checkpoint) + pg_catalog.pg_column_size(metadata) + coalesce(pg_catalog.octet_length(metadata_raw), 0)) AS bytes
         FROM ${t.checkpoints} WHERE $2::text[] IS NULL OR thread_id = ANY($2::text[])
        GROUP BY thread_id ORDER BY pg_catalog.max(created_at) DESC, thread_id LIMIT $1
     )
     SELECT c.thread_id, c.checkpoints::text, c.namespaces::text, pg_catalog.to_json(c.last_update) #>> '{}' AS last_update,
            w.n::text AS writes, b.n::text AS blobs, (c.bytes + coalesce(w.bytes, 0) + coalesce(b.bytes, 0))::text AS bytes
       FROM c
       LEFT JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.sum(coalesce(pg_catalog.octet_length(value), 0)) AS bytes FROM ${t.writes} WHERE thread_id = c.thread_id) w ON true
       LEFT JOIN LATERAL (SELECT pg_catalog.count(*) AS n, pg_catalog.sum(coalesce(pg_catalog.octet_length(value), 0)) AS bytes FROM ${t.blobs} WHERE thread_id = c.thread_id) b ON true
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
    `SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata ->> 'source' AS source, metadata ->> 'step' AS step,
            EXISTS (SELECT 1 FROM ${t.heads} h WHERE h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns AND h.checkpoint_id = c.checkpoint_id) AS is_head,
            pg_catalog.to_json(created_at) #>> '{}' AS created_at
       FROM ${t.checkpoints} c WHERE thread_id = $1 AND ($2::text IS NULL OR checkpoint_ns = $2)
      ORDER BY checkpoint_ns, checkpoint_id`,
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
  /** The stored checkpoint: `v`, `id`, `ts`, `channel_versions`, `versions_seen`, `updated_channels` (channel values live in blobs). */
  checkpoint: Record<string, unknown>;
  metadata: unknown;
  /** One per `channel_versions` entry: the blob it points at. `type` is `empty` for a channel without a value, `missing` if no blob row exists. */
  channels: { channel: string; version: string; type: string; value: unknown }[];
  /** Channel values the checkpoint holds without a version (e.g. `__pregel_tasks: []`), stored with its row. */
  unversioned: { channel: string; value: unknown }[];
  /** The writes tasks produced from this checkpoint, in `(task_path, task_id, idx)` order. */
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
    `SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata, c.metadata_raw, h.checkpoint_id IS NOT NULL AS is_head,
            pg_catalog.to_json(c.created_at) #>> '{}' AS created_at, c.ttl_seconds, c.unversioned_type, c.unversioned_values
       FROM ${t.checkpoints} c
       LEFT JOIN ${t.heads} h ON h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns AND h.checkpoint_id = c.checkpoint_id
      WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
        AND c.checkpoint_id = coalesce($3::text, (SELECT checkpoint_id FROM ${t.heads} WHERE thread_id = $1 AND checkpoint_ns = $2))`,
    [threadId, ns, id],
  );
  if (!cp) return undefined;
  const versions = Object.entries((cp.checkpoint.channel_versions ?? {}) as Record<string, unknown>).map(([c, v]) => [c, String(v)] as const);
  const blobs = await run<{ channel: string; version: string; type: string; value: Uint8Array | null }>(
    db,
    "reading channel values",
    `SELECT b.channel, b.version, b.type, b.value FROM ${t.blobs} b
       JOIN ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[])) AS cv(channel, version) ON b.channel = cv.channel AND b.version = cv.version
      WHERE b.thread_id = $1 AND b.checkpoint_ns = $2`,
    [threadId, ns, versions.map(([c]) => c), versions.map(([, v]) => v)],
  );
  const writes = await run<{ task_id: string; idx: number; channel: string; type: string; value: Uint8Array | null; task_path: string }>(
    db,
    "reading pending writes",
    `SELECT task_id, idx, channel, type, value, task_path FROM ${t.writes}
      WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 ORDER BY task_path, task_id, idx`,
    [threadId, ns, cp.checkpoint_id],
  );
  const blobOf = new Map(blobs.map((b) => [b.channel, b]));
  const decode = async (type: string, value: Uint8Array | null, row: ValueRow) => {
    const d = await decodeStored(serde, type, value, row);
    return d.ok ? d.value : { $type: "undecodable", error: d.error };
  };
  const key = { threadId, checkpointNs: ns };
  const { channel_values: _none, ...checkpoint } = cp.checkpoint;
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
        return { channel, version, type: b.type, value: await decode(b.type, b.value, { table: "checkpoint_blobs", ...key, channel, version: b.version }) };
      }),
    ),
    unversioned: undecodable ? [{ channel: "*", value: unversioned }] : Object.entries(unversioned).map(([channel, value]) => ({ channel, value })),
    pendingWrites: await Promise.all(
      writes.map(async (w) => ({
        taskId: w.task_id,
        idx: w.idx,
        channel: w.channel,
        type: w.type,
        taskPath: w.task_path,
        value: await decode(w.type, w.value, { table: "checkpoint_writes", ...key, checkpointId: cp.checkpoint_id, taskId: w.task_id, idx: w.idx }),
      })),
    ),
  };
}

// ---------------------------------------------------------------------------
// export / import
// ---------------------------------------------------------------------------

/** Name and version of the export format (the first line of an export file). */
export const EXPORT_FORMAT = "langgraph-checkpoint-pg/export";
export const EXPORT_FORMAT_VERSION = 1;

/** First line of an export file. */
export interface ExportHeader {
  kind: "header";
  format: typeof EXPORT_FORMAT;
  version: number;
  /** Migration version of the schema the rows were read from. */
  schema_version: number;
  exported_at: string;
}

/**
 * A row of `checkpoints`, every column under its own name (columns added by
 * later migrations appear as further fields), and `is_head`: whether the
 * lineage's `checkpoint_heads` row names it. `checkpoint` and `metadata` are
 * the stored JSON; `metadata_raw` (base64) is set when the metadata needed
 * exact msgpack, and then `metadata_decoded` shows it (ignored on import).
 */
export interface CheckpointRecord {
  kind: "checkpoint";
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint: Record<string, unknown>;
  metadata: unknown;
  metadata_raw: string | null;
  is_head: boolean;
  row_version: number;
  created_at: string;
  ttl_seconds?: number | null;
  metadata_decoded?: unknown;
  /** The values of channels without a version, decoded from `unversioned_values` (ignored on import). */
  unversioned_decoded?: unknown;
}

/** A row of `checkpoint_writes`: `value` is base64 of the stored bytes, `decoded` the tagged JSON (ignored on import). */
export interface WriteRecord {
  kind: "write";
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  task_id: string;
  idx: number;
  channel: string;
  type: string;
  value: string | null;
  task_path: string;
  row_version: number;
  decoded?: unknown;
}

/** A row of `checkpoint_blobs`: `value` is base64 of the stored bytes (null for `type: "empty"`), `decoded` the tagged JSON. */
export interface BlobRecord {
  kind: "blob";
  thread_id: string;
  checkpoint_ns: string;
  channel: string;
  version: string;
  type: string;
  value: string | null;
  row_version: number;
  decoded?: unknown;
}

/** Last record of a thread: its row counts, so a truncated file is detected instead of half-imported. */
export interface EndRecord {
  kind: "end";
  thread_id: string;
  checkpoints: number;
  writes: number;
  blobs: number;
}

export type ExportRecord = CheckpointRecord | WriteRecord | BlobRecord | EndRecord;

/** Record fields that are not columns: informational, never written. */
const NOT_COLUMNS = new Set(["kind", "decoded", "metadata_decoded", "unversioned_decoded"]);

const TABLES = { checkpoint: "checkpoints", write: "checkpoint_writes", blob: "checkpoint_blobs" } as const;
type TableKind = keyof typeof TABLES;

/**
 * The header line of an export file (written once, before any thread).
 *
 * @example
 * ```ts
 * out.write(JSON.stringify(exportHeader()) + "\n");
 * ```
 */
export function exportHeader(): ExportHeader {
  return { kind: "header", format: EXPORT_FORMAT, version: EXPORT_FORMAT_VERSION, schema_version: latestVersion(), exported_at: new Date().toISOString() };
}

/** A field of a record: a column of its table, or `is_head` (a checkpoint's `checkpoint_heads` row, stored apart). */
interface Field {
  bytea: boolean;
  head?: true;
}

/**
 * Columns of the three tables in `schema`, in table order, and which hold
 * bytes; checkpoints also carry `is_head`, so an export names the heads and
 * reads the same whatever table keeps them.
 */
async function tableColumns(db: Pick<Db, "query">, schema: string): Promise<Record<TableKind, Map<string, Field>>> {
  const rows = await run<{ table: string; name: string; bytea: boolean }>(
    db,
    "reading table columns",
    `SELECT c.relname AS table, a.attname AS name, a.atttypid = 'bytea'::regtype AS bytea
       FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`,
    [schema, Object.values(TABLES)],
  );
  const out = { checkpoint: new Map(), write: new Map(), blob: new Map() } as Record<TableKind, Map<string, Field>>;
  for (const r of rows) {
    const kind = (Object.keys(TABLES) as TableKind[]).find((k) => TABLES[k] === r.table)!;
    out[kind].set(r.name, { bytea: r.bytea });
  }
  out.checkpoint.set("is_head", { bytea: false, head: true });
  return out;
}

/** `to_jsonb` writes bytea as `\x` + hex. */
const hexToBytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex.slice(2), "hex"));
const hexToBase64 = (hex: unknown): string | null => (typeof hex === "string" ? Buffer.from(hex.slice(2), "hex").toString("base64") : null);

/**
 * Every stored row of a thread (all namespaces, every column), read in one
 * consistent snapshot: checkpoints, then writes, then blobs, then an `end`
 * record. Empty (no records at all) when the thread does not exist.
 *
 * @example
 * ```ts
 * for (const record of await exportThread({ pool, threadId: "12345" })) out.write(JSON.stringify(record) + "\n");
 * ```
 */
export async function exportThread(options: InspectOptions & { threadId: string }): Promise<ExportRecord[]> {
  const threadId = checkKey("threadId", options.threadId, LIMITS.thread_id);
  const { db, t, schema, serde } = await open(options);
  const [columns, cps, writes, blobs] = await db
    .transaction(async (tx) => {
      // One snapshot: a run writing to the thread meanwhile is either all in or all out.
      await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      // bytea as `\x` + hex whatever the server's default output format.
      await tx.query("SET LOCAL bytea_output = 'hex'");
      // to_jsonb: every column, including ones later migrations add; bytea as hex, timestamps to the microsecond.
      const read = (table: string, order: string, extra = "") =>
        run<{ r: Record<string, unknown> }>(tx, "exporting a thread", `SELECT pg_catalog.to_jsonb(x)${extra} AS r FROM ${table} x WHERE thread_id = $1 ORDER BY ${order}`, [
          threadId,
        ]);
      const isHead = ` || pg_catalog.jsonb_build_object('is_head', EXISTS (SELECT 1 FROM ${t.heads} h
                           WHERE h.thread_id = x.thread_id AND h.checkpoint_ns = x.checkpoint_ns AND h.checkpoint_id = x.checkpoint_id))`;
      return [
        await tableColumns(tx, schema),
        await read(t.checkpoints, "checkpoint_ns, checkpoint_id", isHead),
        await read(t.writes, "checkpoint_ns, checkpoint_id, task_path, task_id, idx"),
        await read(t.blobs, "checkpoint_ns, channel, version"),
      ] as const;
    })
    .catch((err: unknown) => {
      throw err instanceof CheckpointerError ? err : new DatabaseOperationError("exporting a thread", err);
    });
  if (cps.length + writes.length + blobs.length === 0) return [];
  const toRecord = (kind: TableKind, row: Record<string, unknown>): Record<string, unknown> => {
    const record: Record<string, unknown> = { kind };
    for (const [name, col] of columns[kind]) record[name] = col.bytea ? hexToBase64(row[name]) : row[name];
    return record;
  };
  const records: ExportRecord[] = [];
  for (const { r } of cps) {
    const record = toRecord("checkpoint", r) as unknown as CheckpointRecord;
    if (typeof r.metadata_raw === "string") {
      const d = await decodeMetadataRaw(r.metadata, hexToBytes(r.metadata_raw));
      record.metadata_decoded = d.ok ? toJsonSafe(d.value) : { $type: "undecodable", error: d.error };
    }
    if (typeof r.unversioned_values === "string") {
      const row: ValueRow = { table: "checkpoints", threadId, checkpointNs: String(r.checkpoint_ns), checkpointId: String(r.checkpoint_id) };
      record.unversioned_decoded = await decodeSafe(serde, String(r.unversioned_type), hexToBytes(r.unversioned_values), row);
    }
    records.push(record);
  }
  for (const [kind, rows] of [["write", writes] as const, ["blob", blobs] as const]) {
    for (const { r } of rows) {
      const record = toRecord(kind, r) as unknown as WriteRecord | BlobRecord;
      const type = String(r.type);
      const row: ValueRow =
        kind === "blob"
          ? { table: "checkpoint_blobs", threadId, checkpointNs: String(r.checkpoint_ns), channel: String(r.channel), version: String(r.version) }
          : { table: "checkpoint_writes", threadId, checkpointNs: String(r.checkpoint_ns), checkpointId: String(r.checkpoint_id), taskId: String(r.task_id), idx: Number(r.idx) };
      if (type !== "empty") record.decoded = await decodeSafe(serde, type, typeof r.value === "string" ? hexToBytes(r.value) : null, row);
      records.push(record);
    }
  }
  records.push({ kind: "end", thread_id: threadId, checkpoints: cps.length, writes: writes.length, blobs: blobs.length });
  return records;
}

/**
 * Importing a thread that already has rows in the target. Nothing was written.
 * (Code `INVALID_INPUT`: the input conflicts with what is stored.)
 *
 * @example
 * ```ts
 * try { await importThread({ pool, records }); } catch (e) { if (e instanceof ThreadExistsError) console.log(e.threadId); }
 * ```
 */
export class ThreadExistsError extends CheckpointerError {
  readonly threadId: string;
  constructor(threadId: string, options?: { cause?: unknown }) {
    super(
      "INVALID_INPUT",
      `Thread ${JSON.stringify(threadId)} already exists in the target; nothing was imported. ` +
        `Delete it first (\`npx langgraph-checkpoint-pg threads delete ${JSON.stringify(threadId)}\` or \`saver.deleteThread(id)\`), ` +
        "or skip existing threads (`import --skip-existing`, `ifExists: \"skip\"`).",
      options,
    );
    this.threadId = threadId;
  }
}

/** What {@link importThread} did. */
export interface ImportResult {
  threadId: string;
  /** `imported`, or `skipped` (the thread existed and `ifExists: "skip"`). */
  status: "imported" | "skipped";
  checkpoints: number;
  writes: number;
  blobs: number;
}

/**
 * Write one thread's exported records into the target, byte for byte: the
 * same rows (every column: `row_version`, `created_at`, raw values and
 * their types) and the same lineage heads (`is_head`), in ONE transaction,
 * so `getState` / `getStateHistory` read exactly as in the source. The
 * records are checked before anything is written; a record field that is not
 * a column of the target table is refused (never silently dropped).
 *
 * A thread that already has rows in the target is refused
 * ({@link ThreadExistsError}, nothing written) unless `ifExists: "skip"`;
 * threads are never merged. Of two concurrent imports of one thread, one
 * commits, the other fails on the primary key and writes nothing.
 *
 * @example
 * ```ts
 * const records = await exportThread({ pool: source, threadId: "12345" });
 * await importThread({ pool: target, schema: "restored", records });
 * ```
 */
export async function importThread(
  options: Omit<InspectOptions, "serde"> & { records: readonly (ExportRecord | ExportHeader)[]; ifExists?: "fail" | "skip" },
): Promise<ImportResult> {
  const ifExists = options.ifExists ?? "fail";
  if (ifExists !== "fail" && ifExists !== "skip") throw new InvalidInputError("ifExists", 'expected "fail" or "skip"');
  const { threadId, rows } = validateRecords(options.records);
  const { db, t, schema } = await open(options);
  const tables = { checkpoint: t.checkpoints, write: t.writes, blob: t.blobs };
  try {
    return await db.transaction(async (tx) => {
      const columns = await tableColumns(tx, schema);
      // Map each record onto the target's columns: bytes from base64 to bytea's `\x` text, everything else as is.
      const prepared = { checkpoint: [], write: [], blob: [] } as Record<TableKind, { row: Record<string, unknown>; size: number }[]>;
      const used = { checkpoint: new Set<string>(), write: new Set<string>(), blob: new Set<string>() };
      const heads: { ns: string[]; ids: string[] } = { ns: [], ids: [] };
      for (const { kind, record, at } of rows) {
        const row: Record<string, unknown> = {};
        let size = 0;
        for (const [name, value] of Object.entries(record)) {
          if (NOT_COLUMNS.has(name)) continue;
          const col = columns[kind].get(name);
          if (!col) throw new InvalidInputError(`${at}.${name}`, `is not a column of ${TABLES[kind]} in schema "${schema}" (an export from a newer schema?)`);
          if (col.head) {
            if (value === true) {
              heads.ns.push(String(record.checkpoint_ns));
              heads.ids.push(String(record.checkpoint_id));
            }
            continue;
          }
          if (col.bytea && value !== null) {
            if (typeof value !== "string" || !BASE64.test(value)) throw new InvalidInputError(`${at}.${name}`, "expected base64 or null");
            row[name] = `\\x${Buffer.from(value, "base64").toString("hex")}`;
            size += value.length;
          } else {
            row[name] = value;
          }
          used[kind].add(name);
        }
        prepared[kind].push({ row, size });
      }
      const [exists] = await run<{ found: boolean }>(
        tx,
        "checking the target thread",
        `SELECT EXISTS (SELECT 1 FROM ${t.checkpoints} WHERE thread_id = $1)
             OR EXISTS (SELECT 1 FROM ${t.writes} WHERE thread_id = $1)
             OR EXISTS (SELECT 1 FROM ${t.blobs} WHERE thread_id = $1) AS found`,
        [threadId],
      );
      if (exists!.found) {
        if (ifExists === "skip") return { threadId, status: "skipped" as const, checkpoints: 0, writes: 0, blobs: 0 };
        throw new ThreadExistsError(threadId);
      }
      for (const kind of ["checkpoint", "write", "blob"] as const) {
        // Columns the records do not carry (an export from an older schema) take their defaults.
        const cols = [...columns[kind].keys()].filter((c) => used[kind].has(c)).map(quoteIdent).join(", ");
        const all = prepared[kind];
        for (let i = 0; i < all.length; ) {
          // Bounded statements: at most CHUNK rows or about CHUNK_BYTES of values each.
          let j = i;
          let bytes = 0;
          while (j < all.length && j - i < CHUNK && (j === i || bytes + all[j]!.size <= CHUNK_BYTES)) bytes += all[j++]!.size;
          await tx.query(`INSERT INTO ${tables[kind]} (${cols}) SELECT ${cols} FROM pg_catalog.jsonb_populate_recordset(NULL::${tables[kind]}, $1::text::jsonb)`, [
            JSON.stringify(all.slice(i, j).map((p) => p.row)),
          ]);
          i = j;
        }
      }
      await tx.query(
        `INSERT INTO ${t.heads} (thread_id, checkpoint_ns, checkpoint_id, moved_at, has_pending_tasks)
         SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.created_at, c.has_pending_tasks
           FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS h(ns, id)
           JOIN ${t.checkpoints} c ON c.thread_id = $1 AND c.checkpoint_ns = h.ns AND c.checkpoint_id = h.id`,
        [threadId, heads.ns, heads.ids],
      );
      return { threadId, status: "imported" as const, checkpoints: prepared.checkpoint.length, writes: prepared.write.length, blobs: prepared.blob.length };
    });
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    // A concurrent import of the same thread committed first.
    if (sqlStateOf(err) === "23505") throw new ThreadExistsError(threadId, { cause: err });
    throw new DatabaseOperationError("importing a thread", err);
  }
}

/** Rows per INSERT statement, and bytes of values (keeps each statement bounded on long threads). */
const CHUNK = 1000;
const CHUNK_BYTES = 16 * 1024 * 1024;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

interface Validated {
  threadId: string;
  rows: { kind: TableKind; record: Record<string, unknown>; at: string }[];
}

/**
 * Check one thread's records the way {@link importThread} does before it
 * writes anything (fields, one thread, end-record counts); throws
 * {@link InvalidInputError} naming the record and field. Returns the thread id.
 *
 * @example
 * ```ts
 * const threadId = checkRecords(records); // throws on the first bad field
 * ```
 */
export function checkRecords(records: readonly (ExportRecord | ExportHeader)[]): string {
  return validateRecords(records).threadId;
}

function validateRecords(records: readonly (ExportRecord | ExportHeader)[]): Validated {
  if (!Array.isArray(records)) throw new InvalidInputError("records", "expected an array of export records");
  let threadId: string | undefined;
  let end: EndRecord | undefined;
  const rows: Validated["rows"] = [];
  const counts = { checkpoint: 0, write: 0, blob: 0 };
  const keys = new Map<string, number>();
  const heads = new Map<string, number>();
  records.forEach((record, i) => {
    const at = `records[${i}]`;
    if (record === null || typeof record !== "object" || Array.isArray(record)) throw new InvalidInputError(at, "expected an object");
    const r = record as unknown as Record<string, unknown>;
    const key = (field: string, limit: number, allowEmpty = false) => checkKey(`${at}.${field}`, r[field], limit, { allowEmpty });
    const text = (field: string) => {
      if (typeof r[field] !== "string" || (r[field] as string).includes("\u0000")) throw new InvalidInputError(`${at}.${field}`, "expected a string without NUL characters");
    };
    const int = (field: string, nullable = false) => {
      const v = r[field];
      if (nullable && (v === null || v === undefined)) return;
      if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new InvalidInputError(`${at}.${field}`, "expected an integer");
    };
    const bytes = (field: string) => {
      const v = r[field];
      if (v !== null && v !== undefined && (typeof v !== "string" || !BASE64.test(v))) throw new InvalidInputError(`${at}.${field}`, "expected base64 or null");
    };
    if (r.kind === "header") {
      if (r.format !== EXPORT_FORMAT) throw new InvalidInputError(`${at}.format`, `expected ${JSON.stringify(EXPORT_FORMAT)}`);
      if (typeof r.version !== "number" || r.version > EXPORT_FORMAT_VERSION) {
        throw new InvalidInputError(`${at}.version`, `format version ${String(r.version)} is newer than this code reads (${EXPORT_FORMAT_VERSION})`);
      }
      return;
    }
    if (end) throw new InvalidInputError(at, "comes after the thread's end record");
    const tid = key("thread_id", LIMITS.thread_id);
    if (threadId === undefined) threadId = tid;
    else if (tid !== threadId) throw new InvalidInputError(`${at}.thread_id`, `is ${JSON.stringify(tid)}, but these records are for thread ${JSON.stringify(threadId)}`);
    switch (r.kind) {
      case "checkpoint":
        key("checkpoint_ns", LIMITS.checkpoint_ns, true);
        key("checkpoint_id", LIMITS.checkpoint_id);
        if (r.parent_checkpoint_id !== null && r.parent_checkpoint_id !== undefined) key("parent_checkpoint_id", LIMITS.checkpoint_id);
        if (typeof r.is_head !== "boolean") throw new InvalidInputError(`${at}.is_head`, "expected a boolean");
        if (r.checkpoint === null || typeof r.checkpoint !== "object" || Array.isArray(r.checkpoint)) throw new InvalidInputError(`${at}.checkpoint`, "expected an object");
        if (r.metadata === undefined) throw new InvalidInputError(`${at}.metadata`, "is missing");
        int("row_version");
        if (r.created_at !== undefined && (typeof r.created_at !== "string" || Number.isNaN(Date.parse(r.created_at)))) {
          throw new InvalidInputError(`${at}.created_at`, "expected an ISO 8601 timestamp");
        }
        bytes("metadata_raw");
        break;
      case "write":
        key("checkpoint_ns", LIMITS.checkpoint_ns, true);
        key("checkpoint_id", LIMITS.checkpoint_id);
        key("task_id", LIMITS.task_id);
        key("channel", LIMITS.channel);
        text("task_path");
        text("type");
        int("idx");
        int("row_version");
        bytes("value");
        break;
      case "blob":
        key("checkpoint_ns", LIMITS.checkpoint_ns, true);
        key("channel", LIMITS.channel);
        key("version", LIMITS.version);
        text("type");
        int("row_version");
        bytes("value");
        break;
      case "end":
        end = record as EndRecord;
        return;
      default:
        throw new InvalidInputError(`${at}.kind`, 'expected "checkpoint", "write", "blob" or "end"');
    }
    const kind = r.kind as TableKind;
    // The target's keys would refuse these too, but only as a bare duplicate-key error.
    const id =
      kind === "checkpoint"
        ? [r.checkpoint_ns, r.checkpoint_id]
        : kind === "write"
          ? [r.checkpoint_ns, r.checkpoint_id, r.task_id, r.idx]
          : [r.checkpoint_ns, r.channel, r.version];
    const k = `${kind}\u0000${id.join("\u0000")}`;
    const dup = keys.get(k);
    if (dup !== undefined) throw new InvalidInputError(at, `repeats the key of records[${dup}] (a ${kind} is stored once)`);
    keys.set(k, i);
    if (kind === "checkpoint" && r.is_head === true) {
      const other = heads.get(r.checkpoint_ns as string);
      if (other !== undefined) throw new InvalidInputError(`${at}.is_head`, `records[${other}] is already the head of namespace ${JSON.stringify(r.checkpoint_ns)} (one head per lineage)`);
      heads.set(r.checkpoint_ns as string, i);
    }
    counts[kind]++;
    rows.push({ kind, record: r, at });
  });
  if (threadId === undefined) throw new InvalidInputError("records", "contain no rows of any thread");
  if (end && (end.checkpoints !== counts.checkpoint || end.writes !== counts.write || end.blobs !== counts.blob)) {
    throw new InvalidInputError(
      "records",
      `thread ${JSON.stringify(threadId)} is incomplete: its end record counts ${end.checkpoints}/${end.writes}/${end.blobs} ` +
        `checkpoints/writes/blobs, the records hold ${counts.checkpoint}/${counts.write}/${counts.blob}`,
    );
  }
  return { threadId, rows };
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
    `SELECT thread_id FROM (
       SELECT thread_id, pg_catalog.max(created_at) AS at FROM ${t.checkpoints} GROUP BY thread_id
       UNION ALL SELECT DISTINCT thread_id, NULL::timestamptz FROM ${t.writes}
       UNION ALL SELECT DISTINCT thread_id, NULL::timestamptz FROM ${t.blobs}
     ) x GROUP BY thread_id ORDER BY pg_catalog.max(at) DESC NULLS LAST, thread_id`,
  );
  return rows.map((r) => r.thread_id);
}
