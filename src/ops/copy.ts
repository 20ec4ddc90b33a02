/**
 * `copyThread`: a thread's history (or the part of it up to a checkpoint)
 * under another thread id, in one transaction, every namespace, element rows
 * included. The copy keeps the checkpoint ids, parents, metadata, values and
 * pending writes, so it reads exactly as the source at every checkpoint (time
 * travel and forks on it work as on the source). Its statements live here,
 * next to the one function that runs them (as prune's do), not in sql/.
 *
 * What is copied: the source's checkpoints (all of them, or with `upTo`
 * those whose id sorts at or before it: the thread as it stood when `upTo`
 * was its newest checkpoint, LangGraph's ids growing with time), with their
 * ancestors, so every copied checkpoint finds its parent chain (delta
 * channels are rebuilt along it); the blobs and element rows they name; the
 * pending writes stored under them. Not copied: blobs no copied checkpoint
 * names, writes whose checkpoint is not stored. Each lineage's head is the
 * source's when copied (`upTo` is the root namespace's), else its newest
 * copied checkpoint; no run holds it (its lease is over, for linear mode).
 * The copy's rows are new: `created_at` is the copy's time, so retention
 * (`olderThan`, `idleFor`) counts from the copy. Metadata is copied as it is:
 * the `thread_id` LangGraph records in it names the source (its snapshots,
 * `getState` and `getStateHistory`, report the copy's own id).
 *
 * Locks: the target's deletion lock (saver/tombstones.ts) exclusively, as a
 * deletion: writes to the target wait, and the copy waits for those in
 * flight; the source's shared, as a write: a deletion of the source in
 * progress is waited for. Both in thread-id order, so two copies between the
 * same threads in opposite directions cannot deadlock. Then prune's lock of
 * the source (prune-sql.ts; after the deletion locks, as compact.ts takes
 * them): no prune or compaction removes the source's rows between the
 * statement that picks the checkpoints and the one that copies them. A target with a
 * tombstone (deleted before) can be copied to: the copy's checkpoints are
 * stored, so the tombstone refuses none of them; it keeps refusing what
 * continues the target's deleted history.
 *
 * With a serializer that binds each value to its row (`EncryptedSerializer`),
 * the copied values are opened for their source rows and sealed again for
 * their target rows, in the same transaction (the inner bytes are kept, so an
 * element keeps its hash), and each list's refs value gets the tag of its new
 * row (element-codec.ts); chunks, which name no row, are copied as they are.
 * Other serializers' values are copied as bytes.
 */
import { InvalidInputError, ThreadCopyError } from "../errors.js";
import { emit } from "../events.js";
import { CHECKPOINT_BLOBS as B, CHECKPOINT_HEADS as H, CHECKPOINT_WRITES as W, CHECKPOINTS as C } from "../db/names.js";
import type { Queryable } from "../db/db.js";
import { isRowBound, type ValueRow } from "../serde/rowserde.js";
import { LIMITS, checkKey, quoteIdent } from "../validate.js";
import type { SaverContext } from "../saver/context.js";
import { KNOWS_ELEMENTS_SQL, type BlobRow } from "../saver/element-codec.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "../saver/elements.js";
import { hashesSql, rebindStored, refsAreaSql } from "../saver/stored.js";
import { deleteLockName } from "../saver/sql/gate.js";
import { pruneLockName } from "./prune-sql.js";

/** Options of `copyThread`. */
export interface CopyThreadOptions {
  /** Copy the history up to this checkpoint of the root namespace (it becomes the copy's head). Default: all of it. */
  upTo?: string;
  /** Replace a target thread that holds rows (it is deleted first, leaving its tombstone). Default false: refused. */
  overwrite?: boolean;
  /** Count what would be copied, write nothing (the copy's transaction is rolled back). Default false. */
  dryRun?: boolean;
}

/** What `copyThread` copied. */
export interface CopyThreadResult {
  checkpoints: number;
  writes: number;
  blobs: number;
  /** The target held rows, and they were replaced. */
  overwrote: boolean;
}

