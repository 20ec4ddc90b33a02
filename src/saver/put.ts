/**
 * A put, from its call to its outcome. `encodePut` checks the call and
 * serializes every value before any connection is taken (the statement's
 * named parameters, sql/put.ts); `runPut` sends it (`put`, or `putWithWrites`
 * carrying the lineage's writes that waited for it, then `putChecked` for what
 * those leave) and turns the answer into the outcome: stored (perhaps as a
 * fork, reported by a `fork` event), a conflict, a parent that is not stored,
 * or a deleted thread.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { TASKS, type ChannelVersions, type Checkpoint, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import { CheckpointConflictError, CheckpointParentMissingError, DatabaseOperationError, InvalidInputError, ThreadDeletedError } from "../errors.js";
import { emit } from "../events.js";
import { encodeMetadata } from "../serde/metadata.js";
import { dumpsForRow } from "../serde/rowserde.js";
import { LIMITS, checkKey, readConfig } from "../validate.js";
import type { SaverContext } from "./context.js";
import { boundBytes, checkSize, checkStatementSize, encodeUnversioned, named, pack, storeContext } from "./encode.js";
import { ELEMENTS_CHANNEL, deltaChannels, lineageKey, type CheckpointValues, type ElementRow } from "./elements.js";
import { ALLOW_FORK_KEY, MAX_STATEMENT_BYTES } from "./options.js";
import { putValues, putWithWritesValues, type PutParams } from "./sql/put.js";
import { encodeStored } from "./stored.js";
import { sharedFailure, type Take, type WriteRows } from "./threads.js";
import type { RefusalReason } from "./sql/gate.js";
import { isSyntheticVersion } from "./upcast.js";
import { rowKeys } from "./writes.js";

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
  /** The values the checkpoint names without writing them: a put whose parent is not stored checks them (`putChecked`'s $22, $23); worked out only then. */
  referenced: () => { channels: string[]; versions: string[] };
  /** `configurable.allow_fork` was set (a fork in linear mode is deliberate). */
  allowFork: boolean;
  /** What the checkpoint stores, for the next put on it (elements.ts `ElementMemory`). */
  elements: CheckpointValues | undefined;
  /** Some elements were left out as the parent's (a put whose parent turns out not to be stored must send them). */
  reliesOnParent: boolean;
  /** An upper bound of what its statement sends (see `boundBytes`): writes it carries must fit beside it. */
  bytes: number;
}

/** The blob rows of a put: one per channel written (then its element rows, in key order), values unpacked. */
interface Blobs {
  channels: string[];
  versions: string[];
  types: string[];
  payloads: (Uint8Array | null)[];
  /** The channels written by content, with the hashes each names. */
  lists: Map<string, string[]>;
  /** The channels written: whether each holds a value (not `empty`). */
  stores: Map<string, boolean>;
  reliesOnParent: boolean;
}

/**
 * Check and serialize a put: blobs for the channels in `newVersions` (and for channels an upcast
 * gave a version with no blob yet), the checkpoint without its values, the metadata, the values of
 * channels without a version. `sendAll`: send every element row, none left out as the parent's.
 */
