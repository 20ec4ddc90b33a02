/**
 * Reading values written by the Python LangGraph serializer (`JsonPlusSerializer`
 * of `langgraph-checkpoint`), found in databases adopted from the Python
 * Postgres saver (see adopt.ts). Read only: this package never writes them.
 *
 * Type tags:
 * - `"msgpack-py"`: what Python stored as `"msgpack"`. Adoption renames the tag
 *   because our own `"msgpack"` format numbers its extension types differently
 *   (Python's ext 5, a pydantic model, is our ext 5, an Error): decoding one
 *   with the other's table would give a wrong value instead of an error.
 * - `"null"`: Python's `None` (written for writes such as `("branch:to:x", None)`).
 * - `"bytearray"`: raw bytes.
 *
 * Plain msgpack values come back as JavaScript values: nil → `null`, booleans,
 * integers (a `bigint` beyond ±2^53, never a rounded number), floats, UTF-8
 * strings, bin → `Uint8Array`, arrays (Python lists and tuples), maps with
 * string keys → plain objects, maps with any other key → `Map` (Python allows
 * int, float, bool, None and tuple keys; an object would turn them into strings).
 *
 * Python objects are msgpack extensions (ext 0-6: `(module, class, args)`
 * constructors, pydantic models, numpy arrays; ext 7: `DeltaSnapshot`). Only two
 * have an exact JavaScript counterpart and are rebuilt: `DeltaSnapshot`, and
 * `set`/`frozenset` (→ `Set`). Every other extension fails with a
 * {@link DeserializationError} naming the Python class, never a guessed value.
 */
import { DeltaSnapshot } from "@langchain/langgraph-checkpoint";
import { DeserializationError } from "../errors.js";

/** The type tag of values written by Python's serializer as `"msgpack"`. */
export const PY_MSGPACK_TYPE = "msgpack-py";

/** Type tags this module reads. */
export const PYTHON_TYPES: ReadonlySet<string> = new Set([PY_MSGPACK_TYPE, "null", "bytearray"]);

const MAX_DEPTH = 512;

// Python's extension numbers (langgraph/checkpoint/serde/jsonplus.py).
const PY_EXT_KINDS: Record<number, string> = {
  0: "constructor with one argument",
  1: "constructor with positional arguments",
  2: "constructor with keyword arguments",
  3: "class method with one argument",
  4: "pydantic v1 model",
  5: "pydantic v2 model",
  6: "numpy array",
  7: "DeltaSnapshot",
};
const EXT_CONSTRUCTOR_SINGLE_ARG = 0;
const EXT_NUMPY_ARRAY = 6;
const EXT_DELTA_SNAPSHOT = 7;

// ignoreBOM: a string that starts with U+FEFF keeps it (a default TextDecoder drops it).
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Decode a value of one of the {@link PYTHON_TYPES}.
 *
 * @example
 * ```ts
 * loadsPython("msgpack-py", new Uint8Array([0x92, 0x01, 0xa1, 0x61])); // [1, "a"]
 * loadsPython("null", new Uint8Array()); // null
 * ```
 */
export function loadsPython(type: string, data: Uint8Array | string): unknown {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  switch (type) {
    case "null":
      return null;
    case "bytearray":
      return Uint8Array.from(bytes);
    case PY_MSGPACK_TYPE: {
      const reader = new Reader(bytes);
      const value = reader.value(0);
      if (reader.pos !== bytes.byteLength) throw corrupt(`${bytes.byteLength - reader.pos} bytes after the value`);
      return value;
    }
    default:
      throw new DeserializationError(`Unknown Python serialization type ${JSON.stringify(type)}`);
  }
}

function corrupt(what: string): DeserializationError {
  return new DeserializationError(`Corrupt Python msgpack data: ${what}`);
}

class Reader {
  pos = 0;
  readonly #view: DataView;

