/**
 * `upgradeState`: rewrite the checkpoints written with an older state schema
 * into the current one, in batches of one transaction each.
 */
import { DatabaseOperationError } from "../errors.js";
import { dumpsForRow } from "../serde/rowserde.js";
import { isSyntheticVersion, realVersion, upcastTuple, type StateVersioning } from "./upcast.js";
import type { SaverContext } from "./context.js";
import { encodeUnversioned } from "./encode.js";
import type { ReadRow } from "./sql/index.js";
import { toTuples } from "./read.js";

/**
 * New blobs for upcast channels, the checkpoint row compare-and-set on its
 * row_version, renamed pending writes; `onProgress` (already guarded) after
 * each batch. Nothing is deleted; parent links are unchanged.
 */
export async function upgradeState(
  ctx: SaverContext,
  run: { versioning: StateVersioning; batchSize: number; onProgress: ((p: { rewritten: number }) => unknown) | undefined },
): Promise<{ rewritten: number }> {
  const { versioning, batchSize, onProgress } = run;
  await ctx.ensureReady();
  const q = ctx.queries;
  let cursor: [string, string, string] = ["", "", ""];
  let rewritten = 0;
  for (;;) {
    const done = await ctx.db.transaction(async (tx) => {
      const batch = (
        await tx.query<{ thread_id: string; checkpoint_ns: string; checkpoint_id: string; row_version: string }>(q.staleBatch, [
          versioning.stateVersion,
          ...cursor,
          batchSize,
        ])
      ).rows;
      for (const row of batch) {
        const key = [row.thread_id, row.checkpoint_ns, row.checkpoint_id];
        const rows = (await tx.query<ReadRow>(q.getById, key)).rows;
        const [tuple] = await toTuples(ctx, rows, false);
        const renames = upcastTuple(tuple!, rows.find((r) => r.kind === "checkpoint")!.state_version, versioning);
        const cp = tuple!.checkpoint;
        // Made-up versions become real ones: same counter, now backed by a stored blob.
        const real = realVersion;
        const blobs = await Promise.all(
          Object.entries(cp.channel_versions)
            .filter(([ch, v]) => isSyntheticVersion(v) && Object.prototype.hasOwnProperty.call(cp.channel_values, ch))
            .map(async ([ch, v]) => {
              const version = String(real(v));
              const row = { table: "checkpoint_blobs" as const, threadId: key[0]!, checkpointNs: key[1]!, channel: ch, version };
              return { ch, v: version, typed: await dumpsForRow(ctx.serde, cp.channel_values[ch], row) };
            }),
        );
        await tx.query(q.insertBlobs, [key[0], key[1], blobs.map((b) => b.ch), blobs.map((b) => b.v), blobs.map((b) => b.typed[0]), blobs.map((b) => b.typed[1])]);
        const { channel_values: _values, ...stored } = cp;
        stored.channel_versions = Object.fromEntries(Object.entries(cp.channel_versions).map(([ch, v]) => [ch, real(v)])) as typeof cp.channel_versions;
        // The upcast values of channels without a version are stored again too.
        const unversioned = await encodeUnversioned(ctx, {
          values: cp.channel_values,
          versions: cp.channel_versions,
          field: "upgradeState channel_values (channels without a version)",
          row: { table: "checkpoints", threadId: row.thread_id, checkpointNs: row.checkpoint_ns, checkpointId: row.checkpoint_id },
        });
        const updated = await tx.query(q.rewriteCheckpoint, [...key, row.row_version, stored, versioning.stateVersion, unversioned.type, unversioned.bytes]);
        if (updated.rows.length === 0) throw new DatabaseOperationError("upgradeState", new Error("a checkpoint changed during its rewrite"), { retryable: true });
        for (const [from, to] of renames) await tx.query(q.renameWrites, [...key, from, to]);
        cursor = [row.thread_id, row.checkpoint_ns, row.checkpoint_id];
      }
      rewritten += batch.length;
      return batch.length < batchSize;
    });
    onProgress?.({ rewritten });
    if (done) return { rewritten };
  }
}
