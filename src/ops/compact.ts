/**
 * Convert threads written with whole list values into element storage
 * (saver/elements.ts, issue #21): every `checkpoint_blobs` row whose value is
 * a plain, non-empty array becomes a refs value (type `pg:refs`, same key),
 * its elements and chunks element rows of the thread and namespace. The
 * checkpoints do not change: they name their blobs by version, and the
 * version stays.
 *
 * How it stays safe while graphs run and prune runs:
 * - **Readers** see a list whole before or whole after: the blob row's update
 *   and the element rows it names commit in one transaction.
 * - **prune** decides on element rows by the lists that name them. Each
 *   transaction holds prune's advisory lock of the thread
 *   ({@link pruneLockName}), so prune never runs on a thread in the middle of
 *   a batch; element rows a batch finds already stored are checked under
 *   that lock, so prune cannot delete them before the batch's lists commit.
 * - **puts** never change a blob row. A put with element storage may insert
 *   the same element rows at the same time (same bytes, same hash):
 *   `ON CONFLICT DO NOTHING` on both sides. Rows are inserted in the order
 *   a put inserts them (a list's elements by position, then its chunks), so
 *   the two wait for each other rather than deadlock; a batch that still meets
 *   a deadlock or serialization failure is retried.
 * - **Concurrent rewrites** (`reencrypt`, `deleteThread`): a row is updated
 *   only if its row_version and type are still those it was read with;
 *   otherwise it is left for the next run (counted as `listsSkipped`), and
 *   its element rows are not inserted.
 * - **deleteThread** takes the thread's deletion lock exclusively before it
 *   reads what to delete; each transaction here holds it shared (as every
 *   write does, saver/tombstones.ts), so a deletion either comes first (the
 *   lists are gone, nothing is inserted) or waits and deletes the element
 *   rows this transaction added too (issue #26, row 6).
 *
 * Serialization happens before a transaction starts: a transaction holds
 * only SQL. Decoding uses the serializer the saver uses; values are decoded
 * and their elements serialized again, exactly as a put with element storage
 * serializes them.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { dbOf, poolDb, type Db, type PGliteLike, type Queryable } from "../db/db.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import { CHECKPOINT_BLOBS as B } from "../db/names.js";
import { CheckpointerError, DatabaseOperationError, InvalidOptionsError } from "../errors.js";
import { guard, type HandlerErrorHandler } from "../events.js";
import { elementCodec, type ElementCodec } from "../saver/element-codec.js";
import { ELEMENTS_CHANNEL, REFS_TYPE, encodeList, isElementList, type ElementRow } from "../saver/elements.js";
import { pack } from "../saver/encode.js";
import { lockForWrite } from "../saver/tombstones.js";
import { loadsForRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { checkConnection, checkThreadId } from "./prune-options.js";
import { pruneLockName } from "./prune-sql.js";

/** Options of {@link compact}. */
export interface CompactOptions {
  /** A pool, client or PGlite instance the caller owns (never closed here). Give this or `connectionString`. */
  pool?: pg.Pool | pg.Client | PGliteLike;
  /** Used when no `pool` is given; the connection is closed afterwards. */
  connectionString?: string;
  /** Postgres schema holding the tables. Default `public`. */
  schema?: string;
  /**
   * The serializer your saver uses (default: `MsgpackSerializer`). Values are
   * decoded with it and their elements serialized with it (an
   * `EncryptedSerializer` seals each element for its row and keys its hash,
   * as a saver with `elementStorage` does). One that binds values to their
   * rows but cannot seal elements is refused: its values stay whole.
   */
  serde?: SerializerProtocol;
  /** Only these threads. Default: every thread in the schema. */
  threadIds?: readonly string[];
  /** Blob rows read per batch; the lists among them are rewritten in one transaction. Default 100. */
  batchSize?: number;
  /** Count what would be rewritten and added, change nothing. */
  dryRun?: boolean;
  /** Called after each batch with running totals; its failures never stop the run (see `onHandlerError`). */
  onProgress?: (progress: CompactProgress) => unknown;
  /** Receives every error `onProgress` throws or rejects with. */
  onHandlerError?: HandlerErrorHandler;
}

