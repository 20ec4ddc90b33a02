/**
 * Stored values made readable for the operations tools (inspect, export,
 * the CLI): decoded with the serializer when possible, a clear marker when
 * not, and made JSON-safe with what JSON cannot say kept in tagged objects.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { Row } from "../db/db.js";
import { COL } from "../db/names.js";
import { elementCodec } from "../saver/element-codec.js";
import { ELEMENTS_CHANNEL, HASH_BYTES, REFS_TYPE, elementKey, refsOf, type StoredElement } from "../saver/elements.js";
import { decodeStoredValue, namesElements, outlineStoredValue, refsAreaOf, VALUE_TYPE } from "../saver/stored.js";
import { decodeMetadata } from "../serde/metadata.js";
import type { ValueRow } from "../serde/rowserde.js";
import { toJsonSafe } from "./json-safe.js";

// A decoded value as JSON (json-safe.ts); imported from here too.
export { toJsonSafe } from "./json-safe.js";

// ---------------------------------------------------------------------------
// Values stored by content (saver/stored.ts)
// ---------------------------------------------------------------------------

/** Element rows of values stored by content, by {@link elementKey}: what such a value is put back together from. */
export type Elements = Map<string, StoredElement>;

/** Whether a blob row is a chunk: an element row holding element hashes, not a value. */
export const isChunk = (type: string, row: ValueRow): boolean => type === REFS_TYPE && row.table === "checkpoint_blobs" && row.channel === ELEMENTS_CHANNEL;

/**
 * The element rows that the values among `stored` name (rows of either
 * table, in any form of stored.ts), chunks and their elements (two
 * statements at most: chunks hold element hashes only). `blobs` is the
 * qualified `checkpoint_blobs` table; `query` runs a statement (the caller's
 * connection and error handling). A refs area that is not a list of hashes
 * is skipped here; decoding it says why.
 */
export async function loadElements(
  query: (text: string, values: unknown[]) => Promise<Row[]>,
  blobs: string,
  stored: readonly { threadId: string; checkpointNs: string; type: string; value: Uint8Array | null }[],
): Promise<Elements> {
  const found: Elements = new Map();
  const areaOf = (l: { type: string; value: Uint8Array | null }) => refsAreaOf(l.type, l.value);
  let pending = stored.filter((l) => {
    const area = areaOf(l);
    return area !== undefined && area.byteLength % HASH_BYTES === 0;
  });
  while (pending.length > 0) {
    const wanted = new Map<string, [string, string, string]>();
    for (const l of pending) {
      for (const h of refsOf(areaOf(l)!, () => "")) {
        const k = elementKey(l.threadId, l.checkpointNs, h);
        if (!found.has(k)) wanted.set(k, [l.threadId, l.checkpointNs, h]);
      }
    }
    if (wanted.size === 0) break;
    const keys = [...wanted.values()];
    const rows = await query(
      `SELECT b.${COL.threadId} AS thread_id, b.${COL.checkpointNs} AS checkpoint_ns, b.${COL.version} AS hash, b.${COL.type} AS type, b.${COL.value} AS value
         FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS k(t, ns, h)
         JOIN ${blobs} b ON b.${COL.threadId} = k.t AND b.${COL.checkpointNs} = k.ns AND b.${COL.channel} = '${ELEMENTS_CHANNEL}' AND b.${COL.version} = k.h`,
      [0, 1, 2].map((i) => keys.map((k) => k[i])),
    );
    pending = [];
    for (const r of rows) {
      found.set(elementKey(r.thread_id, r.checkpoint_ns, r.hash), { type: r.type, value: r.value });
      // A chunk: its elements next (a chunk naming a chunk is refused when the list is decoded).
      if (r.type === REFS_TYPE && r.value !== null && r.value.byteLength % HASH_BYTES === 0) {
        pending.push({ threadId: r.thread_id, checkpointNs: r.checkpoint_ns, type: r.type, value: r.value });
      }
    }
  }
  return found;
}

