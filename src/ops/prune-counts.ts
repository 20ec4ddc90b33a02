/**
 * Counting what a prune removes (or, dry, would remove): totals and per thread.
 */
import type { PruneCounts, PruneKept, PruneThreadCounts } from "./prune-options.js";
import type { RoundRow } from "./prune-sql.js";

export function zero(): PruneCounts {
  return { checkpoints: 0, writes: 0, blobs: 0, checkpointBytes: 0, writeBytes: 0, blobBytes: 0, threadsExpired: 0, threadsSkipped: 0, tombstones: 0 };
}

export function addRows(into: PruneCounts, row: RoundRow): void {
  into.checkpoints += row.checkpoints;
  into.writes += row.writes;
  into.blobs += row.blobs;
  into.checkpointBytes += Number(row.checkpoint_bytes);
  into.writeBytes += Number(row.write_bytes);
  into.blobBytes += Number(row.blob_bytes);
}

export function addCounts(into: PruneCounts, from: PruneCounts): void {
  for (const k of Object.keys(into) as (keyof PruneCounts)[]) into[k] += from[k];
}

export function zeroKept(): PruneKept {
  return { keepLast: 0, head: 0, olderThan: 0, grace: 0, delta: 0 };
}

/** Adds what a round's keep set kept (its `kept` column) into `into`. */
export function addKept(into: PruneKept, row: RoundRow): void {
  const k = typeof row.kept === "string" ? (JSON.parse(row.kept) as Exclude<RoundRow["kept"], string>) : row.kept;
  if (!k) return;
  into.keepLast += k.keep_last;
  into.head += k.head;
  into.olderThan += k.older_than;
  into.grace += k.grace;
  into.delta += k.delta;
}

export function addKeptTotals(into: PruneKept, from: PruneKept): void {
  for (const k of Object.keys(into) as (keyof PruneKept)[]) into[k] += from[k];
}

export interface BatchOutcome {
  counts: PruneCounts;
  /** What the batch's keep sets kept, by rule. */
  kept: PruneKept;
  expired: string[];
  skipped: string[];
  /** Dry runs: per thread. */
  threads?: PruneThreadCounts[];
}

export interface PerThreadRow {
  thread_id: string;
  checkpoints: number;
  checkpoint_bytes: number | string;
  writes: number;
  write_bytes: number | string;
  blobs: number;
  blob_bytes: number | string;
}

/** Adds a dry statement's per-thread counts (`per_thread`, JSON) into `into`. */
export function addPerThread(into: Map<string, PruneThreadCounts>, rows: PerThreadRow[] | string, expired: boolean): void {
  for (const r of typeof rows === "string" ? (JSON.parse(rows) as PerThreadRow[]) : rows) {
    const t = into.get(r.thread_id) ?? { threadId: r.thread_id, checkpoints: 0, writes: 0, blobs: 0, bytes: 0, expired };
    t.checkpoints += r.checkpoints;
    t.writes += r.writes;
    t.blobs += r.blobs;
    t.bytes += Number(r.checkpoint_bytes) + Number(r.write_bytes) + Number(r.blob_bytes);
    into.set(r.thread_id, t);
  }
}
