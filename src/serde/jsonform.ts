/**
 * The non-strict mode's fallback: what msgpack cannot write as it is (class
 * instances, objects with `toJSON`, functions, cycles) is written as
 * LangGraph's JSON serializer (JsonPlusSerializer) would write it, as plain
 * data. Runs only after a plain encode failed.
 */
import { EncodeFailure, MAX_DEPTH, type InstanceKind } from "./ext.js";
import type { LcLike } from "./langchain.js";

/** The JSON form of a function or symbol: left out of an object, null in an array, refused as a whole value. */
export const OMIT: unique symbol = Symbol("omit");

/** The primitive inside a boxed Number, String, Boolean or BigInt (JSON.stringify writes those as primitives), else OMIT. */
function unbox(value: object): unknown {
  const tag = Object.prototype.toString.call(value);
  if (tag !== "[object Number]" && tag !== "[object String]" && tag !== "[object Boolean]" && tag !== "[object BigInt]") return OMIT;
  try {
    return (value as { valueOf(): unknown }).valueOf();
  } catch {
    return OMIT;
  }
}

/** What the JSON form asks of the codec: which values it writes as they are. */
interface Codec {
  kindOf(object: object): InstanceKind | undefined;
  allowedLangChain(value: LcLike): boolean;
}

/** One value's JSON form (a new one for each value: it tracks the objects it is inside, to find cycles). */
export class JsonForm {
  readonly #codec: Codec;
  /** The objects the value being turned is inside. */
  readonly #ancestors: object[] = [];

  constructor(codec: Codec) {
    this.#codec = codec;
  }

  /**
   * What LangGraph's JSON serializer (JsonPlusSerializer) would store for
   * `value`, keeping what msgpack writes better as it is: a class instance
   * becomes its `toJSON()` result or its own enumerable properties, a boxed
   * primitive its primitive; functions and symbols are left out of objects and
   * become null in arrays; a circular reference becomes the string
   * `"[Circular]"`. Supported instances (Date, Map, LangChain messages...) are
   * kept: their payloads get the same treatment when they are written.
   * Returns {@link OMIT} for a function or symbol (its container decides).
   * `fromToJSON`: `value` is what a `toJSON()` returned, whose own `toJSON` is
   * not called again (as JSON.stringify does).
   */
  of(value: unknown, key: string, depth: number, fromToJSON = false): unknown {
    const ancestors = this.#ancestors;
    if (typeof value === "function" || typeof value === "symbol") return OMIT;
    if (value === null || typeof value !== "object") return value;
    if (ancestors.includes(value)) return "[Circular]";
    if (depth > MAX_DEPTH) throw new EncodeFailure(value, `a value nested deeper than ${MAX_DEPTH} levels`, true, false);
    if (Array.isArray(value)) {
      ancestors.push(value);
      const out = value.map((item: unknown, i) => {
        const form = this.of(item, String(i), depth + 1);
        return form === OMIT ? null : form;
      });
      ancestors.pop();
      return out;
    }
    const proto = Object.getPrototypeOf(value) as unknown;
    const plain = proto === Object.prototype || proto === null;
    if (!plain) {
      const kind = this.#codec.kindOf(value);
      if (kind !== undefined && (kind !== "langchain" || this.#codec.allowedLangChain(value as LcLike))) return value;
      const boxed = unbox(value);
      if (boxed !== OMIT) return boxed;
    }
    const toJSON = fromToJSON ? undefined : (value as { toJSON?: unknown }).toJSON;
    const json: unknown = typeof toJSON === "function" ? toJSON.call(value, key) : value;
    if (json !== value) {
      ancestors.push(value);
      const form = this.of(json, key, depth, true);
      ancestors.pop();
      return form;
    }
    // A plain object, or the own enumerable properties of an instance (as JSON.stringify).
    const out = (proto === null ? Object.create(null) : {}) as Record<string, unknown>;
    ancestors.push(value);
    for (const k of Object.keys(value)) {
      const form = this.of((value as Record<string, unknown>)[k], k, depth + 1);
      if (form !== OMIT) Object.defineProperty(out, k, { value: form, writable: true, enumerable: true, configurable: true });
    }
    ancestors.pop();
    return out;
  }
}
