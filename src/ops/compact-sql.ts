/**
 * compact's statements (compact.ts runs them): the page of a thread's rows whose value may be
 * stored otherwise, their rewrite in place, the thread's locks, and the element rows' lookup and
 * insert, as prune's are in prune-sql.ts.
 */
import { CHECKPOINT_BLOBS as B, CHECKPOINT_WRITES as W } from "../db/names.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "../saver/elements.js";
import { lockForWrite } from "../saver/sql/gate.js";
import { OBJECT_TYPE_PREFIX, VALUE_TYPE } from "../saver/stored.js";
import type { ValueRow } from "../serde/rowserde.js";
import { quoteIdent } from "../validate.js";

/** A row as read: its key columns (`k0`...), type, value and row version. */
export type StoredRow = Record<string, unknown> & { checkpoint_ns: string; type: string; value: Uint8Array; row_version: string };

/** Types whose value names element rows already (stored.ts `namesElements`), as SQL. */
const notByContent = (type: string) => `${type} NOT IN ('${REFS_TYPE}', '${VALUE_TYPE}') AND NOT pg_catalog.starts_with(${type}, '${OBJECT_TYPE_PREFIX}')`;

export function buildSql(schema: string) {
  const bl = `${quoteIdent(schema)}.${B.table}`;
  const wr = `${quoteIdent(schema)}.${W.table}`;
  /** The next thread id after `after` (an SQL expression, or none) in either table: a loose index scan on each primary key. */
  const next = (after: string | undefined) =>
    `LEAST((SELECT ${B.threadId} FROM ${bl}${after ? ` WHERE ${B.threadId} > ${after}` : ""} ORDER BY ${B.threadId} LIMIT 1),
               (SELECT ${W.threadId} FROM ${wr}${after ? ` WHERE ${W.threadId} > ${after}` : ""} ORDER BY ${W.threadId} LIMIT 1))`;
  /** Keyset page of the thread ids in checkpoint_blobs and checkpoint_writes. $1 after (NULL: from the first), $2 limit. */
  const threadPage = (first: boolean) => `/* langgraph-checkpoint-pg compact: threads */
WITH RECURSIVE t AS (
  SELECT ${first ? `${next(undefined)} AS id WHERE $1::text IS NULL` : `${next("$1::text")} AS id`}
  UNION ALL
  SELECT ${next("t.id")} FROM t WHERE t.id IS NOT NULL
)
SELECT id FROM t WHERE id IS NOT NULL LIMIT $2`;
  return {
    threadPage,
    blobs: tableSql(B.table, bl, [[B.channel, "text"], [B.version, "text"]], `${B.channel} <> '${ELEMENTS_CHANNEL}'`, (threadId, r) => ({
      table: B.table,
      threadId,
      checkpointNs: r.checkpoint_ns,
      channel: String(r.k0),
      version: String(r.k1),
    })),
    // Special writes (negative idx) stay whole, as the saver stores them: they are replaced, and read on their own.
    writes: tableSql(W.table, wr, [[W.checkpointId, "text"], [W.taskId, "text"], [W.idx, "int"]], `${W.idx} >= 0`, (threadId, r) => ({
      table: W.table,
      threadId,
      checkpointNs: r.checkpoint_ns,
      checkpointId: String(r.k0),
      taskId: String(r.k1),
      idx: Number(r.k2),
    })),
    /**
     * Wait for thread $2's deletion lock, shared (a deletion in progress finishes first; one that
     * comes later waits for this transaction, then deletes what it wrote), then for prune's advisory
     * lock of the thread (lock name $1). Both held until the transaction ends.
     */
    lock: `/* langgraph-checkpoint-pg compact: lock */
SELECT x.locked FROM (SELECT ${lockForWrite(schema, "$2::text")} AS locked) x
 CROSS JOIN LATERAL (SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1::text), pg_catalog.hashtext($2::text)) OFFSET 0) y`,
    /** Which element rows of thread $1 exist: namespaces $2, hashes $3. */
    existing: `/* langgraph-checkpoint-pg compact: existing elements */
SELECT e.${B.checkpointNs} AS checkpoint_ns, e.${B.version} AS hash
  FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS u(ns, h)
  JOIN ${bl} e ON e.${B.threadId} = $1 AND e.${B.checkpointNs} = u.ns AND e.${B.channel} = '${ELEMENTS_CHANNEL}' AND e.${B.version} = u.h`,
    /**
     * Insert element rows of thread $1 in the given (key) order: namespaces $2, hashes $3, types $4,
     * values packed in $7 ($5 offsets, $6 lengths). One stored meanwhile (by a put) is touched, as
     * every statement that inserts element rows does. Returns whether each row was inserted (row_version 1: an
     * update raises it; not xmax = 0, which a partitioned table cannot return), and its size.
     */
    insert: `/* langgraph-checkpoint-pg compact: elements */
INSERT INTO ${bl} AS b (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}, ${B.type}, ${B.value})
SELECT $1, u.ns, '${ELEMENTS_CHANNEL}', u.h, u.type, pg_catalog.substring($7::bytea, u.off + 1, u.len)
  FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                  pg_catalog.unnest($5::int[]), pg_catalog.unnest($6::int[])) WITH ORDINALITY AS u(ns, h, type, off, len, n)
 ORDER BY u.n
ON CONFLICT (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}) DO UPDATE SET ${B.rowVersion} = b.${B.rowVersion} + 1
RETURNING b.${B.rowVersion} = 1 AS inserted, pg_catalog.octet_length(b.${B.value})::bigint AS bytes`,
  };
}

