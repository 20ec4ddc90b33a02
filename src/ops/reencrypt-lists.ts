/**
 * reencrypt's part for lists stored by their elements (saver/elements.ts,
 * saver/element-codec.ts). A list's hashes are keyed under the key that tags
 * its refs value, so moving a list to the current key gives it new hashes:
 * each element is opened, checked against its old hash, hashed under the
 * current key and sealed for its new element row; its chunks are made anew;
 * its refs value (same row) gets the new hashes and tag. Lists written before
 * encryption was turned on (plain hashes, no tag) are re-keyed the same way
 * when the serializer has `allowPlaintext`; without it they are left alone,
 * like any value that is not encrypted.
 *
 * The old element rows stay until no list names them, as any element row
 * (prune collects them; reencrypt.ts re-encrypts them meanwhile, so no row
 * needs an old key). One transaction per batch of lists, holding prune's
 * advisory lock of each thread in it, taken before any row lock (as compact
 * does): prune never sees a list re-keyed without its new element rows, nor
 * deletes an element row the batch found stored before the batch commits.
 */
import type { Db, Queryable } from "../db/db.js";
import { CHECKPOINT_BLOBS as B } from "../db/names.js";
import { CheckpointerError, DatabaseOperationError } from "../errors.js";
import { authenticate, elementCodec, elementRow, keyedHasher, type BlobRow } from "../saver/element-codec.js";
import { ELEMENTS_CHANNEL, REFS_TYPE, elementKey, layout, leavesOf, type ElementRow } from "../saver/elements.js";
import { pack } from "../saver/encode.js";
import type { SealingSerializer } from "../serde/rowserde.js";
import { quoteIdent } from "../validate.js";
import { loadElements } from "./decode.js";
import { pruneLockName } from "./prune-sql.js";

/** A batch that met a deadlock, a serialization failure or a lock timeout is tried again this many times. */
const ATTEMPTS = 4;
const TRANSIENT = new Set(["40P01", "40001", "55P03"]);

type Key = [string, string, string, string];

interface ListRow {
  thread_id: string;
  checkpoint_ns: string;
  channel: string;
  version: string;
  value: Buffer;
}

/**
 * Re-key every list not keyed under `serde`'s current key; `dryRun`: count
 * them. Calls `onBatch` with the running count after each batch. A list
 * whose elements do not check out stops the run with a `DeserializationError`
 * (its batch is rolled back).
 */
export async function rekeyLists(
  db: Db,
  schema: string,
  serde: SealingSerializer,
  options: { batchSize: number; dryRun: boolean },
  onBatch: (lists: number) => void,
): Promise<number> {
  const t = `${quoteIdent(schema)}.${B.table}`;
  const lock = pruneLockName(schema);
  let count = 0;
  let cursor: Key | undefined;
  for (;;) {
    // Keys first, without locks: prune's thread locks must be taken before any row lock.
    const { rows } = await withErrors("reading lists to re-key", () =>
      db.query<ListRow>(
        `SELECT ${B.threadId} AS thread_id, ${B.checkpointNs} AS checkpoint_ns, ${B.channel} AS channel, ${B.version} AS version, ${B.value} AS value
           FROM ${t} WHERE ${B.type} = '${REFS_TYPE}' AND ${B.channel} <> '${ELEMENTS_CHANNEL}' AND ${B.value} IS NOT NULL
           ${cursor ? `AND (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}) > ($2, $3, $4, $5)` : ""}
          ORDER BY ${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version} LIMIT $1`,
        [options.batchSize, ...(cursor ?? [])],
      ),
    );
    if (rows.length === 0) break;
    const last = rows[rows.length - 1]!;
    cursor = [last.thread_id, last.checkpoint_ns, last.channel, last.version];
    const stale = rows.filter((r) => needsRekey(serde, r));
    if (stale.length > 0) count += options.dryRun ? stale.length : await rekeyBatch(db, t, lock, serde, stale);
    onBatch(count);
    if (rows.length < options.batchSize) break;
  }
  return count;
}

const rowOf = (r: ListRow): BlobRow => ({ table: "checkpoint_blobs", threadId: r.thread_id, checkpointNs: r.checkpoint_ns, channel: r.channel, version: r.version });

/** Tagged under an old key, or (with allowPlaintext) not tagged at all. */
function needsRekey(serde: SealingSerializer, r: ListRow): boolean {
  const found = authenticate(serde, r.value, rowOf(r));
  return found ? found.hasher.keyId !== serde.digestKeyIds[0] : serde.allowsPlaintext;
}

async function rekeyBatch(db: Db, t: string, lock: string, serde: SealingSerializer, lists: ListRow[]): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withErrors("re-keying lists", () => db.transaction((tx) => rekeyLocked(tx, t, lock, serde, lists)));
    } catch (err) {
      const state = err instanceof DatabaseOperationError ? err.sqlState : undefined;
      if (state === undefined || !TRANSIENT.has(state) || attempt >= ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, 25 * 2 ** attempt));
    }
  }
}

