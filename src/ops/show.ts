/**
 * One stored checkpoint, decoded for people (`show`): its metadata, channel
 * values and pending writes, each value put back together and decoded with
 * the serializer. Its own file: decoding loads the serializer (and with it
 * @langchain/*), which listing threads and their history do without.
 */
import type { ValueRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { LIMITS, checkKey } from "../validate.js";
import { COL } from "../db/names.js";
import { decodeMetadataRaw, decodeStored, loadElements, type Elements } from "./decode.js";
import { open, run, type InspectOptions } from "./inspect.js";

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
   * One per `channel_versions` entry: the blob it points at. `type` is `empty` for a channel without a value at that version (no blob row: the saver writes none),
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
  const { db, t } = await open(options);
  const serde = options.serde ?? new MsgpackSerializer();
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
        if (!b) return { channel, version, type: "empty", value: undefined };
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
