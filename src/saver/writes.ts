/**
 * Pending writes, from the call to the statement: `encodeWrites` checks a
 * putWrites call and serializes its values before any connection is taken
 * (its rows, threads.ts `WriteRows`); `sendWrites` sends one call's rows, or
 * several coalesced ones of a lineage, as one statement (sql/writes.ts).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { WRITES_IDX_MAP, type PendingWrite } from "@langchain/langgraph-checkpoint";
import { InvalidInputError, ThreadDeletedError } from "../errors.js";
import { LIMITS, checkKey, readConfig } from "../validate.js";
import type { SaverContext } from "./context.js";
import { boundBytes, checkSize, checkStatementSize, named, pack, storeContext } from "./encode.js";
import { MAX_STATEMENT_BYTES } from "./options.js";
import type { ElementRow } from "./elements.js";
import { putWritesBatchValues, putWritesValues } from "./sql/writes.js";
import { encodeStored } from "./stored.js";
import type { WriteRows } from "./threads.js";
import type { RefusalReason } from "./sql/gate.js";

/** A `putWrites` call's arguments. */
export interface WritesCall {
  config: RunnableConfig;
  writes: PendingWrite[];
  taskId: string;
  taskPath: string;
}

/**
 * Check and serialize a putWrites call into its rows; undefined when there is
 * nothing to write. A special channel written twice keeps its last write.
 */
export async function encodeWrites(ctx: SaverContext, call: WritesCall): Promise<WriteRows | undefined> {
  const { config, writes, taskId, taskPath } = call;
  const { threadId, checkpointNs, checkpointId } = readConfig(config, "putWrites");
  if (checkpointId === undefined) {
    throw new InvalidInputError("putWrites config.configurable.checkpoint_id", "is missing; writes belong to a checkpoint");
  }
  checkKey("putWrites taskId", taskId, LIMITS.task_id);
  checkKey("putWrites taskPath", taskPath, LIMITS.task_path, { allowEmpty: true });
  if (!Array.isArray(writes)) throw new InvalidInputError("putWrites writes", "expected an array of [channel, value] pairs");
  if (writes.length === 0) return undefined;
  const n = writes.length;
  let idx = new Array<number>(n);
  let channels = new Array<string>(n);
  let types = new Array<string>(n);
  let payloads = new Array<Uint8Array>(n);
  // Ordinary writes by content (stored.ts): a message a task writes is the element row its list will
  // name. Every element row is sent (the checkpoint they belong to may not be stored yet).
  const sending = new Set<string>();
  const elements: ElementRow[] = [];
  const hashes: [string, string[]][] = [];
  await Promise.all(
    writes.map(async (write, i) => {
      if (!Array.isArray(write) || write.length !== 2) throw new InvalidInputError(`putWrites writes[${i}]`, "expected a [channel, value] pair");
      const channel = checkKey(`putWrites writes[${i}][0] (channel)`, write[0], LIMITS.channel);
      idx[i] = WRITES_IDX_MAP[channel] ?? i;
      channels[i] = channel;
      const field = `putWrites writes[${i}] (channel ${JSON.stringify(channel)})`;
      const row = { table: "checkpoint_writes", threadId: threadId!, checkpointNs: checkpointNs ?? "", checkpointId, taskId, idx: idx[i]! } as const;
      try {
        // Special writes (an interrupt, an error, a resume...) stay whole: they are replaced, and read on their own.
        const store = idx[i]! >= 0 ? await storeContext(ctx, write[1]) : { serde: ctx.serde, codec: undefined };
        const stored = await encodeStored(store, write[1], row, undefined, sending);
        checkSize(ctx, field, stored.size);
        types[i] = stored.type;
        payloads[i] = stored.bytes ?? new Uint8Array();
        elements.push(...stored.rows);
        if (stored.hashes.length > 0) hashes.push([channel, stored.hashes]);
      } catch (err) {
        throw named(err, field);
      }
    }),
  );
  elements.sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  // A special channel written twice in one call (__resume__ by a node that
  // interrupts several times): the last one wins, as in MemorySaver and the
  // official saver. One INSERT ... ON CONFLICT cannot touch a row twice.
  let special = 0;
  for (const k of idx) if (k < 0) special++;
  if (special > 1 && new Set(idx.filter((k) => k < 0)).size < special) {
    const keep = idx.map((k, i) => k >= 0 || idx.lastIndexOf(k) === i);
    const pick = <T>(a: T[]) => a.filter((_, i) => keep[i]);
    [idx, channels, types, payloads] = [pick(idx), pick(channels), pick(types), pick(payloads)];
  }
  const keys = [[threadId!, checkpointNs ?? "", checkpointId, taskId, taskPath], channels, types, elements.map((e) => e.hash), elements.map((e) => e.type)];
  const bytes = boundBytes([payloads, elements.map((e) => e.bytes)], keys);
  if (bytes > MAX_STATEMENT_BYTES) {
    checkStatementSize("putWrites writes", [
      ...channels.map((channel, i) => ({ name: `writes[${i}] (channel ${JSON.stringify(channel)})`, bytes: payloads[i]!.byteLength })),
      { name: "the element rows the writes name", bytes: elements.reduce((t, e) => t + e.bytes.byteLength, 0) },
      { name: "ids and channel names", bytes: boundBytes([], keys) },
    ]);
  }
  return { threadId: threadId!, checkpointNs: checkpointNs ?? "", checkpointId, taskId, taskPath, idx, channels, types, payloads, elements, hashes, bytes };
}

