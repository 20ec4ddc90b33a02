/**
 * The write path, up to the statement: `put` and `putWrites` validate their
 * input and serialize every value (before any connection is taken), into the
 * named parameters of sql/put.ts `put` and sql/writes.ts `putWrites`; `sendWrites` sends
 * one putWrites call's rows, or several coalesced ones, as one statement.
 * What a put's statement says about its lineage is lineage.ts.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { TASKS, WRITES_IDX_MAP, type ChannelVersions, type Checkpoint, type CheckpointMetadata, type PendingWrite } from "@langchain/langgraph-checkpoint";
import { InvalidInputError, ThreadDeletedError } from "../errors.js";
import { encodeMetadata } from "../serde/metadata.js";
import { dumpsForRow } from "../serde/rowserde.js";
import { isSyntheticVersion } from "./upcast.js";
import { LIMITS, checkKey, readConfig } from "../validate.js";
import type { WriteRows } from "./threads.js";
import type { SaverContext } from "./context.js";
import { MAX_STATEMENT_BYTES, boundBytes, checkSize, checkStatementSize, encodeUnversioned, named, pack } from "./encode.js";
import { ELEMENTS_CHANNEL, isElementList, lineageKey, type ElementRow } from "./elements.js";
import { encodeStored, type StoreContext } from "./stored.js";
import { ALLOW_FORK_KEY } from "./options.js";
import { putWithWritesValues, putWritesBatchValues, putWritesValues, type PutParams } from "./params.js";
import type { RefusalReason } from "./tombstones.js";

/** A `put` call's arguments. */
export interface PutCall {
  config: RunnableConfig;
  checkpoint: Checkpoint;
  metadata: CheckpointMetadata;
  newVersions: ChannelVersions;
}

/** A put ready for its statement. */
export interface EncodedPut {
  params: PutParams;
  /** The checkpoint's channel versions (a put whose parent is not stored checks the values they name). */
  channelVersions: ChannelVersions | undefined;
  /** `configurable.allow_fork` was set (a fork in linear mode is deliberate). */
  allowFork: boolean;
  /** The element hashes each list channel written refers to, and the channels written whole (elements.ts). */
  elements: { lists: Map<string, string[]>; whole: string[] } | undefined;
  /** Some elements were left out as the parent's (a put whose parent turns out not to be stored must send them). */
  reliesOnParent: boolean;
  /** An upper bound of what its statement sends (see `boundBytes`): writes it carries must fit beside it. */
  bytes: number;
}

/**
 * Check and serialize a put: blobs for the channels in `newVersions` (and
 * for channels an upcast gave a version with no blob yet), the checkpoint
 * without its values, the metadata, the values of channels without a version.
 */