  constructor(readonly bytes: Uint8Array) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  #need(n: number): number {
    const at = this.pos;
    if (n > this.bytes.byteLength - at) throw corrupt("truncated");
    this.pos += n;
    return at;
  }

  #u8(): number {
    return this.#view.getUint8(this.#need(1));
  }
  #u16(): number {
    return this.#view.getUint16(this.#need(2));
  }
  #u32(): number {
    return this.#view.getUint32(this.#need(4));
  }

  #slice(n: number): Uint8Array {
    const at = this.#need(n);
    return this.bytes.subarray(at, at + n);
  }

  #str(n: number): string {
    try {
      return utf8.decode(this.#slice(n));
    } catch (cause) {
      if (cause instanceof DeserializationError) throw cause;
      throw corrupt("a string that is not valid UTF-8");
    }
  }

  #int64(signed: boolean): number | bigint {
    const at = this.#need(8);
    const big = signed ? this.#view.getBigInt64(at) : this.#view.getBigUint64(at);
    // Exact either way: a number when it is one, a bigint beyond 2^53.
    return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
  }

  value(depth: number): unknown {
    const b = this.#u8();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    if (b >= 0xa0 && b <= 0xbf) return this.#str(b & 0x1f);
    if (b >= 0x90 && b <= 0x9f) return this.#array(b & 0x0f, depth);
    if (b >= 0x80 && b <= 0x8f) return this.#map(b & 0x0f, depth);
    switch (b) {
      case 0xc0:
        return null;
      case 0xc2:
        return false;
      case 0xc3:
        return true;
      case 0xc4:
        return Uint8Array.from(this.#slice(this.#u8()));
      case 0xc5:
        return Uint8Array.from(this.#slice(this.#u16()));
      case 0xc6:
        return Uint8Array.from(this.#slice(this.#u32()));
      case 0xc7:
        return this.#ext(this.#u8(), depth);
      case 0xc8:
        return this.#ext(this.#u16(), depth);
      case 0xc9:
        return this.#ext(this.#u32(), depth);
      case 0xca:
        return this.#view.getFloat32(this.#need(4));
      case 0xcb:
        return this.#view.getFloat64(this.#need(8));
      case 0xcc:
        return this.#u8();
      case 0xcd:
        return this.#u16();
      case 0xce:
        return this.#u32();
      case 0xcf:
        return this.#int64(false);
      case 0xd0:
        return this.#view.getInt8(this.#need(1));
      case 0xd1:
        return this.#view.getInt16(this.#need(2));
      case 0xd2:
        return this.#view.getInt32(this.#need(4));
      case 0xd3:
        return this.#int64(true);
      case 0xd4:
        return this.#ext(1, depth);
      case 0xd5:
        return this.#ext(2, depth);
      case 0xd6:
        return this.#ext(4, depth);
      case 0xd7:
        return this.#ext(8, depth);
      case 0xd8:
        return this.#ext(16, depth);
      case 0xd9:
        return this.#str(this.#u8());
      case 0xda:
        return this.#str(this.#u16());
      case 0xdb:
        return this.#str(this.#u32());
      case 0xdc:
        return this.#array(this.#u16(), depth);
      case 0xdd:
        return this.#array(this.#u32(), depth);
      case 0xde:
        return this.#map(this.#u16(), depth);
      case 0xdf:
        return this.#map(this.#u32(), depth);
      default:
        throw corrupt(`byte 0x${b.toString(16)} is not a msgpack type`);
    }
  }

  #enter(depth: number, items: number): void {
    if (depth + 1 > MAX_DEPTH) throw new DeserializationError(`Python msgpack data nested deeper than ${MAX_DEPTH} levels`);
    // Every item takes at least one byte: a lying length header never allocates.
    if (items > this.bytes.byteLength - this.pos) throw corrupt("a length header exceeds the data");
  }

  #array(n: number, depth: number): unknown[] {
    this.#enter(depth, n);
    const out = new Array<unknown>(n);
    for (let i = 0; i < n; i++) out[i] = this.value(depth + 1);
    return out;
  }

  #map(n: number, depth: number): Record<string, unknown> | Map<unknown, unknown> {
    this.#enter(depth, n * 2);
    const entries: [unknown, unknown][] = [];
    let allStrings = true;
    for (let i = 0; i < n; i++) {
      const key = this.value(depth + 1);
      if (typeof key !== "string") allStrings = false;
      entries.push([key, this.value(depth + 1)]);
    }
    if (!allStrings) return new Map(entries);
    const obj: Record<string, unknown> = {};
    for (const [key, value] of entries) {
      // defineProperty: a "__proto__" key stays an own data property.
      Object.defineProperty(obj, key as string, { value, enumerable: true, writable: true, configurable: true });
    }
    return obj;
  }

  #ext(size: number, depth: number): unknown {
    const code = this.#view.getInt8(this.#need(1));
    const data = this.#slice(size);
    if (code === EXT_DELTA_SNAPSHOT) return new DeltaSnapshot(payload(data, depth));
    const cls = code >= 0 && code < EXT_NUMPY_ARRAY ? className(data) : undefined;
    if (code === EXT_CONSTRUCTOR_SINGLE_ARG && cls?.[0] === "builtins" && (cls[1] === "set" || cls[1] === "frozenset")) {
      const parts = payload(data, depth) as unknown[];
      if (Array.isArray(parts[2])) return new Set(parts[2]);
    }
    const kind = PY_EXT_KINDS[code];
    throw new DeserializationError(
      kind === undefined
        ? `Python msgpack data holds extension type ${code}, which the Python serializer does not write`
        : `Python msgpack data holds a ${kind} (ext ${code})${cls ? ` of class ${cls[0]}.${cls[1]}` : ""}; ` +
          "only plain values (None, booleans, numbers, strings, bytes, lists, dicts, sets) and DeltaSnapshot are read",
    );
  }
}

/** An extension's data: one msgpack value in the same format. */
function payload(data: Uint8Array, depth: number): unknown {
  const reader = new Reader(data);
  const value = reader.value(depth + 1);
  if (reader.pos !== data.byteLength) throw corrupt("bytes after an extension's value");
  return value;
}

/** `(module, class)` from the head of a constructor extension's payload, if it has that shape. */
function className(data: Uint8Array): [string, string] | undefined {
  const b = data[0];
  if (b === undefined || b < 0x92 || b > 0x9f) return undefined;
  try {
    const reader = new Reader(data.subarray(1));
    const mod = reader.value(MAX_DEPTH - 1);
    const name = reader.value(MAX_DEPTH - 1);
    return typeof mod === "string" && typeof name === "string" ? [mod, name] : undefined;
  } catch {
    return undefined;
  }
}
