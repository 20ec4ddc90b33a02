/**
 * reencrypt's part for values stored by content (saver/stored.ts): the rows
 * of `checkpoint_blobs` and `checkpoint_writes` whose value names element
 * rows — a list by its elements (`pg:refs`), a large value by content
 * (`pg:val`), an object holding lists (`pg:obj:<type>`). Their refs area's
 * hashes are keyed under the key that tags it (saver/element-codec.ts), so
 * moving such a value to the current key gives it new hashes: each element it
 * names is opened, checked against its old hash, hashed under the current key
 * and sealed for its new element row; each chunk is made anew from its
 * elements' new hashes (the refs area keeps its layout, slot for slot); the
 * refs area (same row) gets the new hashes and a tag under the current key.
 * An object's outline (the serializer's bytes after its refs area) is
 * re-encrypted like a whole value: the inner bytes kept, sealed under the
 * current key for its row. Values written before encryption was turned on
 * (unkeyed hashes, no tag, a plaintext outline) are re-keyed the same way when
 * the serializer has `allowPlaintext`; without it they are left alone, like
 * any value that is not encrypted.
 *
 * The old element rows stay until no value names them, as any element row
 * (prune collects them; reencrypt.ts re-encrypts them meanwhile, so no row
 * needs an old key). One transaction per batch of rows, holding prune's
 * advisory lock of each thread in it, taken before any row lock (as compact
 * does): prune never sees a value re-keyed without its new element rows, nor
 * deletes an element row the batch found stored before the batch commits.
 * New element rows go in key order, touching one stored already, as every
 * statement that inserts element rows does.
 */
import type { Db, Queryable } from "../db/db.js";
import { CHECKPOINT_BLOBS as B, CHECKPOINT_WRITES as W } from "../db/names.js";
import { CheckpointerError, DatabaseOperationError, DeserializationError } from "../errors.js";
import { authenticate, elementCodec, elementRow, keyedHasher } from "../saver/element-codec.js";
import { ELEMENTS_CHANNEL, REFS_TYPE, elementKey, type ElementRow } from "../saver/elements.js";
import { pack } from "../saver/encode.js";
import { OBJECT_TYPE_PREFIX, VALUE_TYPE, describeRow, refsAreaOf } from "../saver/stored.js";
import type { SealingSerializer, ValueRow } from "../serde/rowserde.js";
import type { EncryptedSerializer } from "../serde/encryption.js";
import { quoteIdent } from "../validate.js";
import { loadElements } from "./decode.js";
import { pruneLockName } from "./prune-sql.js";

/** A batch that met a deadlock, a serialization failure or a lock timeout is tried again this many times. */
const ATTEMPTS = 4;
const TRANSIENT = new Set(["40P01", "40001", "55P03"]);

/** What re-keying needs of the serializer: sealing and keyed digests, and rewrapping an outline. */
export type Rekeying = SealingSerializer & Pick<EncryptedSerializer, "rewrap" | "currentForm">;

/** A row whose value names element rows, as read: thread, namespace, the rest of its key (`k0`...), type and value. */
type RefsRow = Record<string, unknown> & { thread_id: string; checkpoint_ns: string; type: string; value: Buffer };

/** One table's rows that name element rows. */
interface TableSpec {
  table: typeof B.table | typeof W.table;
  /** The key columns after thread and namespace, with their SQL types. */
  key: [string, string][];
  /** Which of its rows are values (not element rows). */
  where: string;
  row(r: RefsRow): ValueRow;
}

const TABLES: TableSpec[] = [
  {
    table: B.table,
    key: [
      [B.channel, "text"],
      [B.version, "text"],
    ],
    where: `${B.channel} <> '${ELEMENTS_CHANNEL}'`,
    row: (r) => ({ table: B.table, threadId: r.thread_id, checkpointNs: r.checkpoint_ns, channel: String(r.k0), version: String(r.k1) }),
  },
  {
    table: W.table,
    key: [
      [W.checkpointId, "text"],
      [W.taskId, "text"],
      [W.idx, "int"],
    ],
    where: "true",
    row: (r) => ({ table: W.table, threadId: r.thread_id, checkpointNs: r.checkpoint_ns, checkpointId: String(r.k0), taskId: String(r.k1), idx: Number(r.k2) }),
  },
];