export async function encodePut(ctx: SaverContext, call: PutCall, sendAll = false): Promise<EncodedPut> {
  const { config, checkpoint, metadata, newVersions } = call;
  const { threadId, checkpointNs, checkpointId: parentId } = readConfig(config, "put");
  const ns = checkpointNs ?? "";
  if (checkpoint === null || typeof checkpoint !== "object") throw new InvalidInputError("put checkpoint", "expected a checkpoint object");
  const id = checkKey("put checkpoint.id", checkpoint.id, LIMITS.checkpoint_id);
  const values = (checkpoint.channel_values ?? {}) as Record<string, unknown>;
  for (const channel of Object.keys(checkpoint.channel_versions ?? {})) {
    if (channel === ELEMENTS_CHANNEL) throw new InvalidInputError("put checkpoint.channel_versions", `${JSON.stringify(ELEMENTS_CHANNEL)} is reserved for the saver's element rows`);
  }
  const channels: string[] = [];
  const versions: string[] = [];
  const types: string[] = [];
  const payloads: (Uint8Array | null)[] = [];
  // Values stored by content (stored.ts): element rows the parent refers to are not sent again.
  const memory = ctx.elements;
  const known = sendAll ? undefined : memory?.known(lineageKey(threadId!, ns), parentId ?? null);
  const sending = new Set<string>();
  const elementRows: ElementRow[] = [];
  const namedHashes = new Map<string, string[]>();
  const wholeChannels: string[] = [];
  await Promise.all(
    Object.entries(newVersions ?? {}).map(async ([channel, version]) => {
      checkKey("put newVersions key (channel)", channel, LIMITS.channel);
      if (channel === ELEMENTS_CHANNEL) throw new InvalidInputError("put newVersions", `${JSON.stringify(ELEMENTS_CHANNEL)} is reserved for the saver's element rows`);
      const v = checkKey("put newVersions value (version)", String(version), LIMITS.version);
      let type = "empty";
      let bytes: Uint8Array | null = null;
      if (Object.prototype.hasOwnProperty.call(values, channel)) {
        const field = `put checkpoint.channel_values[${JSON.stringify(channel)}]`;
        try {
          const stored = await encodeStored(await storeContext(ctx, values[channel]), values[channel], { table: "checkpoint_blobs", threadId: threadId!, checkpointNs: ns, channel, version: v }, known, sending);
          // The same limit as for the whole value: a list's elements together, sent or not.
          checkSize(ctx, field, stored.size);
          ({ type, bytes } = stored);
          elementRows.push(...stored.rows);
          if (stored.hashes.length > 0) namedHashes.set(channel, stored.hashes);
          else wholeChannels.push(channel);
        } catch (err) {
          throw named(err, field);
        }
      } else {
        wholeChannels.push(channel);
      }
      channels.push(channel);
      versions.push(v);
      types.push(type);
      payloads.push(bytes);
    }),
  );
  // Element rows in key order, as every statement that inserts them does: two never wait for each other in a cycle.
  elementRows.sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  for (const row of elementRows) {
    channels.push(ELEMENTS_CHANNEL);
    versions.push(row.hash);
    types.push(row.type);
    payloads.push(row.bytes);
  }
  // Channels an upcast created or changed carry a version with no blob yet: store it now.
  await Promise.all(
    Object.entries(checkpoint.channel_versions ?? {}).map(async ([channel, version]) => {
      if (!isSyntheticVersion(version) || Object.prototype.hasOwnProperty.call(newVersions ?? {}, channel)) return;
      if (!Object.prototype.hasOwnProperty.call(values, channel)) return;
      const v = String(version);
      const field = `put checkpoint.channel_values[${JSON.stringify(channel)}]`;
      let typed: [string, Uint8Array];
      try {
        typed = await dumpsForRow(ctx.serde, values[channel], { table: "checkpoint_blobs", threadId: threadId!, checkpointNs: ns, channel, version: v });
      } catch (err) {
        throw named(err, field);
      }
      const [type, bytes] = typed;
      checkSize(ctx, field, bytes);
      channels.push(channel);
      versions.push(v);
      types.push(type);
      payloads.push(bytes);
    }),
  );
  // Neither the values (blobs) nor the id (its own column) are stored twice (issue 27: leaner rows).
  const { channel_values: _omit, id: _id, ...stored } = checkpoint;
  // MemorySaver's defaults for fields an older writer may leave out (its copyCheckpoint).
  stored.channel_versions ??= {};
  stored.versions_seen ??= {};
  const unversioned = await encodeUnversioned(ctx, {
    values,
    versions: checkpoint.channel_versions,
    field: "put checkpoint.channel_values (channels without a version)",
    row: { table: "checkpoints", threadId: threadId!, checkpointNs: ns, checkpointId: id },
  });
  const meta = await encodeMetadata(metadata);
  const allowFork = config.configurable?.[ALLOW_FORK_KEY] === true;
  const linear = ctx.lineage === "linear" && !allowFork;
  // New input or a state update starts a run; loop steps continue one.
  const source = (metadata as { source?: unknown } | undefined)?.source;
  const startsRun = source === "input" || source === "update";
  // Tasks left to run: a trigger LangGraph has not consumed (it drops consumed,
  // empty channels from the values), or pending sends.
  const tasks = values[TASKS];
  const hasPendingTasks =
    Object.keys(values).some((ch) => ch === "__start__" || ch.startsWith("branch:to:")) || (Array.isArray(tasks) && tasks.length > 0);
  // Serialized here (pg would do the same), so the size check counts exactly what is sent.
  const storedJson = JSON.stringify(stored);
  const metaJson = JSON.stringify(meta.json);
  const bound = boundBytes([payloads, [unversioned.bytes, meta.raw]], [[storedJson, metaJson, threadId!, ns, id, parentId ?? ""], channels, versions, types]);
  if (bound > MAX_STATEMENT_BYTES) {
    checkStatementSize("put checkpoint", [
      ...channels.map((channel, i) => ({ name: `channel ${JSON.stringify(channel)}`, bytes: payloads[i]?.byteLength ?? 0 })),
      { name: "channels without a version", bytes: unversioned.bytes?.byteLength ?? 0 },
      { name: "metadata", bytes: Buffer.byteLength(metaJson) + (meta.raw?.byteLength ?? 0) },
      { name: "the checkpoint without its values", bytes: Buffer.byteLength(storedJson) },
      { name: "ids, channel names and versions", bytes: boundBytes([], [[threadId!, ns, id, parentId ?? ""], channels, versions, types]) },
    ]);
  }
  const packed = pack(payloads);
  const params: PutParams = {
    threadId: threadId!,
    checkpointNs: ns,
    checkpointId: id,
    parentId: parentId ?? null,
    checkpoint: storedJson,
    metadata: metaJson,
    metadataRaw: meta.raw,
    linear,
    channels,
    versions,
    types,
    offsets: packed.offsets,
    lengths: packed.lengths,
    bytes: packed.bytes,
    startsRun,
    leaseSeconds: ctx.leaseSeconds,
    ttlSeconds: ctx.ttlSeconds,
    stateVersion: ctx.versioning?.stateVersion ?? null,
    hasPendingTasks,
    unversionedType: unversioned.type,
    unversionedValues: unversioned.bytes,
  };
  return {
    params,
    channelVersions: checkpoint.channel_versions,
    allowFork,
    elements: memory ? { lists: namedHashes, whole: wholeChannels } : undefined,
    reliesOnParent: known !== undefined && namedHashes.size > 0,
    bytes: bound,
  };
}

