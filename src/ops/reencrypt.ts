/**
 * Rewrite stored values into the serializer's current encrypted form: under
 * the current key and bound to their row (see encryption.ts). For rows
 * written before row binding, after a key rotation (so old keys can go), and,
 * with `allowPlaintext`, for rows written before encryption was turned on.
 *
 * Only the encryption changes: the inner bytes (msgpack, json...) are kept as
 * they are, never decoded and encoded again. Batches of rows, one transaction
 * each, rows locked while they are rewritten (FOR NO KEY UPDATE: a put's key
 * share lock on its parent is not blocked); safe while graphs run (blobs are
 * never changed by the saver, writes only by a retried special write, which
 * waits for the batch).
 *
 * Values stored by content (saver/stored.ts: `pg:refs`, `pg:val`,
 * `pg:obj:<type>`, in blobs and pending writes) are re-keyed first
 * (reencrypt-refs.ts): their hashes are keyed under the key that tags them,
 * so a value under an old key, or written before encryption, gets new element
 * rows and a new refs area (an object's outline re-encrypted with it). Element
 * rows are then rewritten like any blob row (the old ones, which only old
 * values named, too); values stored by content and chunks (hashes, not
 * serializer output) never are: rewrapped whole, they would stop naming
 * their element rows.
 */
import pg from "pg";
import { dbOf, poolDb, type Db, type PGliteLike, type Queryable } from "../db/db.js";
import type { EncryptedSerializer } from "../serde/encryption.js";
import { CheckpointerError, DatabaseOperationError, InvalidOptionsError } from "../errors.js";
import { guard, type HandlerErrorHandler } from "../events.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import { isSealing, type SealingSerializer, type ValueRow } from "../serde/rowserde.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_WRITES, CHECKPOINTS, COL } from "../db/names.js";
import { byContentSql, rekeyStored, type Rekeying } from "./reencrypt-refs.js";

/** Options of {@link reencrypt}. */
export interface ReencryptOptions {
  /** A pool, client or PGlite instance the caller owns (never closed here). Give this or `connectionString`. */
  pool?: pg.Pool | pg.Client | PGliteLike;
  /** Used when no `pool` is given; the connection is closed afterwards. */
  connectionString?: string;
  /** Postgres schema holding the tables. Default `public`. */
  schema?: string;
  /** The application's serializer: its current key and options decide the target form. */
  serde: Reencrypting;
  /** Rows per transaction. Default 200. */
  batchSize?: number;
  /** Count what would be rewritten, change nothing. */
  dryRun?: boolean;
  /** Called after each batch with running totals; its failures never stop the run (see `onHandlerError`). */
  onProgress?: (progress: ReencryptCounts) => unknown;
  /** Receives every error `onProgress` throws or rejects with. */
  onHandlerError?: HandlerErrorHandler;
}

/** Values rewritten (or, for a dry run, to rewrite), per table. */
export interface ReencryptCounts {
  /**
   * Values stored by content re-keyed (blobs and writes: lists by their elements, large values,
   * objects holding lists): new element rows, chunks and refs area under the current key.
   */
  byContent: number;
  blobs: number;
  writes: number;
  /** Checkpoints whose values without a version were rewritten. */
  checkpoints: number;
}

export interface ReencryptResult extends ReencryptCounts {
  dryRun: boolean;
  durationMs: number;
}

interface Table {
  name: typeof CHECKPOINT_BLOBS.table | typeof CHECKPOINT_WRITES.table | typeof CHECKPOINTS.table;
  counter: keyof ReencryptCounts;
  key: string[];
  /** Key columns' SQL types, for the keyset cursor and the update. */
  keyTypes: string[];
  type: string;
  value: string;
  /** Values that are not serializer output (an SQL condition on the row's type): never rewritten. */
  keep?: string;
  row(r: Record<string, unknown>): ValueRow;
}

/** What reencrypt needs of the serializer (an EncryptedSerializer, also from another copy of this package). */
export type Reencrypting = Pick<EncryptedSerializer, "rewrap" | "currentForm" | "allowsPlaintext"> & Partial<SealingSerializer>;