async function rekeyLocked(tx: Queryable, t: string, lock: string, serde: SealingSerializer, candidates: ListRow[]): Promise<number> {
  const threads = [...new Set(candidates.map((l) => l.thread_id))].sort();
  for (const thread of threads) await tx.query("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1::text), pg_catalog.hashtext($2::text))", [lock, thread]);
  // Read again, locked: a list changed meanwhile (deleted, or re-keyed by another run) is what counts.
  const { rows } = await tx.query<ListRow>(
    `SELECT b.${B.threadId} AS thread_id, b.${B.checkpointNs} AS checkpoint_ns, b.${B.channel} AS channel, b.${B.version} AS version, b.${B.value} AS value
       FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[])) AS k(t, ns, ch, v)
       JOIN ${t} b ON b.${B.threadId} = k.t AND b.${B.checkpointNs} = k.ns AND b.${B.channel} = k.ch AND b.${B.version} = k.v
      WHERE b.${B.type} = '${REFS_TYPE}' AND b.${B.value} IS NOT NULL
      ORDER BY 1, 2, 3, 4 FOR NO KEY UPDATE OF b`,
    [0, 1, 2, 3].map((i) => candidates.map((l) => [l.thread_id, l.checkpoint_ns, l.channel, l.version][i])),
  );
  const lists = rows.filter((r) => needsRekey(serde, r));
  if (lists.length === 0) return 0;
  const elements = await loadElements(
    (text, values) => tx.query(text, values).then((r) => r.rows),
    t,
    lists.map((l) => ({ threadId: l.thread_id, checkpointNs: l.checkpoint_ns, type: REFS_TYPE, value: l.value })),
  );
  const codec = elementCodec(serde)!;
  const current = keyedHasher(serde, serde.digestKeyIds[0]!);
  // Per element of a lineage (old hash): its new hash; the rows to insert, each once.
  const renamed = new Map<string, Buffer>();
  const inserts = new Map<string, { ns: string; row: ElementRow; thread: string }>();
  const refs: Buffer[] = [];
  for (const l of lists) {
    const row = rowOf(l);
    const where = () => `channel ${JSON.stringify(l.channel)} version ${JSON.stringify(l.version)} of thread ${JSON.stringify(l.thread_id)} namespace ${JSON.stringify(l.checkpoint_ns)}`;
    const opened = codec.open(l.value, row, where);
    const leaves = leavesOf(opened, (h) => elements.get(elementKey(l.thread_id, l.checkpoint_ns, h)), where);
    const hashes = leaves.map(([hash, leaf]) => {
      const key = elementKey(l.thread_id, l.checkpoint_ns, hash);
      let next = renamed.get(key);
      if (!next) {
        const [innerType, bytes] = opened.checked(hash, leaf.type, leaf.value ?? new Uint8Array(), elementRow(l.thread_id, l.checkpoint_ns, hash));
        next = current.hash(innerType, bytes);
        const hex = next.toString("hex");
        const [type, sealed] = serde.sealForRow(innerType, bytes, elementRow(l.thread_id, l.checkpoint_ns, hex));
        inserts.set(elementKey(l.thread_id, l.checkpoint_ns, hex), { thread: l.thread_id, ns: l.checkpoint_ns, row: { hash: hex, type, bytes: sealed } });
        renamed.set(key, next);
      }
      return next;
    });
    const laid = layout(codec, hashes, row);
    for (const chunk of laid.chunks) inserts.set(elementKey(l.thread_id, l.checkpoint_ns, chunk.hash), { thread: l.thread_id, ns: l.checkpoint_ns, row: chunk });
    refs.push(laid.refs);
  }
  const rowsToInsert = [...inserts.values()];
  const values = pack(rowsToInsert.map((x) => x.row.bytes));
  await tx.query(
    `INSERT INTO ${t} (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}, ${B.type}, ${B.value})
     SELECT u.t, u.ns, '${ELEMENTS_CHANNEL}', u.h, u.type, pg_catalog.substring($7::bytea, u.off + 1, u.len)
       FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                       pg_catalog.unnest($5::int[]), pg_catalog.unnest($6::int[])) AS u(t, ns, h, type, off, len)
     ON CONFLICT (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}) DO NOTHING`,
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
  const packed = pack(refs);
  await tx.query(
    `UPDATE ${t} x SET ${B.value} = pg_catalog.substring($5::bytea, u.off + 1, u.len), ${B.rowVersion} = x.${B.rowVersion} + 1
       FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                       pg_catalog.unnest($6::int[]), pg_catalog.unnest($7::int[])) AS u(t, ns, ch, v, off, len)
      WHERE x.${B.threadId} = u.t AND x.${B.checkpointNs} = u.ns AND x.${B.channel} = u.ch AND x.${B.version} = u.v`,
    [
      lists.map((l) => l.thread_id),
      lists.map((l) => l.checkpoint_ns),
      lists.map((l) => l.channel),
      lists.map((l) => l.version),
      packed.bytes,
      packed.offsets,
      packed.lengths,
    ],
  );
  return lists.length;
}

async function withErrors<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw err instanceof CheckpointerError ? err : new DatabaseOperationError(what, err);
  }
}
