/**
 * Serialization: the default msgpack serializer (serde.ts, its format and
 * the `MsgpackSerializer` class; the extension codec in engine.ts, the
 * extension types' bytes in ext.ts, the LangChain allowlist in langchain.ts,
 * the hooks into @msgpack/msgpack in hooks.ts, strict mode's exact-class check
 * in strict.ts, the JSON form written for values msgpack cannot hold in
 * jsonform.ts, and the path named when a value cannot be written in paths.ts),
 * LangGraph's JSON format (jsonplus.ts) and Python's msgpack (pyserde.ts)
 * read for compatibility, encryption at rest (encryption.ts) with each value
 * bound to its row (rowserde.ts), and metadata as JSONB plus an exact copy
 * (metadata.ts). This file is what the package exports from the folder.
 */
export { MsgpackSerializer } from "./serde.js";
export { EncryptedSerializer, ENCRYPTED_TYPE_PREFIX, type EncryptedSerializerOptions, type EncryptionKey } from "./encryption.js";
export type { ValueRow, RowBoundSerializer, SealingSerializer } from "./rowserde.js";