/**
 * Decode a value stored in `row`; never throws (an undecodable value is
 * described, its bytes are kept elsewhere). A value stored by content is put
 * back together from `elements` (a missing element makes it undecodable,
 * never shorter); a chunk decodes to its hashes.
 */
export async function decodeStored(
  serde: SerializerProtocol,
  type: string,
  value: Uint8Array | null,
  row: ValueRow,
  elements?: Elements,
): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  if (type === "empty") return { ok: true, value: undefined };
  try {
    const bytes = value ?? new Uint8Array();
    if (isChunk(type, row)) return { ok: true, value: refsOf(bytes, () => `chunk ${(row as { version: string }).version} of thread ${JSON.stringify(row.threadId)}`) };
    const find = (h: string) => elements?.get(elementKey(row.threadId, row.checkpointNs, h));
    return { ok: true, value: await decodeStoredValue({ serde, codec: elementCodec(serde) }, type, bytes, row, find) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/** {@link decodeStored} as tagged JSON; a chunk is `{"$type":"pg:refs","hashes":[...]}` (hashes of elements, not a value). */
export async function decodeSafe(serde: SerializerProtocol, type: string, value: Uint8Array | null, row: ValueRow, elements?: Elements): Promise<unknown> {
  const d = await decodeStored(serde, type, value, row, elements);
  if (d.ok && isChunk(type, row)) return { $type: REFS_TYPE, hashes: d.value };
  return d.ok ? toJsonSafe(d.value) : { $type: "undecodable", error: d.error };
}

/**
 * A value as an export shows it, each element once: a value stored by content
 * as what it names instead of put back together (a list is
 * `{"$type":"pg:refs","hashes":[...]}`, a large value `{"$type":"pg:val","hashes":[hash]}`,
 * an object stored by content its fields with such a list in place of each
 * list field, a `DeltaSnapshot` so too under `{"$type":"DeltaSnapshot","value":...}`), decoded and tagged as {@link decodeSafe} does otherwise (element
 * rows hold values whole; a chunk is its hashes). Hashes name element rows of
 * the row's thread and namespace (channel `__elements__`, version the hash).
 * Refs are authenticated as a read would (an encrypting serializer's tag).
 */
export async function outlineSafe(serde: SerializerProtocol, type: string, value: Uint8Array | null, row: ValueRow): Promise<unknown> {
  if (!namesElements(type) || isChunk(type, row)) return decodeSafe(serde, type, value, row);
  try {
    const outline = await outlineStoredValue({ serde, codec: elementCodec(serde) }, type, value, row);
    if (outline.form === "refs") return { $type: REFS_TYPE, hashes: outline.hashes };
    if (outline.form === "val") return { $type: VALUE_TYPE, hashes: [outline.hash] };
    // The other fields tagged as a whole object's would be (with a `$type` key of its own: wrapped), then the lists' hashes in place.
    const plain = Object.fromEntries(outline.keys.map((k, i) => [k, outline.lists.has(i) ? null : outline.rest[k]]));
    const safe = toJsonSafe(plain) as Record<string, unknown>;
    const fields = Object.prototype.hasOwnProperty.call(plain, "$type") ? (safe.value as Record<string, unknown>) : safe;
    for (const [i, hashes] of outline.lists) Object.defineProperty(fields, outline.keys[i]!, { value: { $type: REFS_TYPE, hashes }, enumerable: true, writable: true, configurable: true });
    // A delta channel's snapshot, tagged as the class instance it reads back as.
    return outline.snapshot ? { $type: "DeltaSnapshot", value: safe } : safe;
  } catch (err) {
    return { $type: "undecodable", error: err instanceof Error ? err.message : String(err) };
  }
}

/** `metadata_raw` is plain msgpack whatever the serializer (metadata is never encrypted): decoded as the saver does. */
export async function decodeMetadataRaw(json: unknown, raw: Uint8Array | null): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  try {
    return { ok: true, value: await decodeMetadata(json, raw) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}
