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

/**
 * A row-bound serializer whose stored values are another serializer's bytes
 * sealed (encrypted and authenticated) for their row, and which keys digests
 * with its keys: what storing lists by their elements needs of an encrypting
 * serializer (saver/element-codec.ts). An element is hashed over its inner
 * bytes under a key no reader of the tables has, sealed for its element row,
 * and the list naming it carries a tag bound to the list's row.
 * `EncryptedSerializer` is one.
 *
 * @example
 * ```ts
 * const [innerType, bytes] = await serde.inner.dumpsTyped(value);
 * const stored = serde.sealForRow(innerType, bytes, row); // what the row holds
 * const [sameType, same] = serde.openForRow(stored[0], stored[1], row);
 * const hash = serde.digest(serde.digestKeyIds[0]!, "hash", [innerType, "\u0000", bytes]);
 * ```
 */
export interface SealingSerializer extends RowBoundSerializer {
  /** The serializer whose bytes are sealed. */
  readonly inner: SerializerProtocol;
  /** Bytes sealing adds to a value (what a sealed value costs beyond its inner bytes). */
  readonly sealOverhead: number;
  /** True when values that are not sealed are read as they are (a migration setting). */
  readonly allowsPlaintext: boolean;
  /** Seal `bytes`, which `inner` made (type `innerType`), for `row`. */
  sealForRow(innerType: string, bytes: Uint8Array, row: ValueRow): [string, Uint8Array];
  /** Open a value stored in `row`: its inner type and bytes; a `DeserializationError` if it was not sealed for that row. */
  openForRow(type: string, data: Uint8Array, row: ValueRow): [string, Uint8Array];
  /** The ids of the keys {@link digest} can use, the current key first. */
  readonly digestKeyIds: readonly string[];
  /** HMAC-SHA-256 of the parts under a key derived from key `keyId`, one per use: element hashes, or tags of lists. */
  digest(keyId: string, use: "hash" | "tag", parts: readonly (string | Uint8Array)[]): Buffer;
}

/** Whether `serde` seals inner bytes and keys digests ({@link SealingSerializer}). */
export function isSealing(serde: SerializerProtocol): serde is SealingSerializer {
  const s = serde as Partial<SealingSerializer>;
  return (
    isRowBound(serde) &&
    typeof s.sealForRow === "function" &&
    typeof s.openForRow === "function" &&
    typeof s.digest === "function" &&
    Array.isArray(s.digestKeyIds) &&
    typeof s.inner === "object" &&
    s.inner !== null
  );
}
