/**
 * The bytes of the msgpack serializer's simple extension types (the table in
 * serde.ts: the numbers, typed arrays, bigint, errors, ill-formed strings),
 * and what the codec's parts share: the depth limit, the failure that ends a
 * write, and how a value is described in an error message.
 */
import { DeserializationError } from "../errors.js";

/** Maximum nesting of objects, arrays and extension values, on write and on read. */
export const MAX_DEPTH = 512;

export const EXT_DATE = -1;
export const EXT_UNDEFINED = 0;
export const EXT_MAP = 1;
export const EXT_SET = 2;
export const EXT_BIGINT = 3;
export const EXT_REGEXP = 4;
export const EXT_ERROR = 5;
export const EXT_LANGCHAIN = 6;
export const EXT_LANGGRAPH = 7;
export const EXT_DELTA_SNAPSHOT = 8;
export const EXT_BYTES = 9;
export const EXT_TYPED = 10;
export const EXT_PROTO_KEY_OBJECT = 11;
export const EXT_INVALID_DATE = 12;
export const EXT_DOCUMENT = 13;
export const EXT_ILL_FORMED_STRING = 14;

/** Kind byte of ext 10 (on-disk: never renumber). */
export const TYPED_KINDS = {
  Int8Array: 1,
  Uint8ClampedArray: 2,
  Int16Array: 3,
  Uint16Array: 4,
  Int32Array: 5,
  Uint32Array: 6,
  Float32Array: 7,
  Float64Array: 8,
  BigInt64Array: 9,
  BigUint64Array: 10,
  ArrayBuffer: 11,
  DataView: 12,
} as const;
export type TypedKindName = keyof typeof TYPED_KINDS;
export type TypedArrayCtor = new (buffer: ArrayBuffer) => ArrayBufferView;
export const TYPED_CTORS: Record<number, TypedArrayCtor | undefined> = {
  1: Int8Array,
  2: Uint8ClampedArray,
  3: Int16Array,
  4: Uint16Array,
  5: Int32Array,
  6: Uint32Array,
  7: Float32Array,
  8: Float64Array,
  9: BigInt64Array,
  10: BigUint64Array,
  12: DataView,
};
export const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Built-in error classes rebuilt by name; any other name becomes an `Error` with that `name`. */
export const ERROR_CTORS: Record<string, ErrorConstructor | undefined> = {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
};

/** Ends a write: `value` (found again by identity to name its path) cannot be encoded. */
export class EncodeFailure extends Error {
  constructor(
    readonly value: unknown,
    readonly reason: string,
    readonly tooDeep = false,
    /** Whether writing the value's JSON form instead (the default, non-strict mode) can succeed. */
    readonly fixable = true,
  ) {
    super(reason);
  }
}

/** The non-plain objects the encoder writes as an extension (see the table in serde.ts). */
export type InstanceKind = "date" | "bytes" | "typed" | "map" | "set" | "regexp" | "error" | "delta" | "langgraph" | "langchain" | "document";

export function utf16Bytes(s: string): Uint8Array {
  const out = new Uint8Array(s.length * 2);
  for (let i = 0, j = 0; i < s.length; i++, j += 2) {
    const unit = s.charCodeAt(i);
    out[j] = unit & 0xff;
    out[j + 1] = unit >>> 8;
  }
  return out;
}

export function bigintBytes(value: bigint): Uint8Array {
  const negative = value < 0n;
  let hex = (negative ? -value : value).toString(16);
  if (hex === "0") hex = "";
  else if (hex.length % 2 === 1) hex = `0${hex}`;
  const out = new Uint8Array(1 + hex.length / 2);
  out[0] = negative ? 1 : 0;
  for (let i = 1, j = 0; i < out.length; i++, j += 2) out[i] = parseInt(hex.slice(j, j + 2), 16);
  return out;
}

export const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

