/**
 * Convert values stored whole into the forms element storage gives them
 * (saver/stored.ts, issues #21 and #27): every row of `checkpoint_blobs`
 * (a channel's value at a version) and of `checkpoint_writes` (a task's
 * ordinary write) whose value a put or putWrites with element storage would
 * store otherwise — a list by its elements (`pg:refs`), an object holding
 * lists (`pg:obj:<type>`), a large value by content (`pg:val`) — is
 * rewritten in place into that form (same key), the element rows it names
 * added to the thread and namespace. A value element storage would store whole
 * stays untouched; so do special writes (negative idx: an interrupt, an
 * error, a resume), which the saver stores whole too. The checkpoints do not
 * change: they name their blobs by version, and the version stays.
 *
 * How it stays safe while graphs run and prune runs:
 * - **Readers** see a value whole before or in its new form after: the row's
 *   update and the element rows it names commit in one transaction.
 * - **prune** decides on element rows by the values that name them. Each
 *   transaction holds prune's advisory lock of the thread
 *   ({@link pruneLockName}), so prune never runs on a thread in the middle of
 *   a batch; element rows a batch finds already stored are checked under
 *   that lock, so prune cannot delete them before the batch's values commit.
 * - **puts and putWrites** never change a blob row, nor an ordinary write's
 *   row. They may insert the same element rows at the same time (same bytes,
 *   same hash). Every statement that inserts element rows sends them in key
 *   order (namespace, hash) and, meeting one stored already, touches it
 *   (`ON CONFLICT ... row_version + 1`): two such statements wait for each
 *   other rather than deadlock; a batch that still meets a deadlock or
 *   serialization failure is retried.
 * - **Concurrent rewrites** (`reencrypt`, `deleteThread`, a special write
 *   replaced): a row is updated only if its row_version and type are still
 *   those it was read with; otherwise it is left for the next run (counted as
 *   `valuesSkipped`), and its element rows are not inserted.
 * - **deleteThread** takes the thread's deletion lock exclusively before it
 *   reads what to delete; each transaction here holds it shared (as every
 *   write does, saver/tombstones.ts), so a deletion either comes first (the
 *   values are gone, nothing is inserted) or waits and deletes the element
 *   rows this transaction added too (issue #26, row 6).
 *
 * Serialization happens before a transaction starts: a transaction holds
 * only SQL. Values are decoded with the serializer the saver uses and encoded
 * by `encodeStored` (stored.ts), exactly as a put with element storage
 * encodes them. A value the serializer cannot decode (a Python object copied
 * by an adoption, a key that is not configured) is left whole and counted.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { dbOf, poolDb, type Db, type PGliteLike, type Queryable } from "../db/db.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import { CheckpointerError, DatabaseOperationError, DeserializationError, InvalidOptionsError, MigrationError, failureText } from "../errors.js";
import { guard, type HandlerErrorHandler } from "../events.js";
import { elementCodec, type ElementCodec } from "../saver/element-codec.js";
import type { ElementRow } from "../saver/elements.js";
import { pack } from "../saver/encode.js";
import { BY_CONTENT_MIN_BYTES, encodeStored, namesElements } from "../saver/stored.js";
import { loadsForRow, type ValueRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { checkSchemaName } from "../validate.js";
import { checkConnection, checkThreadId } from "./prune-options.js";
import { pruneLockName } from "./prune-sql.js";
import { buildSql, type Sql, type StoredRow, type TableSql } from "./compact-sql.js";

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
   * decoded with it and encoded with it as a saver with element storage
   * encodes them (an `EncryptedSerializer` seals each element for its row and
   * keys its hash). One that binds values to their rows but cannot seal
   * elements is refused: its values stay whole.
   */
  serde?: SerializerProtocol;
  /** Only these threads. Default: every thread in the schema. */
  threadIds?: readonly string[];
  /** Rows read per batch (blobs and writes apart); those converted among them are rewritten in one transaction. Default 100. */
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
  /** Threads with at least one value rewritten. */
  threadsCompacted: number;
  /** Rows rewritten from a whole value into a form stored by content (`pg:refs`, `pg:obj:...`, `pg:val`): blobs and writes. */
  values: number;
  /** Of {@link values}, pending writes (`checkpoint_writes` rows). */
  writes: number;
  /** Element rows added (elements and chunks, under the channel `__elements__`). */
  elementRows: number;
  /** `octet_length` of the rewritten rows' values before. */
  bytesBefore: number;
  /** `octet_length` of the values that replaced them, plus that of the element rows added. */
  bytesAfter: number;
  /** Values left whole because their row changed or went while compact ran (a later run converts them). */
  valuesSkipped: number;
  /** Values left whole because the serializer cannot decode them (a Python object, a key that is not configured: reads fail on them as before). */
  undecodable: number;
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
/** First bytes of a non-empty msgpack array (fixarray 1-15, array 16, array 32). */
const MSGPACK_ARRAY_STARTS = [...Array.from({ length: 15 }, (_, i) => 0x91 + i), 0xdc, 0xdd].map((b) => Buffer.from([b]));

