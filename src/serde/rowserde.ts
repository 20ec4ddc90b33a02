/**
 * Serializers that may bind a value to the row that stores it.
 *
 * LangGraph's `SerializerProtocol` sees values only (`dumpsTyped(value)`,
 * `loadsTyped(type, bytes)`). A serializer that also has the two methods of
 * {@link RowBoundSerializer} is handed the identity of the row each value is
 * stored in or read from, and can make the value unusable anywhere else: the
 * saver (and `show`, `exportThread`, `reencrypt`) detect the methods and use
 * them. {@link EncryptedSerializer} does, authenticating the row's identity.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";

/**
 * Where a serialized value is stored: its table and its key. A checkpoint
 * row holds one value, the map of channel values without a version.
 *
 * @example
 * ```ts
 * const row: ValueRow = { table: "checkpoint_writes", threadId: "t", checkpointNs: "", checkpointId: id, taskId, idx: 0 };
 * ```
 */
export type ValueRow =
  | { table: "checkpoint_blobs"; threadId: string; checkpointNs: string; channel: string; version: string }
  | { table: "checkpoint_writes"; threadId: string; checkpointNs: string; checkpointId: string; taskId: string; idx: number }
  | { table: "checkpoints"; threadId: string; checkpointNs: string; checkpointId: string };

/**
 * A serializer that is told which row each value belongs to.
 *
 * @example
 * ```ts
 * const [type, bytes] = await serde.dumpsTypedForRow(value, { table: "checkpoint_blobs", threadId: "t", checkpointNs: "", channel: "messages", version: "1" });
 * const same = await serde.loadsTypedForRow(type, bytes, { table: "checkpoint_blobs", threadId: "t", checkpointNs: "", channel: "messages", version: "1" });
 * ```
 */
export interface RowBoundSerializer extends SerializerProtocol {
  dumpsTypedForRow(data: unknown, row: ValueRow): Promise<[string, Uint8Array]>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  loadsTypedForRow(type: string, data: Uint8Array | string, row: ValueRow): Promise<any>;
}

/** Whether `serde` binds values to their rows (has both methods of {@link RowBoundSerializer}). */
export function isRowBound(serde: SerializerProtocol): serde is RowBoundSerializer {
  const s = serde as Partial<RowBoundSerializer>;
  return typeof s.dumpsTypedForRow === "function" && typeof s.loadsTypedForRow === "function";
}

/** `dumpsTyped`, with the row when the serializer takes one. */
export function dumpsForRow(serde: SerializerProtocol, data: unknown, row: ValueRow): Promise<[string, Uint8Array]> {
  return isRowBound(serde) ? serde.dumpsTypedForRow(data, row) : serde.dumpsTyped(data);
}

/** `loadsTyped`, with the row when the serializer takes one. */
export function loadsForRow(serde: SerializerProtocol, type: string, data: Uint8Array | string, row: ValueRow): Promise<unknown> {
  return isRowBound(serde) ? serde.loadsTypedForRow(type, data, row) : serde.loadsTyped(type, data);
}

/** The row's identity as bytes, for authenticated data: fixed fields per table, NUL-separated (keys never hold NUL). */
export function rowIdentity(row: ValueRow): string {
  switch (row.table) {
    case "checkpoint_blobs":
      return [row.table, row.threadId, row.checkpointNs, row.channel, row.version].join("\u0000");
    case "checkpoint_writes":
      return [row.table, row.threadId, row.checkpointNs, row.checkpointId, row.taskId, String(row.idx)].join("\u0000");
    case "checkpoints":
      return [row.table, row.threadId, row.checkpointNs, row.checkpointId].join("\u0000");
  }
}