export async function encodePut(ctx: SaverContext, call: PutCall, sendAll = false): Promise<EncodedPut> {
  const { config, checkpoint, metadata } = call;
  const { threadId, checkpointNs, checkpointId: parentId } = readConfig(config, "put");
  const ns = checkpointNs ?? "";
  if (checkpoint === null || typeof checkpoint !== "object") throw new InvalidInputError("put checkpoint", "expected a checkpoint object");
  const id = checkKey("put checkpoint.id", checkpoint.id, LIMITS.checkpoint_id);
  for (const channel of Object.keys(checkpoint.channel_versions ?? {})) {
    if (channel === ELEMENTS_CHANNEL) throw new InvalidInputError("put checkpoint.channel_versions", `${JSON.stringify(ELEMENTS_CHANNEL)} is reserved for the saver's element rows`);
  }
  const values = (checkpoint.channel_values ?? {}) as Record<string, unknown>;
  const blobs = await encodeBlobs(ctx, call, { threadId: threadId!, ns, parentId: parentId ?? null, values }, sendAll);

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
  // New input or a state update starts a run; loop steps continue one.
  const source = (metadata as { source?: unknown } | undefined)?.source;
  // Tasks left to run: a trigger LangGraph has not consumed (it drops consumed, empty channels from
  // the values), or pending sends.
  const tasks = values[TASKS];
  const hasPendingTasks = Object.keys(values).some((ch) => ch === "__start__" || ch.startsWith("branch:to:")) || (Array.isArray(tasks) && tasks.length > 0);
  // Serialized here (pg would do the same), so the size check counts exactly what is sent.
  const storedJson = JSON.stringify(stored);
  const metaJson = JSON.stringify(meta.json);
  const { channels, versions, types, payloads } = blobs;
  const ids = [threadId!, ns, id, parentId ?? ""];
  const bound = boundBytes([payloads, [unversioned.bytes, meta.raw]], [[storedJson, metaJson, ...ids], channels, versions, types]);
  if (bound > MAX_STATEMENT_BYTES) {
    checkStatementSize("put checkpoint", [
      ...channels.map((channel, i) => ({ name: `channel ${JSON.stringify(channel)}`, bytes: payloads[i]?.byteLength ?? 0 })),
      { name: "channels without a version", bytes: unversioned.bytes?.byteLength ?? 0 },
      { name: "metadata", bytes: Buffer.byteLength(metaJson) + (meta.raw?.byteLength ?? 0) },
      { name: "the checkpoint without its values", bytes: Buffer.byteLength(storedJson) },
      { name: "ids, channel names and versions", bytes: boundBytes([], [ids, channels, versions, types]) },
    ]);
  }
  const packed = pack(payloads);
  return {
    params: {
      threadId: threadId!,
      checkpointNs: ns,
      checkpointId: id,
      parentId: parentId ?? null,
      checkpoint: storedJson,
      metadata: metaJson,
      metadataRaw: meta.raw,
      linear: ctx.lineage === "linear" && !allowFork,
      channels,
      versions,
      types,
      offsets: packed.offsets,
      lengths: packed.lengths,
      bytes: packed.bytes,
      startsRun: source === "input" || source === "update",
      leaseSeconds: ctx.leaseSeconds,
      ttlSeconds: ctx.ttlSeconds,
      stateVersion: ctx.versioning?.stateVersion ?? null,
      hasPendingTasks,
      unversionedType: unversioned.type,
      unversionedValues: unversioned.bytes,
    },
    referenced: () => referencedValues(checkpoint.channel_versions, values, channels, versions),
    allowFork,
    elements: ctx.elements ? { lists: blobs.lists, stores: blobs.stores, delta: deltaChannels(checkpoint.channel_versions, metadata) } : undefined,
    reliesOnParent: blobs.reliesOnParent,
    bytes: bound,
  };
}

/**
 * The blob rows of a put: each channel in `newVersions` (stored by content where it qualifies,
 * stored.ts: element rows the parent refers to are not sent again unless `sendAll`), its element
 * rows in key order, then channels an upcast created or changed (a version with no blob yet).
 */
async function encodeBlobs(
  ctx: SaverContext,
  call: PutCall,
  where: { threadId: string; ns: string; parentId: string | null; values: Record<string, unknown> },
  sendAll: boolean,
): Promise<Blobs> {
  const { threadId, ns, parentId, values } = where;
  const blobs: Blobs = { channels: [], versions: [], types: [], payloads: [], lists: new Map(), stores: new Map(), reliesOnParent: false };
  const add = (channel: string, version: string, type: string, bytes: Uint8Array | null) => {
    blobs.channels.push(channel);
    blobs.versions.push(version);
    blobs.types.push(type);
    blobs.payloads.push(bytes);
  };
  const known = sendAll ? undefined : ctx.elements?.known(lineageKey(threadId, ns), parentId);
  const sending = new Set<string>();
  const elementRows: ElementRow[] = [];
  await Promise.all(
    Object.entries(call.newVersions ?? {}).map(async ([channel, version]) => {
      checkKey("put newVersions key (channel)", channel, LIMITS.channel);
      if (channel === ELEMENTS_CHANNEL) throw new InvalidInputError("put newVersions", `${JSON.stringify(ELEMENTS_CHANNEL)} is reserved for the saver's element rows`);
      const v = checkKey("put newVersions value (version)", String(version), LIMITS.version);
      // A channel without a value (consumed, cleared) gets no row: a version no row stores reads
      // as no value, the same as MemorySaver's `empty` blob, at no cost on disk or in the put.
      if (!Object.prototype.hasOwnProperty.call(values, channel)) {
        blobs.stores.set(channel, false);
        return;
      }
      const field = `put checkpoint.channel_values[${JSON.stringify(channel)}]`;
      try {
        const row = { table: "checkpoint_blobs", threadId, checkpointNs: ns, channel, version: v } as const;
        const stored = await encodeStored(await storeContext(ctx, values[channel]), values[channel], row, known, sending);
        // The same limit as for the whole value: a list's elements together, sent or not.
        checkSize(ctx, field, stored.size);
        elementRows.push(...stored.rows);
        if (stored.hashes.length > 0) blobs.lists.set(channel, stored.hashes);
        blobs.stores.set(channel, true);
        add(channel, v, stored.type, stored.bytes);
      } catch (err) {
        throw named(err, field);
      }
    }),
  );
  blobs.reliesOnParent = known !== undefined && blobs.lists.size > 0;
  // Element rows in key order, as every statement that inserts them does: two never wait for each other in a cycle.
  elementRows.sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  for (const row of elementRows) add(ELEMENTS_CHANNEL, row.hash, row.type, row.bytes);
  // Channels an upcast created or changed carry a version with no blob yet: store it now.
  await Promise.all(
    Object.entries(call.checkpoint.channel_versions ?? {}).map(async ([channel, version]) => {
      if (!isSyntheticVersion(version) || Object.prototype.hasOwnProperty.call(call.newVersions ?? {}, channel)) return;
      if (!Object.prototype.hasOwnProperty.call(values, channel)) return;
      const v = String(version);
      const field = `put checkpoint.channel_values[${JSON.stringify(channel)}]`;
      let typed: [string, Uint8Array];
      try {
        typed = await dumpsForRow(ctx.serde, values[channel], { table: "checkpoint_blobs", threadId, checkpointNs: ns, channel, version: v });
      } catch (err) {
        throw named(err, field);
      }
      checkSize(ctx, field, typed[1]);
      blobs.stores.set(channel, true);
      add(channel, v, typed[0], typed[1]);
    }),
  );
  return blobs;
}