/**
 * How values are stored with this saver: by content (stored.ts) when element storage is on and the
 * serializer allows it (found out once, with the first value), else whole.
 */
async function storeContext(ctx: SaverContext, sample: unknown): Promise<StoreContext> {
  const codec = ctx.elements ? await ctx.elements.codec(ctx.serde, isElementList(sample) ? sample[0] : sample) : undefined;
  return { serde: ctx.serde, codec };
}

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
  const hashes: string[] = [];
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
        hashes.push(...stored.hashes);
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
function rowKeys(calls: WriteRows[]) {
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

/**
 * `putWithWrites`'s values: the put's, its blob rows joined by the element rows the carried writes
 * name (each hash once, all element rows in key order, as every statement that inserts them has
 * them), everything packed into one bytes parameter.
 */
export function carriedValues(params: PutParams, calls: WriteRows[]): unknown[] {
  interface Blob {
    channel: string;
    version: string;
    type: string;
    bytes: Uint8Array | null;
    owner: number;
  }
  const own: Blob[] = [];
  const elements = new Map<string, Blob>();
  params.channels.forEach((channel, i) => {
    const at = params.offsets[i]!;
    const length = params.lengths[i]!;
    const blob = { channel, version: params.versions[i]!, type: params.types[i]!, bytes: length < 0 ? null : params.bytes.subarray(at, at + length), owner: 1 };
    if (channel === ELEMENTS_CHANNEL) elements.set(blob.version, blob);
    else own.push(blob);
  });
  for (const c of calls) {
    for (const e of c.elements) {
      const blob = elements.get(e.hash);
      if (blob === undefined) elements.set(e.hash, { channel: ELEMENTS_CHANNEL, version: e.hash, type: e.type, bytes: e.bytes, owner: 2 });
      else if (blob.owner === 1) blob.owner = 3;
    }
  }
  const blobs = [...own, ...[...elements.values()].sort((a, b) => (a.version < b.version ? -1 : a.version > b.version ? 1 : 0))];
  const rows = calls.flatMap((c) => c.payloads);
  const packed = pack([...blobs.map((b) => b.bytes), ...rows]);
  const n = blobs.length;
  return putWithWritesValues(
    {
      ...params,
      channels: blobs.map((b) => b.channel),
      versions: blobs.map((b) => b.version),
      types: blobs.map((b) => b.type),
      offsets: packed.offsets.slice(0, n),
      lengths: packed.lengths.slice(0, n),
      bytes: packed.bytes,
    },
    {
      ...rowKeys(calls),
      offsets: packed.offsets.slice(n),
      lengths: packed.lengths.slice(n),
      owners: blobs.map((b) => b.owner),
    },
  );
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
