/**
 * Metadata is stored as JSONB so `list({ filter })` can query it. JSONB cannot
 * hold everything a metadata object may contain (NUL characters, `undefined`,
 * dates, bigints, non-finite numbers), so when the metadata is not exactly
 * representable, its exact msgpack encoding is kept in `metadata_raw` and the
 * JSONB column holds a filterable projection (NUL shown as U+FFFD).
 * Nothing is ever lost, and the common case costs no extra bytes.
 */
import { MsgpackSerializer } from "./serde.js";
import { LONE_SURROGATE } from "../validate.js";

const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, "g");
/** What JSONB cannot hold in a string: NUL and lone surrogates, shown as U+FFFD in the projection. */
const clean = (x: string) => x.replace(/\u0000/g, "\uFFFD").replace(LONE_SURROGATES, "\uFFFD");
const unsafe = (x: string) => x.includes("\u0000") || LONE_SURROGATE.test(x);

const raw = new MsgpackSerializer();

/** True when `JSON.parse(JSON.stringify(x))` gives back exactly `x` and JSONB can store it. */
function jsonExact(x: unknown, depth = 0): boolean {
  if (depth > 100) return false;
  switch (typeof x) {
    case "string":
      return !unsafe(x);
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
        if (unsafe(k) || !jsonExact(v, depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/** The JSONB projection: exact for JSON-safe values; NUL → U+FFFD, bigint → string otherwise. */
export function projectJson(x: unknown): unknown {
  const text = JSON.stringify(x, function (this: unknown, _k, v: unknown) {
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "string") return clean(v);
    // Keys too: rebuild objects whose keys JSONB could not store.
    if (v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).some(unsafe)) {
      return Object.fromEntries(Object.entries(v).map(([key, val]) => [clean(key), val]));
    }
    return v;
  });
  return text === undefined ? null : JSON.parse(text);
}

export async function encodeMetadata(metadata: unknown): Promise<{ json: unknown; raw: Uint8Array | null }> {
  if (jsonExact(metadata)) return { json: metadata ?? {}, raw: null };
  const [, bytes] = await raw.dumpsTyped(metadata);
  return { json: projectJson(metadata) ?? {}, raw: bytes };
}

export async function decodeMetadata(json: unknown, bytes: Uint8Array | null): Promise<unknown> {
  return bytes ? raw.loadsTyped("msgpack", bytes) : json;
}