/**
 * Bound on re-runs of a put that lost the race to create its lineage's head
 * row (the re-run sees the winner's head; only a thread deleted and re-created
 * in between each time could need another).
 */
const MAX_PUT_ATTEMPTS = 10;

/** A row of the put statements (sql/put.ts). */
interface PutRow {
  /** Why the thread's tombstone refused the put (tombstones.ts); null: not refused. */
  refused: RefusalReason | null;
  head_id: string | null;
  ok: boolean;
  parent_known: boolean;
  late: boolean;
  moved: number;
  inserted: number;
  blobs: number;
  missing: [string, string][] | null;
}

/** `put`'s and `putWithWrites`'s row: `fast` false leaves the put to `putChecked`. */
type FastRow = Omit<PutRow, "parent_known" | "late" | "missing"> & { fast: boolean; writes_refused?: RefusalReason | null };

/**
 * Store an encoded put and report what it did to its lineage; `started` is when the put was called
 * (`performance.now()`), for the events' durations. `take` hands it the lineage's writes waiting to
 * go out (threads.ts): its first statement carries them (`putWithWrites`). `sendAll` encodes it
 * again with every element row, for a parent that turns out not to be stored.
 */
export async function runPut(ctx: SaverContext, put: EncodedPut, started: number, sendAll?: () => Promise<EncodedPut>, take?: Take): Promise<RunnableConfig> {
  let { params } = put;
  const { threadId, checkpointNs: ns, checkpointId: id } = params;
  // The head row is locked FOR UPDATE; a concurrent put that moved it while we waited is seen (the
  // locked row is re-read). The one case the move fails is two first puts of a lineage racing to
  // create its head row: the loser wrote nothing and runs again, now seeing the winner's head. Puts
  // whose parent is stored take one statement; any other writes nothing there and takes a second,
  // checking statement (putChecked).
  let checked: unknown[] | undefined;
  // The putWrites calls that went out with the put (stored), for its event.
  const sent = { writes: 0 };
  for (let attempt = 1; ; attempt++) {
    let row: PutRow | undefined;
    if (checked === undefined) {
      const fast = await sendFast(ctx, put, attempt === 1 ? take : undefined, sent);
      if (fast.refused) throw new ThreadDeletedError({ threadId, checkpointNs: ns, checkpointId: id, operation: "put", reason: fast.refused });
      if (fast.fast) row = Object.assign(fast, { parent_known: true, late: false, missing: null });
      else {
        // Elements left out as the parent's must be sent now: the parent is not stored (elements.ts).
        if (put.reliesOnParent && sendAll) {
          put = await sendAll();
          params = put.params;
        }
        checked = putValues(params, put.referenced());
      }
    }
    row ??= (await ctx.query<PutRow>("putChecked", checked!, "put")).rows[0]!;
    if (row.refused) throw new ThreadDeletedError({ threadId, checkpointNs: ns, checkpointId: id, operation: "put", reason: row.refused });
    if (row.ok && row.moved === 0 && !row.late) {
      if (attempt < MAX_PUT_ATTEMPTS) continue;
      throw new DatabaseOperationError("put", new Error(`the head of lineage ${JSON.stringify(ns)} kept changing under ${MAX_PUT_ATTEMPTS} attempts`), { retryable: true });
    }
    await outcome(ctx, put, row, started, { ...sent, bytes: put.bytes, attempts: attempt + (checked === undefined ? 0 : 1) });
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } };
  }
}