/** The rows of several putWrites calls, one entry per row: their keys, channels and types. */
export function rowKeys(calls: WriteRows[]) {
  const perRow = (f: (c: WriteRows) => string) => calls.flatMap((c) => c.idx.map(() => f(c)));
  return {
    checkpointIds: perRow((c) => c.checkpointId),
    taskIds: perRow((c) => c.taskId),
    taskPaths: perRow((c) => c.taskPath),
    idx: calls.flatMap((c) => c.idx),
    channels: calls.flatMap((c) => c.channels),
    types: calls.flatMap((c) => c.types),
  };
}

/** One statement for the rows of one putWrites call, or of several of one lineage (coalesced). */
export async function sendWrites(ctx: SaverContext, calls: WriteRows[]): Promise<void> {
  const first = calls[0]!;
  // The element rows of all calls, each once, in key order (the write values first in the packed bytes).
  const elements = calls.length === 1 ? first.elements : uniqueElements(calls);
  const rows = calls.flatMap((c) => c.payloads);
  const packed = pack([...rows, ...elements.map((e) => e.bytes)]);
  const elementParams = {
    elementHashes: elements.map((e) => e.hash),
    elementTypes: elements.map((e) => e.type),
    elementOffsets: packed.offsets.slice(rows.length),
    elementLengths: packed.lengths.slice(rows.length),
  };
  if (calls.length === 1) {
    const values = putWritesValues({
      threadId: first.threadId,
      checkpointNs: first.checkpointNs,
      checkpointId: first.checkpointId,
      taskId: first.taskId,
      taskPath: first.taskPath,
      idx: first.idx,
      channels: first.channels,
      types: first.types,
      offsets: packed.offsets.slice(0, rows.length),
      lengths: packed.lengths.slice(0, rows.length),
      bytes: packed.bytes,
      ...elementParams,
    });
    refused((await ctx.query<GateRow>("putWrites", values, "putWrites")).rows[0], first);
    return;
  }
  const values = putWritesBatchValues({
    threadId: first.threadId,
    checkpointNs: first.checkpointNs,
    ...rowKeys(calls),
    offsets: packed.offsets.slice(0, rows.length),
    lengths: packed.lengths.slice(0, rows.length),
    bytes: packed.bytes,
    ...elementParams,
  });
  refused((await ctx.query<GateRow>("putWritesBatch", values, "putWrites")).rows[0], first);
}

/** The element rows of several calls, each hash once (one statement may change a row once), in key order. */
function uniqueElements(calls: WriteRows[]): ElementRow[] {
  const byHash = new Map<string, ElementRow>();
  for (const c of calls) for (const e of c.elements) if (!byHash.has(e.hash)) byHash.set(e.hash, e);
  return [...byHash.values()].sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
}

/** What the putWrites statements return: the gate's answer (tombstones.ts). */
interface GateRow {
  refused: RefusalReason | null;
}

/** Throws when the thread's tombstone refused the writes (nothing was written; the saver reports it). */
function refused(row: GateRow | undefined, call: WriteRows): void {
  if (!row?.refused) return;
  throw new ThreadDeletedError({ threadId: call.threadId, checkpointNs: call.checkpointNs, checkpointId: call.checkpointId, operation: "putWrites", reason: row.refused });
}
