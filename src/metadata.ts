/**
 * Metadata is stored as JSONB so `list({ filter })` can query it. JSONB cannot
 * hold everything a metadata object may contain (NUL characters, `undefined`,
 * dates, bigints, non-finite numbers), so when the metadata is not exactly
 * representable, its exact msgpack encoding is kept in `metadata_raw` and the
 * JSONB column holds a filterable projection (NUL shown as U+FFFD).
 * Nothing is ever lost, and the common case costs no extra bytes.
 */
import { MsgpackSerializer } from "./serde.js";

const raw = new MsgpackSerializer();

/** True when `JSON.parse(JSON.stringify(x))` gives back exactly `x` and JSONB can store it. */
function jsonExact(x: unknown, depth = 0): boolean {
  if (depth > 100) return false;
  switch (typeof x) {
    case "string":
      return !x.includes("\u0000");
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(x) && !Object.is(x, -0);
    case "object": {
      if (x === null) return true;
      if (Array.isArray(x)) return x.every((v) => jsonExact(v, depth + 1));
      const proto = Object.getPrototypeOf(x);
      if (proto !== Object.prototype && proto !== null) return false;
      for (const [k, v] of Object.entries(x)) {
        if (k.includes("\u0000") || !jsonExact(v, depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/** The JSONB projection: exact for JSON-safe values; NUL → U+FFFD, bigint → string otherwise. */
export function projectJson(x: unknown): unknown {
  const text = JSON.stringify(x, (_k, v: unknown) => {
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "string" && v.includes("\u0000")) return v.replace(/\u0000/g, "\uFFFD");
    return v;
  });
  if (text === undefined) return null;
  return JSON.parse(text.includes("\\u0000") ? text.replace(/\\u0000/g, "\\ufffd") : text);
}

export async function encodeMetadata(metadata: unknown): Promise<{ json: unknown; raw: Uint8Array | null }> {
  if (jsonExact(metadata)) return { json: metadata ?? {}, raw: null };
  const [, bytes] = await raw.dumpsTyped(metadata);
  return { json: projectJson(metadata) ?? {}, raw: bytes };
}

export async function decodeMetadata(json: unknown, bytes: Uint8Array | null): Promise<unknown> {
  return bytes ? raw.loadsTyped("msgpack", bytes) : json;
}