/** copyThread's arguments, checked before any SQL (each error names its field). */
export function checkCopyArguments(fromThreadId: unknown, toThreadId: unknown, options: CopyThreadOptions): { from: string; to: string } {
  const from = checkKey("copyThread fromThreadId", fromThreadId, LIMITS.thread_id);
  const to = checkKey("copyThread toThreadId", toThreadId, LIMITS.thread_id);
  if (from === to) throw new InvalidInputError("copyThread toThreadId", "is the source thread; copy to another thread id");
  if (options === null || typeof options !== "object") throw new InvalidInputError("copyThread options", "expected { upTo?, overwrite?, dryRun? }");
  for (const key of Object.keys(options)) {
    if (key !== "upTo" && key !== "overwrite" && key !== "dryRun") throw new InvalidInputError(`copyThread options.${key}`, "is not an option (upTo, overwrite, dryRun)");
  }
  if (options.upTo !== undefined) checkKey("copyThread options.upTo", options.upTo, LIMITS.checkpoint_id);
  for (const flag of ["overwrite", "dryRun"] as const) {
    if (options[flag] !== undefined && typeof options[flag] !== "boolean") throw new InvalidInputError(`copyThread options.${flag}`, "expected true or false");
  }
  return { from, to };
}

const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** The copy's statements, built once per schema. */
export function copyStatements(schema: string) {
  const s = quoteIdent(schema);
  const cp = `${s}.${C.table}`;
  const wr = `${s}.${W.table}`;
  const bl = `${s}.${B.table}`;
  const hd = `${s}.${H.table}`;
  const lockName = lit(deleteLockName(schema));
  /** The hashes in the refs areas of the values of `source` (columns ns, type, value; stored.ts), each once per namespace, as (ns, h). */
  const hashes = (source: string) => `
    SELECT DISTINCT x.ns, i.h FROM (SELECT y.ns, ${refsAreaSql("y.type", "y.value")} AS area FROM ${source} y) x ${hashesSql("x.area", "i")}`;
  const elementRows = (source: string) => `
    SELECT e.${B.checkpointNs} AS ns, e.${B.channel} AS channel, e.${B.version} AS version, e.${B.type} AS type, e.${B.value} AS value
      FROM ${source} k JOIN ${bl} e
        ON e.${B.threadId} = $1 AND e.${B.checkpointNs} = k.ns AND e.${B.channel} = '${ELEMENTS_CHANNEL}' AND e.${B.version} = k.h`;
  return {
    /**
     * The two threads' deletion locks, in thread-id order: $1 source (shared), $2 target (exclusive).
     */
    lock: `
SELECT CASE WHEN t.shared THEN pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtext(${lockName}), pg_catalog.hashtext(t.id))
            ELSE pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(${lockName}), pg_catalog.hashtext(t.id)) END
  FROM (VALUES ($1::text, true), ($2::text, false)) AS t(id, shared) ORDER BY t.id COLLATE "C"`,

    /** $1 source, $2 target, $3 upTo|null: is there anything to copy, is the target taken, is `upTo` a root checkpoint of the source. */
    check: `
SELECT EXISTS (SELECT 1 FROM ${cp} WHERE ${C.threadId} = $1) AS source,
       (EXISTS (SELECT 1 FROM ${cp} WHERE ${C.threadId} = $2) OR EXISTS (SELECT 1 FROM ${hd} WHERE ${H.threadId} = $2)
        OR EXISTS (SELECT 1 FROM ${wr} WHERE ${W.threadId} = $2) OR EXISTS (SELECT 1 FROM ${bl} WHERE ${B.threadId} = $2)) AS target,
       ($3::text IS NULL OR EXISTS (SELECT 1 FROM ${cp} WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = '' AND ${C.checkpointId} = $3)) AS up_to`,

    /** $1 source: does it hold values encrypted by EncryptedSerializer (bound to their rows)? */
    bound: `
SELECT EXISTS (SELECT 1 FROM ${bl} WHERE ${B.threadId} = $1 AND pg_catalog.starts_with(${B.type}, 'enc:'))
    OR EXISTS (SELECT 1 FROM ${wr} WHERE ${W.threadId} = $1 AND pg_catalog.starts_with(${W.type}, 'enc:'))
    OR EXISTS (SELECT 1 FROM ${cp} WHERE ${C.threadId} = $1 AND pg_catalog.starts_with(${C.unversionedType}, 'enc:')) AS bound`,

    /**
     * $1 prune's lock name, $2 source: prune's lock of the source thread (prune-sql.ts), held to the
     * end: no prune or compaction removes a row of the source between the two statements below.
     */
    pin: `SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1::text), pg_catalog.hashtext($2::text))`,

    /**
     * What to copy: $1 source, $2 upTo|null. The checkpoints (ns, id) whose id sorts at or before
     * upTo (all of them without), and their ancestors. A statement of its own, on the source alone:
     * Citus runs a recursive CTE only in a statement routed to one thread's node.
     */
    pick: `
WITH RECURSIVE picked (ns, id, parent) AS (
  SELECT c.${C.checkpointNs}, c.${C.checkpointId}, c.${C.parentCheckpointId} FROM ${cp} c
   WHERE c.${C.threadId} = $1 AND ($2::text IS NULL OR c.${C.checkpointId} <= $2)
  UNION
  SELECT p.${C.checkpointNs}, p.${C.checkpointId}, p.${C.parentCheckpointId}
    FROM picked k JOIN ${cp} p ON p.${C.threadId} = $1 AND p.${C.checkpointNs} = k.ns AND p.${C.checkpointId} = k.parent
)
SELECT DISTINCT ns, id FROM picked`,

    /**
     * The copy itself, one statement: $1 source, $2 target, $3 upTo|null, $4 and $5 the namespaces
     * and ids {@link pick} chose. Returns the rows inserted.
     */
    copy: `
WITH sel AS MATERIALIZED (
  SELECT u.ns, u.id FROM ROWS FROM (pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[])) AS u(ns, id)
), named AS MATERIALIZED (
  SELECT DISTINCT s.ns, v.key AS channel, v.value AS version
    FROM sel s JOIN ${cp} c ON c.${C.threadId} = $1 AND c.${C.checkpointNs} = s.ns AND c.${C.checkpointId} = s.id
   CROSS JOIN LATERAL pg_catalog.jsonb_each_text(CASE WHEN pg_catalog.jsonb_typeof(c.${C.checkpoint} -> 'channel_versions') = 'object'
                                                 THEN c.${C.checkpoint} -> 'channel_versions' ELSE '{}'::jsonb END) AS v
), vals AS MATERIALIZED (
  SELECT b.${B.checkpointNs} AS ns, b.${B.channel} AS channel, b.${B.version} AS version, b.${B.type} AS type, b.${B.value} AS value
    FROM named n JOIN ${bl} b ON b.${B.threadId} = $1 AND b.${B.checkpointNs} = n.ns AND b.${B.channel} = n.channel AND b.${B.version} = n.version
   WHERE b.${B.channel} <> '${ELEMENTS_CHANNEL}'
), cw AS MATERIALIZED (
  SELECT w.${W.checkpointNs} AS ns, w.${W.type} AS type, w.${W.value} AS value
    FROM sel s JOIN ${wr} w ON w.${W.threadId} = $1 AND w.${W.checkpointNs} = s.ns AND w.${W.checkpointId} = s.id
), h1 AS MATERIALIZED (${hashes("(SELECT ns, type, value FROM vals UNION ALL SELECT ns, type, value FROM cw)")}
), e1 AS MATERIALIZED (${elementRows("h1")}
), h2 AS MATERIALIZED (
  SELECT x.ns, x.h FROM (${hashes("e1")}) x WHERE NOT EXISTS (SELECT 1 FROM h1 WHERE h1.ns = x.ns AND h1.h = x.h)
), e2 AS MATERIALIZED (${elementRows("h2")}
), heads AS MATERIALIZED (
  SELECT s.ns, CASE WHEN s.ns = '' AND $3::text IS NOT NULL THEN $3::text
                    ELSE coalesce(pg_catalog.max(h.${H.checkpointId}), pg_catalog.max(s.id)) END AS id
    FROM sel s LEFT JOIN ${hd} h ON h.${H.threadId} = $1 AND h.${H.checkpointNs} = s.ns AND h.${H.checkpointId} = s.id
   GROUP BY s.ns
), ins_c AS (
  INSERT INTO ${cp} (${C.threadId}, ${C.checkpointNs}, ${C.checkpointId}, ${C.parentCheckpointId}, ${C.checkpoint}, ${C.metadata}, ${C.metadataRaw},
                     ${C.ttlSeconds}, ${C.stateVersion}, ${C.hasPendingTasks}, ${C.unversionedType}, ${C.unversionedValues})
  SELECT $2, c.${C.checkpointNs}, c.${C.checkpointId}, c.${C.parentCheckpointId}, c.${C.checkpoint}, c.${C.metadata}, c.${C.metadataRaw},
         c.${C.ttlSeconds}, c.${C.stateVersion}, c.${C.hasPendingTasks}, c.${C.unversionedType}, c.${C.unversionedValues}
    FROM sel s JOIN ${cp} c ON c.${C.threadId} = $1 AND c.${C.checkpointNs} = s.ns AND c.${C.checkpointId} = s.id
  RETURNING 1
), ins_b AS (
  INSERT INTO ${bl} (${B.threadId}, ${B.checkpointNs}, ${B.channel}, ${B.version}, ${B.type}, ${B.value})
  SELECT $2, x.ns, x.channel, x.version, x.type, x.value FROM (SELECT * FROM vals UNION ALL SELECT * FROM e1 UNION ALL SELECT * FROM e2) x
  ON CONFLICT DO NOTHING
  RETURNING 1
), ins_w AS (
  INSERT INTO ${wr} (${W.threadId}, ${W.checkpointNs}, ${W.checkpointId}, ${W.taskId}, ${W.idx}, ${W.channel}, ${W.type}, ${W.value}, ${W.taskPath})
  SELECT $2, w.${W.checkpointNs}, w.${W.checkpointId}, w.${W.taskId}, w.${W.idx}, w.${W.channel}, w.${W.type}, w.${W.value}, w.${W.taskPath}
    FROM sel s JOIN ${wr} w ON w.${W.threadId} = $1 AND w.${W.checkpointNs} = s.ns AND w.${W.checkpointId} = s.id
  RETURNING 1
), ins_h AS (
  INSERT INTO ${hd} (${H.threadId}, ${H.checkpointNs}, ${H.checkpointId}, ${H.movedAt}, ${H.hasPendingTasks})
  SELECT $2, h.ns, h.id, '-infinity', c.${C.hasPendingTasks}
    FROM heads h JOIN ${cp} c ON c.${C.threadId} = $1 AND c.${C.checkpointNs} = h.ns AND c.${C.checkpointId} = h.id
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM ins_c)::int AS checkpoints, (SELECT pg_catalog.count(*) FROM ins_w)::int AS writes,
       (SELECT pg_catalog.count(*) FROM ins_b)::int AS blobs`,

    /** Row-bound values of the copy (thread $1), to encode again for their new rows. */
    boundValues: {
      blobs: `SELECT ${B.checkpointNs} AS ns, ${B.channel} AS channel, ${B.version} AS version, ${B.type} AS type, ${B.value} AS value FROM ${bl}
               WHERE ${B.threadId} = $1 AND ${B.value} IS NOT NULL AND ${B.type} <> 'empty'
                 AND NOT (${B.channel} = '${ELEMENTS_CHANNEL}' AND ${B.type} = '${REFS_TYPE}')`,
      writes: `SELECT ${W.checkpointNs} AS ns, ${W.checkpointId} AS id, ${W.taskId} AS task, ${W.idx} AS idx, ${W.type} AS type, ${W.value} AS value FROM ${wr}
                WHERE ${W.threadId} = $1 AND ${W.value} IS NOT NULL`,
      checkpoints: `SELECT ${C.checkpointNs} AS ns, ${C.checkpointId} AS id, ${C.unversionedType} AS type, ${C.unversionedValues} AS value FROM ${cp}
                     WHERE ${C.threadId} = $1 AND ${C.unversionedValues} IS NOT NULL`,
    },
    rebind: {
      blobs: `UPDATE ${bl} x SET ${B.type} = u.type, ${B.value} = u.value
                FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                                pg_catalog.unnest($6::bytea[])) AS u(ns, channel, version, type, value)
               WHERE x.${B.threadId} = $1 AND x.${B.checkpointNs} = u.ns AND x.${B.channel} = u.channel AND x.${B.version} = u.version`,
      writes: `UPDATE ${wr} x SET ${W.type} = u.type, ${W.value} = u.value
                 FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::int[]),
                                 pg_catalog.unnest($6::text[]), pg_catalog.unnest($7::bytea[])) AS u(ns, id, task, idx, type, value)
                WHERE x.${W.threadId} = $1 AND x.${W.checkpointNs} = u.ns AND x.${W.checkpointId} = u.id AND x.${W.taskId} = u.task AND x.${W.idx} = u.idx`,
      checkpoints: `UPDATE ${cp} x SET ${C.unversionedType} = u.type, ${C.unversionedValues} = u.value
                      FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::bytea[]))
                           AS u(ns, id, type, value)
                     WHERE x.${C.threadId} = $1 AND x.${C.checkpointNs} = u.ns AND x.${C.checkpointId} = u.id`,
    },
  };
}