/** What {@link compactWith} needs: the options, checked. */
interface Settings {
  schema: string;
  serde: SerializerProtocol;
  codec: ElementCodec;
  threadIds: string[] | undefined;
  batchSize: number;
  dryRun: boolean;
  onProgress: ((p: CompactProgress) => void) | undefined;
}

/**
 * Convert the values stored whole (threads written with `elementStorage:
 * false`, by an earlier commit, or adopted from the official saver) into the
 * forms element storage gives them, thread by thread: lists by their
 * elements, objects holding lists, large values by content; in blobs and in
 * pending writes. Reads return the same values before and after; a second
 * run changes nothing. A release before element storage cannot read
 * converted values (see docs/element-storage.md). Bad
 * options throw {@link InvalidOptionsError} before any SQL.
 *
 * @example
 * ```ts
 * import { compact } from "langgraph-checkpoint-pg";
 * const preview = await compact({ pool, dryRun: true });
 * console.log(`${preview.values} values, ${preview.bytesBefore} -> ${preview.bytesAfter} bytes`);
 * const done = await compact({ pool, onProgress: (p) => console.log(`${p.threads} threads, ${p.values} values`) });
 * ```
 */
export async function compact(options: CompactOptions): Promise<CompactResult> {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { pool, serde?, threadIds?, ... }");
  const o = options;
  checkConnection(o);
  const settings = readSettings(o);
  const owned = o.pool === undefined ? new pg.Pool({ connectionString: o.connectionString, application_name: "langgraph-checkpoint-pg:compact", max: 1 }) : undefined;
  // An idle client dying must not crash the process; the next query reports it.
  owned?.on("error", () => undefined);
  try {
    return await compactWith(owned ? poolDb(owned) : dbOf(o.pool!), settings);
  } finally {
    await owned?.end();
  }
}

/**
 * Compact every thread of `schema` through `db` (a saver's own connection): what `setup({ adopt })`
 * and `migrate --adopt` run right after an adoption committed, on what it copied whole (the official
 * saver's values, issue #27). Undefined when `serde` cannot store values by content (a saver with it
 * stores them whole too). A failure is a {@link MigrationError} saying the adoption is done and
 * what to run: a retried `setup` finds the adoption done and would not convert again.
 */
export async function compactAdopted(db: Db, schema: string, serde: SerializerProtocol): Promise<CompactResult | undefined> {
  if (!elementCodec(serde)) return undefined;
  const settings = readSettings({ schema, serde });
  try {
    return await compactWith(db, settings);
  } catch (err) {
    throw new MigrationError(
      `The adoption into schema "${schema}" is done, but storing what it copied by content failed ${failureText(err)}; ` +
        `those values stay whole and read as they are: run compact on schema "${schema}" to convert them`,
      { cause: err, migration: "adoption" },
    );
  }
}