/** What compact did (or, for a dry run, would do). */
export interface CompactCounts {
  /** Threads visited. */
  threads: number;
  /** Threads with at least one list rewritten. */
  threadsCompacted: number;
  /** Blob rows rewritten from a whole list into its refs value. */
  lists: number;
  /** Element rows added (elements and chunks, under the channel `__elements__`). */
  elementRows: number;
  /** `octet_length` of the rewritten rows' values before. */
  bytesBefore: number;
  /** `octet_length` of the refs values that replaced them, plus that of the element rows added. */
  bytesAfter: number;
  /** Lists left whole because their row changed or went while compact ran (a later run converts them). */
  listsSkipped: number;
}

export interface CompactProgress extends CompactCounts {
  dryRun: boolean;
  /** The thread being worked on (threads are visited in id order). */
  threadId: string;
  elapsedMs: number;
}

export interface CompactResult extends CompactCounts {
  dryRun: boolean;
  durationMs: number;
}

/** A batch that met these (deadlock, serialization failure, lock timeout) is tried again this many times. */
const ATTEMPTS = 4;
const TRANSIENT = new Set(["40P01", "40001", "55P03"]);
/** First bytes of a non-empty msgpack array (fixarray 1-15, array 16, array 32): other msgpack values are not lists. */
const MSGPACK_ARRAY_STARTS = [...Array.from({ length: 15 }, (_, i) => 0x91 + i), 0xdc, 0xdd].map((b) => Buffer.from([b]));

/**
 * Convert the lists stored whole (threads written before element storage, or
 * by a saver without it) into element storage, thread by thread. Reads return
 * the same values before and after, from a saver with or without
 * `elementStorage`; a second run changes nothing. A release before element
 * storage cannot read converted lists (see README "Lists stored by their
 * elements"). Bad options throw {@link InvalidOptionsError} before any SQL.
 *
 * @example
 * ```ts
 * import { compact } from "langgraph-checkpoint-pg";
 * const preview = await compact({ pool, dryRun: true });
 * console.log(`${preview.lists} lists, ${preview.bytesBefore} -> ${preview.bytesAfter} bytes`);
 * const done = await compact({ pool, onProgress: (p) => console.log(`${p.threads} threads, ${p.lists} lists`) });
 * ```
 */