type Statements = ReturnType<typeof copyStatements>;
type Row = Record<string, unknown>;

/**
 * Copy `from` to `to` (see the top of this file). Arguments are checked by
 * the caller; this runs in one transaction of `ctx.db`.
 */
export async function copyThread(ctx: SaverContext, sql: Statements, from: string, to: string, options: CopyThreadOptions, started: number): Promise<CopyThreadResult> {
  const upTo = options.upTo ?? null;
  const result = await ctx.db.transaction(async (tx) => {
    // The transaction knows element rows (an overwrite deletes the target's: migration 0008's guard).
    await tx.query(KNOWS_ELEMENTS_SQL);
    await tx.query(sql.lock, [from, to]);
    const check = (await tx.query<{ source: boolean; target: boolean; up_to: boolean }>(sql.check, [from, to, upTo])).rows[0]!;
    if (!check.source) throw new ThreadCopyError({ fromThreadId: from, toThreadId: to, reason: "source-missing" });
    if (!check.up_to) throw new ThreadCopyError({ fromThreadId: from, toThreadId: to, upTo: upTo!, reason: "checkpoint-missing" });
    if (check.target && !options.overwrite) throw new ThreadCopyError({ fromThreadId: from, toThreadId: to, reason: "target-exists" });
    // Copied as bytes, values sealed for the source's rows would not decrypt in the copy's.
    const bound = isRowBound(ctx.serde);
    if (!bound && (await tx.query<{ bound: boolean }>(sql.bound, [from])).rows[0]!.bound) {
      throw new ThreadCopyError({ fromThreadId: from, toThreadId: to, reason: "needs-serializer" });
    }
    // Replaced as deleteThread would delete it (its tombstone included); the lock is held already.
    if (check.target) await tx.query(ctx.queries.deleteThread, [to]);
    await tx.query(sql.pin, [pruneLockName(ctx.schema), from]);
    const picked = (await tx.query<{ ns: string; id: string }>(sql.pick, [from, upTo])).rows;
    const counts = (
      await tx.query<{ checkpoints: number; writes: number; blobs: number }>(sql.copy, [from, to, upTo, picked.map((r) => r.ns), picked.map((r) => r.id)])
    ).rows[0]!;
    if (bound) await rebind(ctx, sql, tx, from, to);
    return { ...counts, overwrote: check.target };
  }, { rollback: options.dryRun === true });
  if (options.dryRun) return result;
  ctx.elements?.forgetThread(to);
  emit(ctx.onEvent, { type: "copyThread", fromThreadId: from, toThreadId: to, upTo: upTo ?? undefined, ...result, durationMs: performance.now() - started });
  return result;
}

