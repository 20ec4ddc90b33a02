/**
 * The read path, after the statement: the rows of the one-statement
 * reads (`getById`, `getHead`, `listPage`: a checkpoint with its blobs and
 * pending writes, see `ReadRow`) back into LangGraph's tuples, and the rows
 * of `deltaHistory` into each channel's seed and writes.
 */
import {
  TASKS,
  compareWritesSortKeys,
  maxChannelVersion,
  writesSortKey,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
} from "@langchain/langgraph-checkpoint";
import { HistoryCorruptError } from "../errors.js";
import { decodeMetadata } from "../serde/metadata.js";
import { loadsForRow, type ValueRow } from "../serde/rowserde.js";
import { upcastTuple } from "./upcast.js";
import type { SaverContext } from "./context.js";
import { elementCodec } from "./element-codec.js";
import { deltaChannels, elementKey, lineageKey, type StoredElement } from "./elements.js";
import { decodeStoredValue, namesElements } from "./stored.js";
import type { DeltaRow, ListKey, ReadRow } from "./sql/index.js";

/** Decode a value stored whole; `row` is where it is stored (a serializer may check that the value belongs there). */
function decode(ctx: SaverContext, type: string, value: Buffer | null, row: ValueRow): Promise<unknown> {
  return loadsForRow(ctx.serde, type, value ?? new Uint8Array(), row);
}

/**
 * A blob's or a write's value in any form (stored.ts): values stored by content put back together
 * from the element rows the read returned. `onHash` sees each element and chunk hash it names.
 */
function decodeValue(ctx: SaverContext, type: string, value: Buffer | null, row: ValueRow, elements: Map<string, StoredElement>, onHash?: (hash: string) => void): Promise<unknown> {
  if (!namesElements(type)) return decode(ctx, type, value, row);
  return decodeStoredValue({ serde: ctx.serde, codec: elementCodec(ctx.serde) }, type, value, row, (h) => elements.get(elementKey(row.threadId, row.checkpointNs, h)), onHash);
}

/** One checkpoint's read rows. */
interface Entry {
  head: ReadRow;
  blobs: ReadRow[];
  writes: ReadRow[];
  sends: ReadRow[];
}

/** Rebuild tuples from read rows, newest first; upcast to the saver's state version unless told not to. */
export async function toTuples(ctx: SaverContext, rows: ReadRow[], upcast = true, remember = false): Promise<CheckpointTuple[]> {
  const byKey = new Map<string, Entry>();
  const elements = new Map<string, StoredElement>();
  const keyOf = (r: ReadRow) => `${r.thread_id}\u0000${r.checkpoint_ns}\u0000${r.checkpoint_id}`;
  for (const r of rows) {
    if (r.kind === "checkpoint") byKey.set(keyOf(r), { head: r, blobs: [], writes: [], sends: [] });
    else if (r.kind === "element") elements.set(elementKey(r.thread_id, r.checkpoint_ns, r.version!), { type: r.type!, value: r.value });
  }
  for (const r of rows) {
    if (r.kind === "checkpoint" || r.kind === "element") continue;
    const e = byKey.get(keyOf(r))!;
    (r.kind === "blob" ? e.blobs : r.kind === "write" ? e.writes : e.sends).push(r);
  }
  const entries = [...byKey.values()].sort((a, b) => newestFirst(a.head, b.head));
  return Promise.all(entries.map((e) => toTuple(ctx, e, elements, upcast, remember)));
}

/** `list`'s order: newest checkpoint id first, then thread and namespace, descending (code points, as the SQL's "C" collation). */
export const newestFirst = (a: ListKey, b: ListKey): number =>
  codePointCompare(b.checkpoint_id, a.checkpoint_id) || codePointCompare(b.thread_id, a.thread_id) || codePointCompare(b.checkpoint_ns, a.checkpoint_ns);