export async function compact(options: CompactOptions): Promise<CompactResult> {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { pool, serde?, threadIds?, ... }");
  const o = options;
  checkConnection(o);
  const schema = checkSchemaName(o.schema ?? "public");
  const serde = o.serde ?? new MsgpackSerializer();
  if (serde === null || typeof serde !== "object" || typeof serde.dumpsTyped !== "function" || typeof serde.loadsTyped !== "function") {
    throw new InvalidOptionsError("serde", "expected a serializer with dumpsTyped and loadsTyped");
  }
  const codec = elementCodec(serde);
  if (!codec) {
    throw new InvalidOptionsError("serde", "binds each value to its row but cannot seal an element for its own row: its lists stay whole");
  }
  let threadIds: string[] | undefined;
  if (o.threadIds !== undefined) {
    if (!Array.isArray(o.threadIds)) throw new InvalidOptionsError("threadIds", "expected an array of thread ids");
    if (o.threadIds.length === 0) throw new InvalidOptionsError("threadIds", "is empty; omit it to compact every thread");
    o.threadIds.forEach((id: unknown, i) => checkThreadId(id, `threadIds[${i}]`));
    // Byte order, as threads are visited otherwise.
    threadIds = [...new Set(o.threadIds)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  }
  const batchSize = o.batchSize ?? 100;
  if (typeof batchSize !== "number" || !Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > 100_000) {
    throw new InvalidOptionsError("batchSize", `expected an integer from 1 to 100000, got ${typeof batchSize === "number" ? String(batchSize) : typeof batchSize}`);
  }
  if (o.dryRun !== undefined && typeof o.dryRun !== "boolean") throw new InvalidOptionsError("dryRun", "expected true or false");
  if (o.onProgress !== undefined && typeof o.onProgress !== "function") throw new InvalidOptionsError("onProgress", "expected a function");
  if (o.onHandlerError !== undefined && typeof o.onHandlerError !== "function") throw new InvalidOptionsError("onHandlerError", "expected a function");
  const onProgress = guard(o.onProgress, "onProgress", o.onHandlerError);
  const dryRun = o.dryRun ?? false;

  const started = performance.now();
  const owned = o.pool === undefined ? new pg.Pool({ connectionString: o.connectionString, application_name: "langgraph-checkpoint-pg:compact", max: 1 }) : undefined;
  // An idle client dying must not crash the process; the next query reports it.
  owned?.on("error", () => undefined);
  const db: Db = owned ? poolDb(owned) : dbOf(o.pool!);
  const counts: CompactCounts = { threads: 0, threadsCompacted: 0, lists: 0, elementRows: 0, bytesBefore: 0, bytesAfter: 0, listsSkipped: 0 };
  // The default serializer's lists are msgpack arrays: other msgpack values need not be read and decoded.
  const arrayStarts = serde instanceof MsgpackSerializer ? MSGPACK_ARRAY_STARTS : null;
  const job: Job = { db, sql: buildSql(schema), lock: pruneLockName(schema), serde, codec, batchSize, dryRun, counts, arrayStarts };
  try {
    await assertSchemaCurrent(db, schema, "compact");
    for await (const threadId of threads(job, threadIds)) {
      counts.threads += 1;
      const before = counts.lists;
      await compactThread(job, threadId, () => onProgress?.({ ...counts, dryRun, threadId, elapsedMs: performance.now() - started }));
      if (counts.lists > before) counts.threadsCompacted += 1;
    }
  } finally {
    await owned?.end();
  }
  return { ...counts, dryRun, durationMs: performance.now() - started };
}

interface Job {
  db: Db;
  sql: Sql;
  lock: string;
  serde: SerializerProtocol;
  codec: ElementCodec;
  batchSize: number;
  dryRun: boolean;
  counts: CompactCounts;
  /** First bytes a msgpack value can start with to be a list (null: decode every value). */
  arrayStarts: Buffer[] | null;
}

/** A blob row as read. */
type BlobRow = {
  checkpoint_ns: string;
  channel: string;
  version: string;
  type: string;
  value: Uint8Array;
  row_version: string;
};

/** A list to rewrite: its row, what it was, its refs value and every hash it names. */
interface List {
  row: BlobRow;
  refs: Buffer;
  hashes: string[];
}

const rowKey = (ns: string, hash: string) => `${ns}\u0000${hash}`;

function buildSql(schema: string) {
  const bl = `${quoteIdent(schema)}.${B.table}`;
  const key = `${B.checkpointNs}, ${B.channel}, ${B.version}`;
  /** Keyset page of the thread ids in checkpoint_blobs (a loose index scan on its primary key). $1 after, $2 limit. */
  const threadPage = (first: boolean) => `/* langgraph-checkpoint-pg compact: threads */
WITH RECURSIVE t AS (
  SELECT (SELECT ${B.threadId} FROM ${bl} WHERE ${first ? "$1::text IS NULL" : `${B.threadId} > $1`} ORDER BY ${B.threadId} LIMIT 1) AS id
  UNION ALL
  SELECT (SELECT ${B.threadId} FROM ${bl} WHERE ${B.threadId} > t.id ORDER BY ${B.threadId} LIMIT 1) FROM t WHERE t.id IS NOT NULL
)
SELECT id FROM t WHERE id IS NOT NULL LIMIT $2`;
  /**
   * A page of a thread's blob rows that may hold a whole list: $1 thread, $2 limit, $3 first
   * bytes a msgpack value must start with (NULL: any), $4-$6 the key after which to go on.
   */
  const blobPage = (first: boolean) => `/* langgraph-checkpoint-pg compact: blobs */
SELECT ${key}, ${B.type} AS type, ${B.value} AS value, ${B.rowVersion}::text AS row_version FROM ${bl}
 WHERE ${B.threadId} = $1 AND ${B.channel} <> '${ELEMENTS_CHANNEL}' AND ${B.type} NOT IN ('empty', '${REFS_TYPE}') AND ${B.value} IS NOT NULL
   AND ($3::bytea[] IS NULL OR ${B.type} <> 'msgpack' OR pg_catalog.substring(${B.value}, 1, 1) = ANY ($3::bytea[]))
   ${first ? "AND $4::text IS NULL AND $5::text IS NULL AND $6::text IS NULL" : `AND (${key}) > ($4::text, $5::text, $6::text)`}
 ORDER BY ${key} LIMIT $2`;
  return {
    threadPage,
    blobPage,
    /**
     * Wait for thread $2's deletion lock, shared (a deletion in progress finishes first; one that
     * comes later waits for this transaction, then deletes what it wrote), then for prune's advisory
     * lock of the thread (lock name $1). Both held until the transaction ends.
     */
    lock: `/* langgraph-checkpoint-pg compact: lock */
SELECT x.locked FROM (SELECT ${lockForWrite(schema, "$2::text")} AS locked) x
 CROSS JOIN LATERAL (SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1::text), pg_catalog.hashtext($2::text)) OFFSET 0) y`,
    /**
     * Rewrite lists of thread $1 in place, each only if still as read ($5 row version, $6 type).
     * $2-$4 keys; the refs values packed in $9 at offsets $7, lengths $8.
     */
    update: `/* langgraph-checkpoint-pg compact: rewrite */
UPDATE ${bl} x SET ${B.type} = '${REFS_TYPE}', ${B.value} = pg_catalog.substring($9::bytea, u.off + 1, u.len), ${B.rowVersion} = x.${B.rowVersion} + 1
  FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::bigint[]),
                  pg_catalog.unnest($6::text[]), pg_catalog.unnest($7::int[]), pg_catalog.unnest($8::int[])) AS u(ns, channel, version, rv, type, off, len)
 WHERE x.${B.threadId} = $1 AND x.${B.checkpointNs} = u.ns AND x.${B.channel} = u.channel AND x.${B.version} = u.version
   AND x.${B.rowVersion} = u.rv AND x.${B.type} = u.type
RETURNING x.${B.checkpointNs} AS checkpoint_ns, x.${B.channel} AS channel, x.${B.version} AS version`,
    /** Which element rows of thread $1 exist: namespaces $2, hashes $3. */
    existing: `/* langgraph-checkpoint-pg compact: existing elements */
SELECT e.${B.checkpointNs} AS checkpoint_ns, e.${B.version} AS hash
  FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS u(ns, h)
  JOIN ${bl} e ON e.${B.threadId} = $1 AND e.${B.checkpointNs} = u.ns AND e.${B.channel} = '${ELEMENTS_CHANNEL}' AND e.${B.version} = u.h`,
    /** Insert element rows of thread $1 in the given order: namespaces $2, hashes $3, types $4, values packed in $7 ($5 offsets, $6 lengths). */
    insert: `/* langgraph-checkpoint-pg compact: elements */
INSERT INTO ${bl} (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}, ${B.type}, ${B.value})
SELECT $1, u.ns, '${ELEMENTS_CHANNEL}', u.h, u.type, pg_catalog.substring($7::bytea, u.off + 1, u.len)
  FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                  pg_catalog.unnest($5::int[]), pg_catalog.unnest($6::int[])) WITH ORDINALITY AS u(ns, h, type, off, len, n)
 ORDER BY u.n
ON CONFLICT (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}) DO NOTHING
RETURNING pg_catalog.octet_length(${B.value})::bigint AS bytes`,
  };
}

type Sql = ReturnType<typeof buildSql>;

async function* threads(job: Job, given: string[] | undefined): AsyncGenerator<string> {
  if (given) {
    yield* given;
    return;
  }
  let cursor: string | undefined;
  for (;;) {
    const { rows } = await run(job.db, "compact (listing threads)", job.sql.threadPage(cursor === undefined), [cursor ?? null, 100]);
    for (const r of rows) yield r.id as string;
    if (rows.length < 100) return;
    cursor = rows[rows.length - 1]!.id as string;
  }
}

async function compactThread(job: Job, threadId: string, progress: () => void): Promise<void> {
  const { db, sql, serde, batchSize, dryRun } = job;
  /** Dry run: element rows already counted as added (the real run would have inserted them by now). */
  const counted = new Set<string>();
  let cursor: [string, string, string] | undefined;
  for (;;) {
    const { rows } = await run<BlobRow>(db, "compact (reading blobs)", sql.blobPage(cursor === undefined), [
      threadId,
      batchSize,
      job.arrayStarts,
      ...(cursor ?? [null, null, null]),
    ]);
    if (rows.length === 0) return;
    const last = rows[rows.length - 1]!;
    cursor = [last.checkpoint_ns, last.channel, last.version];

    // Decode, then serialize the elements list by list, in key order: a put inserts the element rows
    // of its list in this order too (see the file comment). No transaction is open.
    const values = await Promise.all(
      rows.map((r) =>
        loadsForRow(serde, r.type, r.value, { table: "checkpoint_blobs", threadId, checkpointNs: r.checkpoint_ns, channel: r.channel, version: r.version }),
      ),
    );
    const lists: List[] = [];
    const elementRows = new Map<string, { ns: string; row: ElementRow }>();
    const sending = new Map<string, Set<string>>();
    for (let i = 0; i < rows.length; i++) {
      const value = values[i];
      if (!isElementList(value)) continue;
      const r = rows[i]!;
      let seen = sending.get(r.checkpoint_ns);
      if (!seen) sending.set(r.checkpoint_ns, (seen = new Set()));
      const list = { table: "checkpoint_blobs", threadId, checkpointNs: r.checkpoint_ns, channel: r.channel, version: r.version } as const;
      const encoded = await encodeList(job.codec, value, list, undefined, seen);
      if (!encoded) continue;
      for (const row of encoded.rows) elementRows.set(rowKey(r.checkpoint_ns, row.hash), { ns: r.checkpoint_ns, row });
      lists.push({ row: r, refs: encoded.refs, hashes: encoded.hashes });
    }
    if (lists.length > 0) {
      if (dryRun) await countBatch(job, threadId, lists, elementRows, counted);
      else await writeBatch(job, threadId, lists, elementRows);
    }
    progress();
    if (rows.length < batchSize) return;
  }
}

/** The hashes `lists` name, each once, per namespace, in the order their rows are inserted. */
function needed(lists: List[], elementRows: Map<string, { ns: string; row: ElementRow }>): string[] {
  const keys = new Set<string>();
  for (const l of lists) for (const h of l.hashes) keys.add(rowKey(l.row.checkpoint_ns, h));
  // elementRows is in insertion order (list by list, a list's elements by position, then its chunks).
  return [...elementRows.keys()].filter((k) => keys.has(k));
}

async function existingRows(tx: Queryable, sql: Sql, threadId: string, keys: string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const split = keys.map((k) => k.split("\u0000") as [string, string]);
  const { rows } = await tx.query<{ checkpoint_ns: string; hash: string }>(sql.existing, [threadId, split.map((s) => s[0]), split.map((s) => s[1])]);
  return new Set(rows.map((r) => rowKey(r.checkpoint_ns, r.hash)));
}

async function countBatch(job: Job, threadId: string, lists: List[], elementRows: Map<string, { ns: string; row: ElementRow }>, counted: Set<string>): Promise<void> {
  const { counts } = job;
  const keys = needed(lists, elementRows).filter((k) => !counted.has(k));
  const existing = await withErrors("compact (dry run)", () => existingRows(job.db, job.sql, threadId, keys));
  for (const l of lists) {
    counts.lists += 1;
    counts.bytesBefore += l.row.value.byteLength;
    counts.bytesAfter += l.refs.byteLength;
  }
  for (const k of keys) {
    if (existing.has(k)) continue;
    counted.add(k);
    counts.elementRows += 1;
    counts.bytesAfter += elementRows.get(k)!.row.bytes.byteLength;
  }
}

async function writeBatch(job: Job, threadId: string, lists: List[], elementRows: Map<string, { ns: string; row: ElementRow }>): Promise<void> {
  const { db, sql, counts } = job;
  const refs = pack(lists.map((l) => l.refs));
  const updateParams = [
    threadId,
    lists.map((l) => l.row.checkpoint_ns),
    lists.map((l) => l.row.channel),
    lists.map((l) => l.row.version),
    lists.map((l) => l.row.row_version),
    lists.map((l) => l.row.type),
    refs.offsets,
    refs.lengths,
    refs.bytes,
  ];
  const byKey = new Map(lists.map((l) => [`${l.row.checkpoint_ns}\u0000${l.row.channel}\u0000${l.row.version}`, l]));
  for (let attempt = 1; ; attempt++) {
    try {
      const done = await withErrors("compact (rewriting lists)", () =>
        db.transaction(async (tx) => {
          await tx.query(sql.lock, [job.lock, threadId]);
          const { rows } = await tx.query<{ checkpoint_ns: string; channel: string; version: string }>(sql.update, updateParams);
          const rewritten = rows.map((r) => byKey.get(`${r.checkpoint_ns}\u0000${r.channel}\u0000${r.version}`)!);
          // Element rows only for the lists rewritten; those already stored stay (prune waits for this transaction).
          const keys = needed(rewritten, elementRows);
          const existing = await existingRows(tx, sql, threadId, keys);
          const missing = keys.filter((k) => !existing.has(k)).map((k) => elementRows.get(k)!);
          let added: { bytes: string }[] = [];
          if (missing.length > 0) {
            const values = pack(missing.map((m) => m.row.bytes));
            added = (
              await tx.query<{ bytes: string }>(sql.insert, [
                threadId,
                missing.map((m) => m.ns),
                missing.map((m) => m.row.hash),
                missing.map((m) => m.row.type),
                values.offsets,
                values.lengths,
                values.bytes,
              ])
            ).rows;
          }
          return { rewritten, added };
        }),
      );
      counts.lists += done.rewritten.length;
      counts.listsSkipped += lists.length - done.rewritten.length;
      for (const l of done.rewritten) {
        counts.bytesBefore += l.row.value.byteLength;
        counts.bytesAfter += l.refs.byteLength;
      }
      counts.elementRows += done.added.length;
      for (const a of done.added) counts.bytesAfter += Number(a.bytes);
      return;
    } catch (err) {
      const state = err instanceof DatabaseOperationError ? err.sqlState : undefined;
      if (state === undefined || !TRANSIENT.has(state) || attempt >= ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, 25 * 2 ** attempt));
    }
  }
}

async function withErrors<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof CheckpointerError ? err : new DatabaseOperationError(what, err);
  }
}

function run<R extends Record<string, unknown>>(db: Db, what: string, text: string, values: unknown[]): Promise<{ rows: R[] }> {
  return withErrors(what, () => db.query<R>(text, values));
}
