/**
 * Reading values stored as type `"json"`: what LangGraph's `JsonPlusSerializer`
 * writes (the official Postgres saver's rows, adopted by `migrate`).
 *
 * The text is JSON; a few object shapes inside it are revived into values,
 * exactly these and nothing else (the "documented serialized form"):
 * - `{ lc: 2, type: "undefined" }` → `undefined`;
 * - `{ lc: 2, type: "delta_snapshot", value }` → a `DeltaSnapshot`;
 * - `{ lc: 2, type: "constructor", id: [name], args }` for `Set`, `Map`,
 *   `RegExp`, `Error` and `Uint8Array` (others stay plain objects);
 * - `{ lc: 1, type: "constructor", id, kwargs }` → an instance of a LangChain
 *   class, only when `id` is in the serializer's allowlist (anything else is
 *   refused); its `kwargs` are read as `@langchain/core/load` reads them
 *   (`{ "__lc_escaped__": x }` is the plain value `x`, keys mapped to the
 *   constructor's names), but `lc: 1` secrets are refused, never looked up.
 *
 * Every other object comes back as a plain object: a `"__proto__"` key is an
 * own data property, never a prototype. Unlike `JsonPlusSerializer` (whose
 * reviver recurses, assigns `__proto__` keys, and hands LangChain records to
 * `@langchain/core/load`), the walk here is iterative: any size and depth the
 * database holds reads back.
 */
import { DeltaSnapshot } from "@langchain/langgraph-checkpoint";
import { DeserializationError } from "../errors.js";

/** A LangChain class allowed in stored values: looked up by its serialized id. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type LangChainLookup = (id: string[]) => (new (kwargs: any) => unknown) | undefined;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** How a node's children are read: ordinary JSON values, or the kwargs of a LangChain record. */
const VALUE = 0;
const KWARGS = 1;
type Mode = typeof VALUE | typeof KWARGS;

interface Frame {
  /** The parsed node whose children are being read. */
  node: Json[] | { [key: string]: Json };
  /** Object keys (null for an array). */
  keys: string[] | null;
  next: number;
  out: unknown[] | Record<string, unknown>;
  mode: Mode;
  /** Set for the kwargs frame of an allowlisted LangChain record: build the instance when done. */
  build: ((kwargs: Record<string, unknown>) => unknown) | undefined;
  /** Where the finished value goes. */
  deliver: (value: unknown) => void;
}

/**
 * Decode JSON text written by `JsonPlusSerializer`. Throws
 * {@link DeserializationError} for bad JSON, a LangChain class outside the
 * allowlist, a secret, or a constructor that throws.
 *
 * @example
 * ```ts
 * const value = readJsonPlus('{"seen":{"lc":2,"type":"constructor","id":["Set"],"args":[[1]]}}', () => undefined);
 * value.seen instanceof Set; // true
 * ```
 */
export function readJsonPlus(text: string, lookup: LangChainLookup): unknown {
  let parsed: Json;
  try {
    // JSON.parse is iterative and defines "__proto__" keys as own properties.
    parsed = JSON.parse(text) as Json;
  } catch (cause) {
    throw new DeserializationError('Could not decode a "json" value', { cause });
  }
  let result: unknown;
  const stack: Frame[] = [];
  // Either a finished value (primitives, escaped data) or a new frame on the stack.
  const visit = (node: Json, mode: Mode, deliver: (value: unknown) => void): void => {
    if (node === null || typeof node !== "object") return deliver(node);
    if (Array.isArray(node)) {
      stack.push({ node, keys: null, next: 0, out: new Array<unknown>(node.length), mode, build: undefined, deliver });
      return;
    }
    if (mode === KWARGS && isEscaped(node)) return deliver(node.__lc_escaped__);
    if (node.lc === 1 && (node.type === "secret" || node.type === "not_implemented") && mode === KWARGS) {
      throw new DeserializationError(`A "json" value holds a LangChain ${node.type} record; it is never read`);
    }
    if (node.lc === 1 && node.type === "constructor" && Array.isArray(node.id)) {
      const id = node.id.every((p) => typeof p === "string") ? (node.id as string[]) : undefined;
      const ctor = id ? lookup(id) : undefined;
      if (!ctor) throw new DeserializationError(`LangChain class ${id ? id.join(".") : "(no id)"} in a "json" value is not in the allowlist`);
      const kwargs = node.kwargs;
      if (kwargs !== null && typeof kwargs === "object" && !Array.isArray(kwargs)) {
        const keys = Object.keys(kwargs);
        stack.push({ node: kwargs, keys, next: 0, out: {}, mode: KWARGS, build: (k) => construct(ctor, id!, k), deliver });
        return;
      }
    }
    stack.push({ node, keys: Object.keys(node), next: 0, out: {}, mode, build: undefined, deliver });
  };
  try {
    visit(parsed, VALUE, (v) => (result = v));
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const length = frame.keys ? frame.keys.length : (frame.node as Json[]).length;
      if (frame.next < length) {
        const i = frame.next++;
        if (frame.keys) {
          const key = frame.keys[i]!;
          const out = frame.out as Record<string, unknown>;
          visit((frame.node as Record<string, Json>)[key]!, frame.mode, (v) => setOwn(out, key, v));
        } else {
          const out = frame.out as unknown[];
          visit((frame.node as Json[])[i]!, frame.mode, (v) => (out[i] = v));
        }
        continue;
      }
      stack.pop();
      frame.deliver(frame.build ? frame.build(frame.out as Record<string, unknown>) : frame.keys ? reviveRecord(frame.out as Record<string, unknown>) : frame.out);
    }
  } catch (err) {
    if (err instanceof DeserializationError) throw err;
    throw new DeserializationError('Could not decode a "json" value', { cause: err });
  }
  return result;
}