async function toTuple(ctx: SaverContext, entry: Entry, elements: Map<string, StoredElement>, upcast: boolean, remember: boolean): Promise<CheckpointTuple> {
  const { head, blobs, writes, sends } = entry;
  const byOrder = (a: ReadRow, b: ReadRow) => compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id!, a.idx!), writesSortKey(b.task_path ?? "", b.task_id!, b.idx!));
  writes.sort(byOrder);
  const threadId = head.thread_id;
  const checkpointNs = head.checkpoint_ns;
  // What this checkpoint's values and writes refer to, for the next put on it (elements.ts).
  const lists = new Map<string, string[]>();
  const written = new Map<string, string[]>();
  const writeRow = (w: ReadRow, checkpointId: string): ValueRow => ({ table: "checkpoint_writes", threadId, checkpointNs, checkpointId, taskId: w.task_id!, idx: w.idx! });
  const [values, unversioned, pendingWrites, metadata] = await Promise.all([
    Promise.all(
      blobs.map(async (b) => {
        let hashes: string[] | undefined;
        if (remember && namesElements(b.type!)) lists.set(b.channel!, (hashes = []));
        const row: ValueRow = { table: "checkpoint_blobs", threadId, checkpointNs, channel: b.channel!, version: b.version! };
        const value = await decodeValue(ctx, b.type!, b.value, row, elements, hashes && ((h) => hashes.push(h)));
        return [b.channel!, value] as const;
      }),
    ),
    head.value === null
      ? undefined
      : (decode(ctx, head.type!, head.value, { table: "checkpoints", threadId, checkpointNs, checkpointId: head.checkpoint_id }) as Promise<Record<string, unknown>>),
    Promise.all(
      writes.map(async (w): Promise<CheckpointPendingWrite> => [
        w.task_id!,
        w.channel!,
        await decodeValue(ctx, w.type!, w.value, writeRow(w, head.checkpoint_id), elements, remember ? (h) => addTo(written, w.channel!, h) : undefined),
      ]),
    ),
    decodeMetadata(head.metadata, head.metadata_raw),
  ]);
  const stored = head.checkpoint as Partial<Omit<Checkpoint, "channel_values">>;
  const checkpoint = {
    ...stored,
    // Stored in its own column only (rows written before 0.1.0, and adopted ones, hold it in the JSON too).
    id: head.checkpoint_id,
    // MemorySaver's defaults, for rows an older writer stored without them.
    channel_versions: stored.channel_versions ?? {},
    versions_seen: stored.versions_seen ?? {},
    // A blob holding undefined is no value: the checkpoints that hold one list it in `unversioned` (encode.ts).
    channel_values: { ...unversioned, ...Object.fromEntries(values.filter(([, value]) => value !== undefined)) },
  } as Checkpoint;
  const parent = head.parent_id ?? undefined;
  if (checkpoint.v < 4 && parent !== undefined) {
    // Checkpoints before format v4 kept pending sends as writes of the parent.
    sends.sort(byOrder);
    checkpoint.channel_values[TASKS] = await Promise.all(sends.map((w) => decode(ctx, w.type!, w.value, writeRow(w, parent))));
    const existing = Object.values(checkpoint.channel_versions ?? {});
    checkpoint.channel_versions = {
      ...checkpoint.channel_versions,
      [TASKS]: existing.length > 0 ? maxChannelVersion(...existing) : ctx.nextVersion(undefined),
    };
  }
  const tuple: CheckpointTuple = {
    config: { configurable: { thread_id: head.thread_id, checkpoint_ns: head.checkpoint_ns, checkpoint_id: head.checkpoint_id } },
    checkpoint,
    metadata: metadata as CheckpointMetadata,
    pendingWrites,
  };
  if (parent !== undefined) {
    tuple.parentConfig = { configurable: { thread_id: head.thread_id, checkpoint_ns: head.checkpoint_ns, checkpoint_id: parent } };
  }
  if (remember && ctx.elements) {
    const lineage = lineageKey(threadId, checkpointNs);
    // Whether it stores each channel: a blob that is not `empty` at the channel's version.
    const stores = new Map(Object.keys(checkpoint.channel_versions).map((ch) => [ch, false]));
    for (const b of blobs) if (b.type !== "empty") stores.set(b.channel!, true);
    ctx.elements.rememberCheckpoint(lineage, head.checkpoint_id, null, { lists, stores, delta: deltaChannels(checkpoint.channel_versions, metadata) });
    ctx.elements.rememberWrites(lineage, head.checkpoint_id, written);
  }
  if (upcast && ctx.versioning) upcastTuple(tuple, head.state_version, ctx.versioning);
  return tuple;
}