/** Values bound to their rows: opened (or decoded) for the source row, sealed (or encoded) for the copy's; refs areas re-tagged (stored.ts). */
async function rebind(ctx: SaverContext, sql: Statements, tx: Queryable, from: string, to: string): Promise<void> {
  const serde = ctx.serde;
  const again = async (type: string, value: Buffer, row: (threadId: string) => ValueRow): Promise<[string, Buffer]> => {
    const [t, bytes] = await rebindStored(serde, type, value, row(from), row(to));
    return [t, Buffer.from(bytes)];
  };
  const blobs = (await tx.query<Row>(sql.boundValues.blobs, [to])).rows;
  const b = await Promise.all(
    blobs.map((r) =>
      again(String(r.type), r.value as Buffer, (threadId): BlobRow => ({ table: "checkpoint_blobs", threadId, checkpointNs: String(r.ns), channel: String(r.channel), version: String(r.version) })),
    ),
  );
  if (blobs.length > 0) {
    await tx.query(sql.rebind.blobs, [to, blobs.map((r) => r.ns), blobs.map((r) => r.channel), blobs.map((r) => r.version), b.map((x) => x[0]), b.map((x) => x[1])]);
  }
  const writes = (await tx.query<Row>(sql.boundValues.writes, [to])).rows;
  const w = await Promise.all(
    writes.map((r) =>
      again(String(r.type), r.value as Buffer, (threadId) => ({
        table: "checkpoint_writes",
        threadId,
        checkpointNs: String(r.ns),
        checkpointId: String(r.id),
        taskId: String(r.task),
        idx: Number(r.idx),
      })),
    ),
  );
  if (writes.length > 0) {
    await tx.query(sql.rebind.writes, [to, writes.map((r) => r.ns), writes.map((r) => r.id), writes.map((r) => r.task), writes.map((r) => r.idx), w.map((x) => x[0]), w.map((x) => x[1])]);
  }
  const cps = (await tx.query<Row>(sql.boundValues.checkpoints, [to])).rows;
  const c = await Promise.all(
    cps.map((r) => again(String(r.type), r.value as Buffer, (threadId) => ({ table: "checkpoints", threadId, checkpointNs: String(r.ns), checkpointId: String(r.id) }))),
  );
  if (cps.length > 0) await tx.query(sql.rebind.checkpoints, [to, cps.map((r) => r.ns), cps.map((r) => r.id), c.map((x) => x[0]), c.map((x) => x[1])]);
}