/**
 * The first statement of a put: `put`, or `putWithWrites` when writes waited for it. The carried
 * writes' outcome is settled here: stored; or each sent again on its own (the gate refused them,
 * or the statement failed in a way that may be one call's own; the put is then sent again without
 * them); or, for a failure each would have met alone (the connection lost, a timeout: threads.ts
 * `sharedFailure`), each rejected with it.
 */
async function sendFast(ctx: SaverContext, put: EncodedPut, take: Take | undefined, sent: { writes: number }): Promise<FastRow> {
  // Taken now, with the statement about to leave: writes called while the put was being encoded go too.
  const carried = take?.(MAX_STATEMENT_BYTES - put.bytes);
  if (carried !== undefined) {
    let row: FastRow | undefined;
    try {
      row = (await ctx.query<FastRow>("putWithWrites", carriedValues(put.params, carried.rows), "put")).rows[0]!;
    } catch (err) {
      if (sharedFailure(err)) {
        carried.failed(err);
        throw err;
      }
      void carried.alone();
    }
    if (row !== undefined) {
      // Stored before the put's own outcome is looked at: it is the put's alone. Refused writes are
      // sent again on their own, so each call gets its own refusal (and its retry, saver.ts).
      if (row.writes_refused === null) {
        carried.stored();
        sent.writes = carried.calls;
      } else void carried.alone();
      return row;
    }
  }
  return (await ctx.query<FastRow>("put", putValues(put.params), "put")).rows[0]!;
}

/** What a stored or refused put did to its lineage: an error (a parent not stored, a conflict) or the events of a put stored. */
async function outcome(ctx: SaverContext, put: EncodedPut, row: PutRow, started: number, sent: { writes: number; bytes: number; attempts: number }): Promise<void> {
  const { threadId, checkpointNs: ns, checkpointId: id } = put.params;
  const parentId = put.params.parentId ?? undefined;
  const durationMs = () => performance.now() - started;
  if (!row.ok && !row.parent_known) {
    const missing = (row.missing ?? []).map(([channel, version]) => ({ channel, version }));
    emit(ctx.onEvent, { type: "parentMissing", threadId, checkpointNs: ns, checkpointId: id, parentCheckpointId: parentId!, missing, durationMs: durationMs() });
    throw new CheckpointParentMissingError({ threadId, checkpointNs: ns, checkpointId: id, parentCheckpointId: parentId!, missing });
  }
  let head = row.head_id ?? undefined;
  if (!row.ok) {
    head ??= (await ctx.query<{ checkpoint_id: string }>("headId", [threadId, ns], "put")).rows[0]?.checkpoint_id;
    const reason = head === parentId ? "run-in-progress" : "head-moved";
    emit(ctx.onEvent, { type: "conflict", threadId, checkpointNs: ns, checkpointId: id, expectedParent: parentId, actualHead: head, reason, durationMs: durationMs() });
    throw new CheckpointConflictError({ threadId, checkpointNs: ns, expectedParent: parentId, actualHead: head, reason });
  }
  if (head !== undefined && head !== parentId && head !== id && !row.late) {
    emit(ctx.onEvent, { type: "fork", threadId, checkpointNs: ns, checkpointId: id, parentCheckpointId: parentId, displacedHead: head, deliberate: put.allowFork });
  }
  if (put.elements) ctx.elements?.rememberCheckpoint(lineageKey(threadId, ns), id, parentId ?? null, put.elements);
  emit(ctx.onEvent, { type: "put", threadId, checkpointNs: ns, checkpointId: id, parentCheckpointId: parentId, blobs: row.blobs, ...sent, durationMs: durationMs() });
}

/**
 * The (channels, versions) a checkpoint refers to that this put does not write. A channel without
 * a value has no blob row (see encodeBlobs), so it refers to nothing.
 */
function referencedValues(
  channelVersions: ChannelVersions | undefined,
  values: Record<string, unknown>,
  channels: string[],
  versions: string[],
): { channels: string[]; versions: string[] } {
  const refChannels: string[] = [];
  const refVersions: string[] = [];
  for (const [channel, version] of Object.entries(channelVersions ?? {})) {
    if (!Object.prototype.hasOwnProperty.call(values, channel)) continue;
    const v = String(version);
    const i = channels.indexOf(channel);
    if (i < 0 || versions[i] !== v) {
      refChannels.push(channel);
      refVersions.push(v);
    }
  }
  return { channels: refChannels, versions: refVersions };
}

/**
 * `putWithWrites`'s values: the put's, its blob rows joined by the element rows the carried writes
 * name (each hash once, all element rows in key order, as every statement that inserts them has
 * them), everything packed into one bytes parameter.
 */
function carriedValues(params: PutParams, calls: WriteRows[]): unknown[] {
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