function readSettings(o: Omit<CompactOptions, "pool" | "connectionString">): Settings {
  const schema = checkSchemaName(o.schema ?? "public");
  const serde = o.serde ?? new MsgpackSerializer();
  if (serde === null || typeof serde !== "object" || typeof serde.dumpsTyped !== "function" || typeof serde.loadsTyped !== "function") {
    throw new InvalidOptionsError("serde", "expected a serializer with dumpsTyped and loadsTyped");
  }
  const codec = elementCodec(serde);
  if (!codec) {
    throw new InvalidOptionsError("serde", "binds each value to its row but cannot seal an element for its own row: its values stay whole");
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
  return { schema, serde, codec, threadIds, batchSize, dryRun: o.dryRun ?? false, onProgress: guard(o.onProgress, "onProgress", o.onHandlerError) };
}

async function compactWith(db: Db, s: Settings): Promise<CompactResult> {
  const started = performance.now();
  const counts: CompactCounts = { threads: 0, threadsCompacted: 0, values: 0, writes: 0, elementRows: 0, bytesBefore: 0, bytesAfter: 0, valuesSkipped: 0, undecodable: 0 };
  // The default serializer's values that can only stay whole (neither a list nor large enough) need not be read and decoded.
  const arrayStarts = s.serde instanceof MsgpackSerializer ? MSGPACK_ARRAY_STARTS : null;
  const sql = buildSql(s.schema);
  const job: Job = { db, sql, lock: pruneLockName(s.schema), serde: s.serde, codec: s.codec, batchSize: s.batchSize, dryRun: s.dryRun, counts, arrayStarts };
  await assertSchemaCurrent(db, s.schema, "compact");
  for await (const threadId of threads(job, s.threadIds)) {
    counts.threads += 1;
    const before = counts.values;
    const progress = () => s.onProgress?.({ ...counts, dryRun: s.dryRun, threadId, elapsedMs: performance.now() - started });
    /** Dry run: element rows already counted as added (the real run would have inserted them by now). */
    const counted = new Set<string>();
    for (const table of [sql.blobs, sql.writes]) await compactTable(job, table, threadId, counted, progress);
    if (counts.values > before) counts.threadsCompacted += 1;
  }
  return { ...counts, dryRun: s.dryRun, durationMs: performance.now() - started };
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
  /** First bytes a msgpack value under the by-content size can start with to be a list (null: decode every value). */
  arrayStarts: Buffer[] | null;
}

/** A value to rewrite: its row as read, its new type and bytes, every hash it names. */
interface Conversion {
  row: StoredRow;
  type: string;
  bytes: Uint8Array;
  hashes: string[];
}

const rowKey = (ns: string, hash: string) => `${ns}\u0000${hash}`;

/** A row's key as one string (namespace, then `k0`...), to match what an update returns. */
const keyOf = (r: Record<string, unknown>, n: number) => Array.from({ length: n }, (_, i) => String(i === 0 ? r.checkpoint_ns : r[`k${i - 1}`])).join("\u0000");

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

async function compactTable(job: Job, table: TableSql, threadId: string, counted: Set<string>, progress: () => void): Promise<void> {
  const { db, serde, codec, batchSize, dryRun, counts } = job;
  let cursor: unknown[] | undefined;
  for (;;) {
    const { rows } = await run<StoredRow>(db, `compact (reading ${table.table})`, table.page(cursor === undefined), [
      threadId,
      batchSize,
      job.arrayStarts,
      BY_CONTENT_MIN_BYTES,
      ...(cursor ?? Array.from({ length: table.keyCount }, () => null)),
    ]);
    if (rows.length === 0) return;
    const last = rows[rows.length - 1]!;
    cursor = Array.from({ length: table.keyCount }, (_, i) => (i === 0 ? last.checkpoint_ns : last[`k${i - 1}`]));

    // Decode, then encode as a put with element storage would, in key order. No transaction is open.
    const conversions: Conversion[] = [];
    const elementRows = new Map<string, { ns: string; row: ElementRow }>();
    /** Per namespace, the hashes an earlier value of the batch sends already. */
    const sending = new Map<string, Set<string>>();
    for (const r of rows) {
      const row = table.row(threadId, r);
      let value: unknown;
      try {
        value = await loadsForRow(serde, r.type, r.value, row);
      } catch (err) {
        // Left as it is: reading it fails the same way before and after.
        if (!(err instanceof DeserializationError)) throw err;
        counts.undecodable += 1;
        continue;
      }
      let seen = sending.get(r.checkpoint_ns);
      if (!seen) sending.set(r.checkpoint_ns, (seen = new Set()));
      const stored = await encodeStored({ serde, codec }, value, row, undefined, seen);
      // A value element storage keeps whole stays as it is (its bytes untouched).
      if (!namesElements(stored.type)) continue;
      for (const e of stored.rows) elementRows.set(rowKey(r.checkpoint_ns, e.hash), { ns: r.checkpoint_ns, row: e });
      conversions.push({ row: r, type: stored.type, bytes: stored.bytes ?? new Uint8Array(), hashes: stored.hashes });
    }
    if (conversions.length > 0) {
      if (dryRun) await countBatch(job, table, threadId, conversions, elementRows, counted);
      else await writeBatch(job, table, threadId, conversions, elementRows);
    }
    progress();
    if (rows.length < batchSize) return;
  }
}

/** The element rows `conversions` name, each once, in key order (namespace, hash): as every statement inserts them. */
function needed(conversions: Conversion[], elementRows: Map<string, { ns: string; row: ElementRow }>): string[] {
  const keys = new Set<string>();
  for (const c of conversions) for (const h of c.hashes) keys.add(rowKey(c.row.checkpoint_ns, h));
  return [...keys].filter((k) => elementRows.has(k)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

async function existingRows(tx: Queryable, sql: Sql, threadId: string, keys: string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const split = keys.map((k) => k.split("\u0000") as [string, string]);
  const { rows } = await tx.query<{ checkpoint_ns: string; hash: string }>(sql.existing, [threadId, split.map((s) => s[0]), split.map((s) => s[1])]);
  return new Set(rows.map((r) => rowKey(r.checkpoint_ns, r.hash)));
}

function countValue(job: Job, table: TableSql, c: Conversion): void {
  const { counts } = job;
  counts.values += 1;
  if (table.table === "checkpoint_writes") counts.writes += 1;
  counts.bytesBefore += c.row.value.byteLength;
  counts.bytesAfter += c.bytes.byteLength;
}

async function countBatch(
  job: Job,
  table: TableSql,
  threadId: string,
  conversions: Conversion[],
  elementRows: Map<string, { ns: string; row: ElementRow }>,
  counted: Set<string>,
): Promise<void> {
  const { counts } = job;
  const keys = needed(conversions, elementRows).filter((k) => !counted.has(k));
  const existing = await withErrors("compact (dry run)", () => existingRows(job.db, job.sql, threadId, keys));
  for (const c of conversions) countValue(job, table, c);
  for (const k of keys) {
    if (existing.has(k)) continue;
    counted.add(k);
    counts.elementRows += 1;
    counts.bytesAfter += elementRows.get(k)!.row.bytes.byteLength;
  }
}

async function writeBatch(job: Job, table: TableSql, threadId: string, conversions: Conversion[], elementRows: Map<string, { ns: string; row: ElementRow }>): Promise<void> {
  const { db, sql, counts } = job;
  const n = table.keyCount;
  const values = pack(conversions.map((c) => c.bytes));
  const updateParams = [
    threadId,
    ...Array.from({ length: n }, (_, i) => conversions.map((c) => (i === 0 ? c.row.checkpoint_ns : c.row[`k${i - 1}`]))),
    conversions.map((c) => c.row.row_version),
    conversions.map((c) => c.row.type),
    conversions.map((c) => c.type),
    values.offsets,
    values.lengths,
    values.bytes,
  ];
  const byKey = new Map(conversions.map((c) => [keyOf(c.row, n), c]));
  for (let attempt = 1; ; attempt++) {
    try {
      const done = await withErrors(`compact (rewriting ${table.table})`, () =>
        db.transaction(async (tx) => {
          await tx.query(sql.lock, [job.lock, threadId]);
          const { rows } = await tx.query(table.update, updateParams);
          const rewritten = rows.map((r) => byKey.get(keyOf(r, n))!);
          // Element rows only for the values rewritten; those already stored stay (prune waits for this transaction).
          const keys = needed(rewritten, elementRows);
          const existing = await existingRows(tx, sql, threadId, keys);
          const missing = keys.filter((k) => !existing.has(k)).map((k) => elementRows.get(k)!);
          let added: { inserted: boolean; bytes: string }[] = [];
          if (missing.length > 0) {
            const packed = pack(missing.map((m) => m.row.bytes));
            added = (
              await tx.query<{ inserted: boolean; bytes: string }>(sql.insert, [
                threadId,
                missing.map((m) => m.ns),
                missing.map((m) => m.row.hash),
                missing.map((m) => m.row.type),
                packed.offsets,
                packed.lengths,
                packed.bytes,
              ])
            ).rows;
          }
          return { rewritten, added: added.filter((a) => a.inserted) };
        }),
      );
      for (const c of done.rewritten) countValue(job, table, c);
      counts.valuesSkipped += conversions.length - done.rewritten.length;
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