/** True for an EncryptedSerializer (by shape: a second copy of the package fails instanceof). */
export function isEncryptedSerializer(x: unknown): x is Reencrypting {
  const s = x as Partial<Reencrypting> | null;
  return typeof s === "object" && s !== null && typeof s.rewrap === "function" && typeof s.currentForm === "object";
}

const B = CHECKPOINT_BLOBS;
const W = CHECKPOINT_WRITES;
const C = CHECKPOINTS;
const TABLES: Table[] = [
  {
    name: B.table,
    counter: "blobs",
    key: [B.threadId, B.checkpointNs, B.channel, B.version],
    keyTypes: ["text", "text", "text", "text"],
    type: B.type,
    value: B.value,
    keep: byContentSql(B.type),
    row: (r) => ({ table: B.table, threadId: String(r[B.threadId]), checkpointNs: String(r[B.checkpointNs]), channel: String(r[B.channel]), version: String(r[B.version]) }),
  },
  {
    name: W.table,
    counter: "writes",
    key: [W.threadId, W.checkpointNs, W.checkpointId, W.taskId, W.idx],
    keyTypes: ["text", "text", "text", "text", "int"],
    type: W.type,
    value: W.value,
    keep: byContentSql(W.type),
    row: (r) => ({
      table: W.table,
      threadId: String(r[W.threadId]),
      checkpointNs: String(r[W.checkpointNs]),
      checkpointId: String(r[W.checkpointId]),
      taskId: String(r[W.taskId]),
      idx: Number(r[W.idx]),
    }),
  },
  {
    name: C.table,
    counter: "checkpoints",
    key: [C.threadId, C.checkpointNs, C.checkpointId],
    keyTypes: ["text", "text", "text"],
    type: C.unversionedType,
    value: C.unversionedValues,
    row: (r) => ({ table: C.table, threadId: String(r[C.threadId]), checkpointNs: String(r[C.checkpointNs]), checkpointId: String(r[C.checkpointId]) }),
  },
];

/**
 * Rewrite every value not yet in `serde`'s current form (encrypted under its
 * current key, bound to its row): `checkpoint_blobs.value`,
 * `checkpoint_writes.value`, and `checkpoints.unversioned_values`; and
 * re-key values stored by content whose hashes are keyed under another key, or
 * not at all (written before encryption: only with `allowPlaintext`). Values
 * that are not encrypted are rewritten only when `serde` has
 * `allowPlaintext`; otherwise they are left alone (the saver refuses them).
 * A value that does not decrypt stops the run with a `DeserializationError`
 * (the batch it was in is rolled back).
 *
 * @example
 * ```ts
 * import { EncryptedSerializer, reencrypt } from "langgraph-checkpoint-pg";
 * const serde = new EncryptedSerializer({ keys: { "2025-06": newKey, "2025-01": oldKey }, current: "2025-06" });
 * const { byContent, blobs, writes, checkpoints } = await reencrypt({ pool, serde });
 * // Now no row needs "2025-01", and every value is bound to its row.
 * ```
 */