/** Append `value` to the list of `key`. */
function addTo<V>(map: Map<string, V[]>, key: string, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/**
 * Each channel's seed and the writes after it, from the rows of `deltaHistory`; a walk that stopped
 * short throws. The hashes each walk names are remembered for checkpoint `checkpointId` (when given):
 * a put on it then need not send them again (a snapshot of the channel names the messages its
 * writes stored). A seed read by its elements is kept (`ElementMemory`); one of the `kept` seeds
 * the statement did not send the elements of is decoded from what was kept, and undefined is
 * returned if its row is no longer the one kept (read again without it).
 */
export async function toDeltaHistory(
  ctx: SaverContext,
  rows: DeltaRow[],
  lineage: { threadId: string; checkpointNs: string; checkpointId: string | undefined; channels: string[]; kept: { channels: string[]; versions: string[] } },
): Promise<Record<string, DeltaChannelHistory> | undefined> {
  const { threadId, checkpointNs: ns, channels } = lineage;
  const stopped = rows.find((r) => r.kind === "stopped");
  if (stopped) {
    throw new HistoryCorruptError({
      schema: ctx.schema,
      threadId,
      checkpointNs: ns,
      checkpointId: stopped.checkpoint_id,
      reason: stopped.type === "cycle" ? "cycle" : "missing-parent",
      operation: "getDeltaChannelHistory",
    });
  }
  const result: Record<string, DeltaChannelHistory> = {};
  for (const ch of channels) result[ch] = { writes: [] };
  const writeRows = rows.filter((r) => r.kind === "write");
  // Oldest ancestor first; within one checkpoint, the order live execution applies writes.
  writeRows.sort(
    (a, b) =>
      b.depth - a.depth ||
      compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id!, a.idx!), writesSortKey(b.task_path ?? "", b.task_id!, b.idx!)),
  );
  const elements = new Map<string, StoredElement>();
  for (const r of rows) if (r.kind === "element") elements.set(elementKey(threadId, ns, r.version!), { type: r.type, value: r.value });
  const key = lineageKey(threadId, ns);
  const seeds = rows.filter((r) => r.kind === "seed");
  const isKept = (r: DeltaRow) => lineage.kept.channels.some((ch, i) => ch === r.channel && lineage.kept.versions[i] === r.version);
  for (const r of seeds.filter(isKept)) {
    const kept = ctx.elements?.seed(key, r.channel, r.version!);
    if (!kept || kept.type !== r.type || r.value === null || !Buffer.from(kept.value).equals(r.value)) return undefined;
    for (const [k, e] of kept.elements) elements.set(k, e);
  }
  const remember = ctx.elements !== undefined && lineage.checkpointId !== undefined;
  const walks = new Map<string, string[]>(remember ? channels.map((ch) => [ch, []]) : []);
  const onHash = (channel: string) => (remember ? (h: string) => addTo(walks, channel, h) : undefined);
  const decoded = await Promise.all(
    writeRows.map((r) =>
      decodeValue(
        ctx,
        r.type,
        r.value,
        { table: "checkpoint_writes", threadId, checkpointNs: ns, checkpointId: r.checkpoint_id, taskId: r.task_id!, idx: r.idx! },
        elements,
        onHash(r.channel),
      ),
    ),
  );
  writeRows.forEach((r, i) => result[r.channel]!.writes.push([r.task_id!, r.channel, decoded[i]]));
  for (const r of seeds) {
    const row: ValueRow = { table: "checkpoint_blobs", threadId, checkpointNs: ns, channel: r.channel, version: r.version! };
    const named: string[] = [];
    const walk = onHash(r.channel);
    result[r.channel]!.seed = await decodeValue(ctx, r.type, r.value, row, elements, (h) => (named.push(h), walk?.(h)));
    if (ctx.elements && named.length > 0 && r.value !== null && !isKept(r)) {
      // Checked as it was read: kept for the next read of the lineage (the next turn's).
      const own = new Map(named.map((h) => elementKey(threadId, ns, h)).map((k) => [k, elements.get(k)!] as const));
      ctx.elements.rememberSeed(key, r.channel, r.version!, { type: r.type, value: Buffer.from(r.value), elements: own });
    }
  }
  if (remember) ctx.elements!.rememberWalks(key, lineage.checkpointId!, new Map([...walks].map(([ch, hashes]) => [ch, new Set(hashes)])));
  return result;
}

/** Compare by Unicode code point (the order of `COLLATE "C"` on UTF-8), not UTF-16 units. */
function codePointCompare(a: string, b: string): number {
  if (a === b) return 0;
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    if (x.value !== y.value) return x.value.codePointAt(0)! - y.value.codePointAt(0)!;
  }
}