export function corrupt(what: string): DeserializationError {
  return new DeserializationError(`Corrupt msgpack data: ${what}`);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

export function describe(value: unknown): string {
  if (typeof value === "function") return `a function${value.name ? ` (${value.name})` : ""}`;
  if (typeof value === "symbol") return `a symbol (${String(value.description ?? "")})`;
  if (value !== null && typeof value === "object") {
    const ctor = (value as { constructor?: { name?: unknown } }).constructor;
    const name = typeof ctor === "function" && typeof ctor.name === "string" && ctor.name ? ctor.name : "an unknown class";
    return `an instance of ${name}`;
  }
  return `a ${typeof value}`;
}

export function errorPayload(error: Error): unknown[] {
  let props: Record<string, unknown> | undefined;
  for (const key of Object.keys(error)) {
    if (key === "name" || key === "message" || key === "stack" || key === "cause") continue;
    props ??= Object.create(null) as Record<string, unknown>;
    props[key] = (error as unknown as Record<string, unknown>)[key];
  }
  const payload: unknown[] = [String(error.name), String(error.message), typeof error.stack === "string" ? error.stack : undefined, props];
  if ("cause" in error) payload.push(error.cause);
  return payload;
}

export function decodeError(parts: unknown): Error {
  if (
    !Array.isArray(parts) ||
    (parts.length !== 4 && parts.length !== 5) ||
    typeof parts[0] !== "string" ||
    typeof parts[1] !== "string" ||
    (parts[2] !== undefined && typeof parts[2] !== "string") ||
    (parts[3] !== undefined && !isPlainObject(parts[3]))
  ) {
    throw corrupt("bad Error extension");
  }
  const [name, message, stack, props] = parts as [string, string, string | undefined, Record<string, unknown> | undefined];
  const Ctor = Object.prototype.hasOwnProperty.call(ERROR_CTORS, name) ? (ERROR_CTORS[name] ?? Error) : Error;
  const error = parts.length === 5 ? new Ctor(message, { cause: parts[4] }) : new Ctor(message);
  if (error.name !== name) error.name = name;
  if (stack !== undefined) Object.defineProperty(error, "stack", { value: stack, writable: true, enumerable: false, configurable: true });
  if (props) {
    for (const key of Object.keys(props)) {
      Object.defineProperty(error, key, { value: props[key], writable: true, enumerable: true, configurable: true });
    }
  }
  return error;
}

export function decodeBigint(data: Uint8Array): bigint {
  const sign = data[0];
  if (data.length === 0 || (sign !== 0 && sign !== 1)) throw corrupt("bad bigint extension");
  let hex = "";
  for (let i = 1; i < data.length; i++) hex += HEX[data[i] as number];
  const magnitude = hex === "" ? 0n : BigInt(`0x${hex}`);
  return sign === 1 ? -magnitude : magnitude;
}

/** The ext 10 kind byte of a typed array, ArrayBuffer or DataView; undefined for one it does not know (e.g. Float16Array). */
export function typedKind(object: ArrayBufferView | ArrayBuffer): number | undefined {
  const tag = (object as { [Symbol.toStringTag]?: unknown })[Symbol.toStringTag];
  return typeof tag === "string" && Object.prototype.hasOwnProperty.call(TYPED_KINDS, tag) ? TYPED_KINDS[tag as TypedKindName] : undefined;
}

export function typedBytes(object: ArrayBufferView | ArrayBuffer): Uint8Array {
  const kind = typedKind(object);
  if (kind === undefined) throw new EncodeFailure(object, describe(object));
  const view =
    object instanceof ArrayBuffer ? new Uint8Array(object) : new Uint8Array(object.buffer, object.byteOffset, object.byteLength);
  if (!LITTLE_ENDIAN && kind > 2 && kind !== 11 && kind !== 12) {
    throw new EncodeFailure(object, `${describe(object)} on a big-endian host`, false, false);
  }
  const out = new Uint8Array(1 + view.byteLength);
  out[0] = kind;
  out.set(view, 1);
  return out;
}

export function decodeTyped(data: Uint8Array): unknown {
  const kind = data[0];
  if (kind === undefined) throw corrupt("bad typed-array extension");
  // A copy in a fresh ArrayBuffer of its own. (data.slice would not do: pg hands
  // out Buffers, whose slice is a view of a shared pool.)
  const copy = new Uint8Array(data.subarray(1));
  const buffer = copy.buffer as ArrayBuffer;
  if (kind === TYPED_KINDS.ArrayBuffer) return buffer;
  const Ctor = TYPED_CTORS[kind];
  if (!Ctor) throw corrupt(`unknown typed-array kind ${kind}`);
  if (!LITTLE_ENDIAN && kind > 2 && kind !== 12) throw new DeserializationError("Typed arrays need a little-endian host");
  const size = (Ctor as unknown as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1;
  if (buffer.byteLength % size !== 0) throw corrupt("typed-array length is not a multiple of its element size");
  return new Ctor(buffer);
}

export function decodeUtf16(data: Uint8Array): string {
  if (data.length % 2 !== 0) throw corrupt("bad string extension");
  let out = "";
  const chunk: number[] = [];
  for (let i = 0; i < data.length; i += 2) {
    chunk.push((data[i] as number) | ((data[i + 1] as number) << 8));
    if (chunk.length === 4096) {
      out += String.fromCharCode(...chunk);
      chunk.length = 0;
    }
  }
  return out + String.fromCharCode(...chunk);
}