export async function reencrypt(options: ReencryptOptions): Promise<ReencryptResult> {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { pool, serde, ... }");
  if (!isEncryptedSerializer(options.serde)) throw new InvalidOptionsError("serde", "expected an EncryptedSerializer (the one your saver uses)");
  if ((options.pool === undefined) === (options.connectionString === undefined)) {
    throw new InvalidOptionsError("pool/connectionString", "give exactly one of them");
  }
  const schema = checkSchemaName(options.schema ?? "public");
  const batchSize = options.batchSize ?? 200;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new InvalidOptionsError("batchSize", "expected a positive integer");
  if (options.onProgress !== undefined && typeof options.onProgress !== "function") throw new InvalidOptionsError("onProgress", "expected a function");
  const onProgress = guard(options.onProgress, "onProgress", options.onHandlerError);
  const started = performance.now();
  const serde = options.serde;
  const { typePrefix, format } = serde.currentForm;
  const owned = options.pool === undefined ? new pg.Pool({ connectionString: options.connectionString, application_name: "langgraph-checkpoint-pg:reencrypt", max: 1 }) : undefined;
  owned?.on("error", () => undefined);
  const db: Db = owned ? poolDb(owned) : dbOf(options.pool!);
  const counts: ReencryptCounts = { byContent: 0, blobs: 0, writes: 0, checkpoints: 0 };
  try {
    await assertSchemaCurrent(db, schema, "reencrypt");
    if (isSealing(serde as SealingSerializer)) {
      await rekeyStored(db, schema, serde as Rekeying, { batchSize, dryRun: options.dryRun ?? false }, (n) => {
        counts.byContent = n;
        if (!options.dryRun) onProgress?.({ ...counts });
      });
    }
    for (const table of TABLES) {
      const t = `${quoteIdent(schema)}.${table.name}`;
      const keys = table.key.join(", ");
      // Not yet current: another key, or not bound (format byte), or not encrypted at all (only with allowPlaintext).
      const stale = `${table.value} IS NOT NULL AND ${table.type} <> 'empty'
         AND NOT (pg_catalog.starts_with(${table.type}, $1) AND pg_catalog.substring(${table.value}, 1, 1) = $2::bytea)
         AND (pg_catalog.starts_with(${table.type}, 'enc:') OR $3::boolean)${table.keep ? ` AND NOT ${table.keep}` : ""}`;
      const staleParams = [typePrefix, Buffer.from([format]), serde.allowsPlaintext];
      if (options.dryRun) {
        const { rows } = await run(db, `counting ${table.name} to rewrite`, `SELECT pg_catalog.count(*)::int AS n FROM ${t} WHERE ${stale}`, staleParams);
        counts[table.counter] = rows[0]!.n as number;
        continue;
      }
      let cursor: unknown[] | undefined;
      for (;;) {
        const done = await withErrors(`rewriting ${table.name}`, () =>
          db.transaction(async (tx: Queryable) => {
            const after = cursor ? `AND (${keys}) > (${table.key.map((_, i) => `$${i + 5}::${table.keyTypes[i]}`).join(", ")})` : "";
            const { rows } = await tx.query(
              `SELECT ${keys}, ${table.type} AS type, ${table.value} AS value FROM ${t}
                WHERE ${stale} ${after} ORDER BY ${keys} LIMIT $4 FOR NO KEY UPDATE`,
              [...staleParams, batchSize, ...(cursor ?? [])],
            );
            const next = await Promise.all(rows.map((r) => serde.rewrap(String(r.type), r.value as Uint8Array, table.row(r))));
            const changed = rows.flatMap((r, i) => (next[i] ? [{ r, typed: next[i]! }] : []));
            if (changed.length > 0) {
              const columns = table.key.map((k, i) => `pg_catalog.unnest($${i + 1}::${table.keyTypes[i]}[])`);
              const n = table.key.length;
              await tx.query(
                `UPDATE ${t} x SET ${table.type} = u.type, ${table.value} = u.value, ${COL.rowVersion} = x.${COL.rowVersion} + 1
                   FROM ROWS FROM (${columns.join(", ")}, pg_catalog.unnest($${n + 1}::text[]), pg_catalog.unnest($${n + 2}::bytea[]))
                        AS u(${keys}, type, value)
                  WHERE ${table.key.map((k) => `x.${k} = u.${k}`).join(" AND ")}`,
                [...table.key.map((k) => changed.map((c) => c.r[k])), changed.map((c) => c.typed[0]), changed.map((c) => Buffer.from(c.typed[1]))],
              );
            }
            counts[table.counter] += changed.length;
            if (rows.length > 0) cursor = table.key.map((k) => rows[rows.length - 1]![k]);
            return rows.length < batchSize;
          }),
        );
        onProgress?.({ ...counts });
        if (done) break;
      }
    }
  } finally {
    await owned?.end();
  }
  return { ...counts, dryRun: options.dryRun ?? false, durationMs: performance.now() - started };
}

async function withErrors<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof CheckpointerError ? err : new DatabaseOperationError(what, err);
  }
}

function run(db: Db, what: string, text: string, values: unknown[]): Promise<{ rows: Record<string, unknown>[] }> {
  return withErrors(what, () => db.query(text, values));
}