/** SQL: whether a row's type (an SQL expression) names element rows (stored.ts `namesElements`). */
export const byContentSql = (type: string) => `(${type} IN ('${REFS_TYPE}', '${VALUE_TYPE}') OR pg_catalog.starts_with(${type}, '${OBJECT_TYPE_PREFIX}'))`;

/**
 * Re-key every value stored by content that is not wholly in `serde`'s current form, in both
 * tables; `dryRun`: count them. Calls `onBatch` with the running count after each batch. A value
 * whose elements do not check out stops the run with a `DeserializationError` (its batch is rolled back).
 */
export async function rekeyStored(
  db: Db,
  schema: string,
  serde: Rekeying,
  options: { batchSize: number; dryRun: boolean },
  onBatch: (count: number) => void,
): Promise<number> {
  const blobs = `${quoteIdent(schema)}.${B.table}`;
  const lock = pruneLockName(schema);
  let count = 0;
  for (const spec of TABLES) {
    const t = `${quoteIdent(schema)}.${spec.table}`;
    // The two tables name these columns alike.
    const cols = [B.threadId, B.checkpointNs, ...spec.key.map(([c]) => c)];
    const types = ["text", "text", ...spec.key.map(([, ty]) => ty)];
    const select = `${B.threadId} AS thread_id, ${B.checkpointNs} AS checkpoint_ns, ${spec.key.map(([c], i) => `${c} AS k${i}`).join(", ")}, ${B.type} AS type, ${B.value} AS value`;
    const keyOf = (r: RefsRow) => [r.thread_id, r.checkpoint_ns, ...spec.key.map((_, i) => r[`k${i}`])];
    let cursor: unknown[] | undefined;
    for (;;) {
      // Keys first, without locks: prune's thread locks must be taken before any row lock.
      const { rows } = await withErrors(`reading ${spec.table} stored by content`, () =>
        db.query<RefsRow>(
          `SELECT ${select} FROM ${t} WHERE ${byContentSql(B.type)} AND ${spec.where} AND ${B.value} IS NOT NULL
             ${cursor ? `AND (${cols.join(", ")}) > (${cols.map((_, i) => `$${i + 2}::${types[i]}`).join(", ")})` : ""}
            ORDER BY ${cols.join(", ")} LIMIT $1`,
          [options.batchSize, ...(cursor ?? [])],
        ),
      );
      if (rows.length === 0) break;
      cursor = keyOf(rows[rows.length - 1]!);
      const stale = rows.filter((r) => needsRekey(serde, r, spec.row(r)));
      if (stale.length > 0) {
        count += options.dryRun ? stale.length : await rekeyBatch(db, { t, blobs, lock, serde, spec, cols, types, select, keyOf }, stale);
      }
      onBatch(count);
      if (rows.length < options.batchSize) break;
    }
  }
  return count;
}

/**
 * Whether a value's refs area is tagged under an old key (or, with allowPlaintext, not tagged: written
 * before encryption), or an object's outline is not in the current form (under another key, unbound,
 * or, with allowPlaintext, not encrypted). A value neither authenticates nor may be read as plaintext
 * is left alone: reading it fails, as reencrypt leaves any value it may not read.
 */
function needsRekey(serde: Rekeying, r: RefsRow, row: ValueRow): boolean {
  const area = refsAreaOf(r.type, r.value);
  if (area === undefined) return false;
  const found = authenticate(serde, area, row);
  if (found ? found.hasher.keyId !== serde.digestKeyIds[0] : serde.allowsPlaintext) return true;
  if (!r.type.startsWith(OBJECT_TYPE_PREFIX)) return false;
  const innerType = r.type.slice(OBJECT_TYPE_PREFIX.length);
  const outline = r.value.subarray(4 + area.byteLength);
  const { typePrefix, format } = serde.currentForm;
  if (innerType.startsWith(typePrefix) && outline[0] === format) return false;
  return innerType.startsWith("enc:") || serde.allowsPlaintext;
}