function isEscaped(node: { [key: string]: Json }): node is { __lc_escaped__: Json } {
  const keys = Object.keys(node);
  return keys.length === 1 && keys[0] === "__lc_escaped__";
}

/** Assign an own data property, also for the key "__proto__". */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true });
  else out[key] = value;
}

/** The lc:2 records JsonPlusSerializer writes; anything else stays a plain object. */
function reviveRecord(obj: Record<string, unknown>): unknown {
  if (obj.lc !== 2) return obj;
  if (obj.type === "undefined") return undefined;
  if (obj.type === "delta_snapshot" && Object.prototype.hasOwnProperty.call(obj, "value")) return new DeltaSnapshot(obj.value);
  if (obj.type !== "constructor" || !Array.isArray(obj.id) || obj.id.length !== 1) return obj;
  if (obj.method !== undefined && obj.method !== null && !(obj.id[0] === "Uint8Array" && obj.method === "from")) return obj;
  const args = obj.args;
  const list = Array.isArray(args) && args.length === 1 && Array.isArray(args[0]) ? (args[0] as unknown[]) : undefined;
  switch (obj.id[0]) {
    case "Set":
      return list ? new Set(list) : obj;
    case "Map":
      return list && list.every((e) => Array.isArray(e) && e.length === 2) ? new Map(list as [unknown, unknown][]) : obj;
    case "RegExp":
      if (!Array.isArray(args) || args.length !== 2 || typeof args[0] !== "string" || typeof args[1] !== "string") return obj;
      try {
        return new RegExp(args[0], args[1]);
      } catch {
        return obj;
      }
    case "Error":
      return Array.isArray(args) && args.length === 1 && typeof args[0] === "string" ? new Error(args[0]) : obj;
    case "Uint8Array":
      return list && list.every((b) => typeof b === "number" && Number.isInteger(b) && b >= 0 && b <= 255) ? new Uint8Array(list as number[]) : obj;
    default:
      return obj;
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function construct(ctor: new (kwargs: any) => unknown, id: string[], kwargs: Record<string, unknown>): unknown {
  // As @langchain/core/load does: keys renamed through the class's lc_aliases, else to camelCase.
  const aliases = invertedAliases(ctor);
  const mapped: Record<string, unknown> = {};
  for (const key of Object.keys(kwargs)) setOwn(mapped, aliases[key] || camelCase(key), kwargs[key]);
  try {
    return new ctor(mapped);
  } catch (cause) {
    throw new DeserializationError(`Could not rebuild LangChain ${id.join(".")} from a "json" value`, { cause });
  }
}

const aliasCache = new WeakMap<object, Record<string, string>>();

function invertedAliases(ctor: object): Record<string, string> {
  let inverted = aliasCache.get(ctor);
  if (inverted) return inverted;
  const aliases: Record<string, string> = {};
  for (let c = ctor as { prototype?: object } | null; c && c.prototype; c = Object.getPrototypeOf(c) as { prototype?: object } | null) {
    Object.assign(aliases, Reflect.get(c.prototype, "lc_aliases"));
  }
  inverted = Object.create(null) as Record<string, string>;
  for (const [key, value] of Object.entries(aliases)) if (typeof value === "string") inverted[value] = key;
  aliasCache.set(ctor, inverted);
  return inverted;
}

function camelCase(key: string): string {
  const trimmed = key.trim();
  if (!/[-_\s]/.test(trimmed)) return trimmed;
  return trimmed
    .replace(/[-_\s]+/g, "_")
    .toLowerCase()
    .replace(/_+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
