/**
 * Serialization around the msgpack serializer (src/serde.ts, which joins this
 * folder later): LangGraph's JSON format (jsonplus.ts) and Python's msgpack
 * (pyserde.ts) read for compatibility, encryption at rest (encryption.ts)
 * with each value bound to its row (rowserde.ts), metadata as JSONB plus an
 * exact copy (metadata.ts), and state-schema upcasting (upcast.ts). This file
 * is what the package exports from the folder.
 */
export { EncryptedSerializer, ENCRYPTED_TYPE_PREFIX, type EncryptedSerializerOptions, type EncryptionKey } from "./encryption.js";
export type { ValueRow, RowBoundSerializer } from "./rowserde.js";
export { StateVersionError, type Upcaster, type UpcastFunction, type UpcastContext } from "./upcast.js";