interface Batch {
  /** The table, qualified. */
  t: string;
  /** checkpoint_blobs, qualified: where element rows are. */
  blobs: string;
  lock: string;
  serde: Rekeying;
  spec: TableSpec;
  /** Key columns (thread and namespace first) and their SQL types. */
  cols: string[];
  types: string[];
  select: string;
  keyOf(r: RefsRow): unknown[];
}

async function rekeyBatch(db: Db, b: Batch, rows: RefsRow[]): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withErrors(`re-keying ${b.spec.table} stored by content`, () => db.transaction((tx) => rekeyLocked(tx, b, rows)));
    } catch (err) {
      const state = err instanceof DatabaseOperationError ? err.sqlState : undefined;
      if (state === undefined || !TRANSIENT.has(state) || attempt >= ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, 25 * 2 ** attempt));
    }
  }
}

async function rekeyLocked(tx: Queryable, b: Batch, candidates: RefsRow[]): Promise<number> {
  const { serde, spec, cols, types } = b;
  const threads = [...new Set(candidates.map((r) => r.thread_id))].sort();
  for (const thread of threads) await tx.query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1::text), pg_catalog.hashtext($2::text))", [b.lock, thread]);
  // Read again, locked: a value changed meanwhile (deleted, or re-keyed by another run) is what counts.
  const keys = candidates.map(b.keyOf);
  const { rows } = await tx.query<RefsRow>(
    `SELECT ${cols.map((c, i) => `x.${c} AS ${i === 0 ? "thread_id" : i === 1 ? "checkpoint_ns" : `k${i - 2}`}`).join(", ")}, x.${B.type} AS type, x.${B.value} AS value
       FROM ROWS FROM (${types.map((ty, i) => `pg_catalog.unnest($${i + 1}::${ty}[])`).join(", ")}) AS k(${cols.map((_, i) => `c${i}`).join(", ")})
       JOIN ${b.t} x ON ${cols.map((c, i) => `x.${c} = k.c${i}`).join(" AND ")}
      WHERE ${byContentSql(`x.${B.type}`)} AND x.${B.value} IS NOT NULL
      ORDER BY ${cols.map((_, i) => i + 1).join(", ")} FOR NO KEY UPDATE OF x`,
    cols.map((_, i) => keys.map((k) => k[i])),
  );
  const stale = rows.filter((r) => needsRekey(serde, r, spec.row(r)));
  if (stale.length === 0) return 0;
  const elements = await loadElements(
    (text, values) => tx.query(text, values).then((r) => r.rows),
    b.blobs,
    stale.map((r) => ({ threadId: r.thread_id, checkpointNs: r.checkpoint_ns, type: r.type, value: r.value })),
  );
  const codec = elementCodec(serde)!;
  const current = keyedHasher(serde, serde.digestKeyIds[0]!);
  // Per element or chunk of a lineage (old hash): its new hash; the rows to insert, each once, by key.
  const renamed = new Map<string, Buffer>();
  const inserts = new Map<string, { thread: string; ns: string; row: ElementRow }>();
  const next: [string, Uint8Array][] = [];
  for (const r of stale) {
    const row = spec.row(r);
    const where = () => describeRow(row);
    const area = refsAreaOf(r.type, r.value)!;
    const found = authenticate(serde, area, row);
    let newArea: Uint8Array = area;
    if (found ? found.hasher.keyId !== serde.digestKeyIds[0] : serde.allowsPlaintext) {
      const opened = codec.open(area, row, where);
      const stored = (hash: string) => {
        const e = elements.get(elementKey(r.thread_id, r.checkpoint_ns, hash));
        if (!e) throw new DeserializationError(`${where()}: element ${hash} is not stored`);
        return e;
      };
      const add = (hash: Buffer, type: string, bytes: Uint8Array) => {
        const hex = hash.toString("hex");
        inserts.set(elementKey(r.thread_id, r.checkpoint_ns, hex), { thread: r.thread_id, ns: r.checkpoint_ns, row: { hash: hex, type, bytes } });
      };
      const element = (hash: string): Buffer => {
        const k = elementKey(r.thread_id, r.checkpoint_ns, hash);
        let name = renamed.get(k);
        if (!name) {
          const e = stored(hash);
          if (e.type === REFS_TYPE) throw new DeserializationError(`${where()}: chunk ${hash} refers to another chunk`);
          const [innerType, bytes] = opened.checked(hash, e.type, e.value ?? new Uint8Array(), elementRow(r.thread_id, r.checkpoint_ns, hash));
          name = current.hash(innerType, bytes);
          add(name, ...serde.sealForRow(innerType, bytes, elementRow(r.thread_id, r.checkpoint_ns, name.toString("hex"))));
          renamed.set(k, name);
        }
        return name;
      };
      // Slot for slot: a chunk is made anew from its elements' new hashes, so the layout stays.
      const slots = opened.hashes.map((hash) => {
        const e = stored(hash);
        if (e.type !== REFS_TYPE) return element(hash);
        const chunk = Buffer.concat(opened.chunk(hash, e.value ?? new Uint8Array()).map(element));
        const name = codec.chunkHash(chunk);
        add(name, REFS_TYPE, chunk);
        return name;
      });
      newArea = codec.refs(Buffer.concat(slots), row);
    }
    if (r.type.startsWith(OBJECT_TYPE_PREFIX)) {
      const innerType = r.type.slice(OBJECT_TYPE_PREFIX.length);
      const outline = r.value.subarray(4 + area.byteLength);
      const rewrapped = (await serde.rewrap(innerType, outline, row)) ?? [innerType, outline];
      const length = Buffer.alloc(4);
      length.writeUInt32BE(newArea.byteLength, 0);
      next.push([`${OBJECT_TYPE_PREFIX}${rewrapped[0]}`, Buffer.concat([length, newArea, rewrapped[1]])]);
    } else {
      next.push([r.type, newArea]);
    }
  }
  // Key order (thread, namespace, hash), as every statement that inserts element rows sends them.
  const rowsToInsert = [...inserts.entries()].sort(([a], [c]) => (a < c ? -1 : a > c ? 1 : 0)).map(([, x]) => x);
  if (rowsToInsert.length > 0) {
    const values = pack(rowsToInsert.map((x) => x.row.bytes));
    await tx.query(
      `INSERT INTO ${b.blobs} AS b (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}, ${B.type}, ${B.value})
       SELECT u.t, u.ns, '${ELEMENTS_CHANNEL}', u.h, u.type, pg_catalog.substring($7::bytea, u.off + 1, u.len)
         FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                         pg_catalog.unnest($5::int[]), pg_catalog.unnest($6::int[])) WITH ORDINALITY AS u(t, ns, h, type, off, len, n)
        ORDER BY u.n
       ON CONFLICT (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}) DO UPDATE SET ${B.rowVersion} = b.${B.rowVersion} + 1`,
      [
        rowsToInsert.map((x) => x.thread),
        rowsToInsert.map((x) => x.ns),
        rowsToInsert.map((x) => x.row.hash),
        rowsToInsert.map((x) => x.row.type),
        values.offsets,
        values.lengths,
        values.bytes,
      ],
    );
  }
  const packed = pack(next.map(([, v]) => v));
  const n = cols.length;
  await tx.query(
    `UPDATE ${b.t} x SET ${B.type} = u.type, ${B.value} = pg_catalog.substring($${n + 4}::bytea, u.off + 1, u.len), ${B.rowVersion} = x.${B.rowVersion} + 1
       FROM ROWS FROM (${types.map((ty, i) => `pg_catalog.unnest($${i + 1}::${ty}[])`).join(", ")},
                       pg_catalog.unnest($${n + 1}::text[]), pg_catalog.unnest($${n + 2}::int[]), pg_catalog.unnest($${n + 3}::int[]))
            AS u(${cols.map((_, i) => `c${i}`).join(", ")}, type, off, len)
      WHERE ${cols.map((c, i) => `x.${c} = u.c${i}`).join(" AND ")}`,
    [...cols.map((_, i) => stale.map((r) => b.keyOf(r)[i])), next.map(([t]) => t), packed.offsets, packed.lengths, packed.bytes],
  );
  return stale.length;
}

async function withErrors<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof CheckpointerError ? err : new DatabaseOperationError(what, err);
  }
}
