/**
 * The parameters of the write statements (sql/put.ts `put`, `putChecked`,
 * `putWithWrites`, `putWrites`, `putWritesBatch`) by name, and the functions that put them in
 * the order of the statements' `$n`: the one place that order is written
 * down outside the statements themselves.
 */

/**
 * The parameters of `put` and `putChecked`, by name; {@link putValues} puts
 * them in the order of the statements' `$n`.
 */
export interface PutParams {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  parentId: string | null;
  /** The checkpoint without its channel values, as JSON text. */
  checkpoint: string;
  /** The metadata's JSONB projection, as JSON text. */
  metadata: string;
  /** The metadata's exact copy, when the projection is not exact. */
  metadataRaw: Uint8Array | null;
  linear: boolean;
  /** The blobs written: channel, version, type, and the values packed (see `put`). */
  channels: string[];
  versions: string[];
  types: string[];
  offsets: number[];
  lengths: number[];
  bytes: Buffer;
  startsRun: boolean;
  leaseSeconds: number;
  ttlSeconds: number | null;
  stateVersion: number | null;
  hasPendingTasks: boolean;
  unversionedType: string | null;
  unversionedValues: Uint8Array | null;
}

/**
 * `put`'s values ($1 to $21); `putChecked`'s with `referenced` ($22, $23: the
 * channels and versions the checkpoint refers to without writing them).
 */
export function putValues(p: PutParams, referenced?: { channels: string[]; versions: string[] }): unknown[] {
  const values: unknown[] = [
    p.threadId, p.checkpointNs, p.checkpointId, p.parentId, p.checkpoint, p.metadata, p.metadataRaw, p.linear,
    p.channels, p.versions, p.types, p.offsets, p.startsRun, p.leaseSeconds, p.ttlSeconds, p.stateVersion,
    p.hasPendingTasks, p.lengths, p.bytes, p.unversionedType, p.unversionedValues,
  ];
  if (referenced) values.push(referenced.channels, referenced.versions);
  return values;
}

/** The writes a put carries (see `putWithWrites`), by name: one row each, values in the put's `bytes`. */
export interface CarriedParams {
  checkpointIds: string[];
  taskIds: string[];
  taskPaths: string[];
  idx: number[];
  channels: string[];
  types: string[];
  offsets: number[];
  lengths: number[];
  /** Per blob row of the put (`PutParams.channels`...): 1 the put's, 2 the writes' element row, 3 both's. */
  owners: number[];
}

/** `putWithWrites`'s values, $1 to $30: the put's (its blob rows holding the writes' element rows too), then the writes'. */
export function putWithWritesValues(p: PutParams, w: CarriedParams): unknown[] {
  return [
    ...putValues(p),
    w.checkpointIds, w.taskIds, w.taskPaths, w.idx, w.channels, w.types, w.offsets, w.lengths, w.owners,
  ];
}

/** The values of one putWrites call's rows, by name (see `putWrites`). */
export interface WritesParams {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  taskId: string;
  taskPath: string;
  idx: number[];
  channels: string[];
  types: string[];
  offsets: number[];
  lengths: number[];
  /** The write values, then the element rows' values, packed. */
  bytes: Buffer;
  /** The element rows the writes name that go with them (stored.ts): hash, type, where in `bytes`. */
  elementHashes: string[];
  elementTypes: string[];
  elementOffsets: number[];
  elementLengths: number[];
}

/** `putWrites`'s values, $1 to $15. */
export function putWritesValues(w: WritesParams): unknown[] {
  return [
    w.threadId, w.checkpointNs, w.checkpointId, w.taskId, w.taskPath, w.idx, w.channels, w.types, w.offsets, w.lengths, w.bytes,
    w.elementHashes, w.elementTypes, w.elementOffsets, w.elementLengths,
  ];
}

/** The rows of several putWrites calls of one lineage, by name: checkpoint, task and path per row (see `putWritesBatch`). */
export interface WritesBatchParams extends Omit<WritesParams, "checkpointId" | "taskId" | "taskPath"> {
  checkpointIds: string[];
  taskIds: string[];
  taskPaths: string[];
}

/** `putWritesBatch`'s values, $1 to $15. */
export function putWritesBatchValues(w: WritesBatchParams): unknown[] {
  return [
    w.threadId, w.checkpointNs, w.checkpointIds, w.taskIds, w.taskPaths, w.idx, w.channels, w.types, w.offsets, w.lengths, w.bytes,
    w.elementHashes, w.elementTypes, w.elementOffsets, w.elementLengths,
  ];
}