export type Sql = ReturnType<typeof buildSql>;

/** One table's statements, and how its rows map to {@link ValueRow}s. */
export interface TableSql {
  table: typeof B.table | typeof W.table;
  /**
   * A page of a thread's rows whose value may be stored otherwise: $1 thread, $2 limit, $3 first
   * bytes of a msgpack list (NULL: read every value), $4 the size from which any value may be stored
   * by content, $5... the key after which to go on (namespace, then `k0`...).
   */
  page(first: boolean): string;
  /**
   * Rewrite rows of thread $1 in place, each only if its row version and type are still as read:
   * the keys (namespace, `k0`...), then row versions, types read, new types, offsets and lengths
   * of the new values packed in the last parameter. Returns the keys of the rows rewritten.
   */
  update: string;
  /** The key columns' count (namespace included): parameters of {@link update} before the row versions. */
  keyCount: number;
  row(threadId: string, r: StoredRow): ValueRow;
}

function tableSql(name: typeof B.table | typeof W.table, t: string, key: [string, string][], where: string, row: TableSql["row"]): TableSql {
  // The two tables name these columns alike.
  const [ns, type, value, rowVersion, threadId] = [B.checkpointNs, B.type, B.value, B.rowVersion, B.threadId];
  const cols = [ns, ...key.map(([c]) => c)];
  const types = ["text", ...key.map(([, ty]) => ty)];
  const aliases = cols.map((_, i) => (i === 0 ? "checkpoint_ns" : `k${i - 1}`));
  const n = cols.length;
  const after = cols.map((_, i) => `$${i + 5}::${types[i]}`);
  const arrays = [...types.map((ty, i) => `pg_catalog.unnest($${i + 2}::${ty}[])`), ...["bigint", "text", "text", "int", "int"].map((ty, i) => `pg_catalog.unnest($${n + 2 + i}::${ty}[])`)];
  return {
    table: name,
    keyCount: n,
    page: (first) => `/* langgraph-checkpoint-pg compact: read ${name} */
SELECT ${cols.map((c, i) => `${c} AS ${aliases[i]}`).join(", ")}, ${type} AS type, ${value} AS value, ${rowVersion}::text AS row_version FROM ${t}
 WHERE ${threadId} = $1 AND ${where} AND ${type} <> 'empty' AND ${notByContent(type)} AND ${value} IS NOT NULL
   AND ($3::bytea[] IS NULL OR ${type} <> 'msgpack' OR pg_catalog.octet_length(${value}) >= $4::int OR pg_catalog.substring(${value}, 1, 1) = ANY ($3::bytea[]))
   AND ${first ? after.map((a) => `${a} IS NULL`).join(" AND ") : `(${cols.join(", ")}) > (${after.join(", ")})`}
 ORDER BY ${cols.join(", ")} LIMIT $2`,
    update: `/* langgraph-checkpoint-pg compact: rewrite ${name} */
UPDATE ${t} x SET ${type} = u.new_type, ${value} = pg_catalog.substring($${n + 7}::bytea, u.off + 1, u.len), ${rowVersion} = x.${rowVersion} + 1
  FROM ROWS FROM (${arrays.join(", ")}) AS u(${aliases.join(", ")}, rv, type, new_type, off, len)
 WHERE x.${threadId} = $1 AND ${cols.map((c, i) => `x.${c} = u.${aliases[i]}`).join(" AND ")}
   AND x.${rowVersion} = u.rv AND x.${type} = u.type
RETURNING ${cols.map((c, i) => `x.${c} AS ${aliases[i]}`).join(", ")}`,
    row,
  };
}
