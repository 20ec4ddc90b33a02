/**
 * The default serializer: msgpack with a small, fixed table of extension types.
 *
 * ## On-disk format (type tag `"msgpack"`)
 *
 * One msgpack value. Plain objects (prototype `Object.prototype` or `null`) are
 * msgpack maps with string keys, arrays are msgpack arrays, `null` is nil,
 * booleans, strings (well-formed UTF-16, as UTF-8) and numbers are native
 * (`-0` is always a float64). Everything else is an extension. "payload" below
 * means the extension data is itself one msgpack value in this same format.
 *
 * THIS TABLE IS THE STORAGE FORMAT. Never renumber or change an entry once
 * released; only append new numbers.
 *
 * | ext | value                         | data                                                              |
 * |----:|-------------------------------|-------------------------------------------------------------------|
 * |  -1 | valid `Date`                  | msgpack timestamp (32/64/96), millisecond precision                 |
 * |   0 | `undefined`                   | one byte `0x00`                                                   |
 * |   1 | `Map`                         | payload: array `[k0, v0, k1, v1, ...]`                            |
 * |   2 | `Set`                         | payload: array `[v0, v1, ...]`                                    |
 * |   3 | `bigint`                      | byte 0: sign (0 = +, 1 = -); then the magnitude, big-endian       |
 * |   4 | `RegExp`                      | payload: `[source, flags]`                                        |
 * |   5 | `Error`                       | payload: `[name, message, stack?, props?]` + `[cause]` if it has one |
 * |   6 | LangChain `Serializable`      | payload: `[id: string[], kwargs: map]` (id from the allowlist)    |
 * |   7 | LangGraph `lg_name` object    | payload: its `toJSON()` (`Send`, `Command`, `Overwrite`)          |
 * |   8 | `DeltaSnapshot`               | payload: its `value`                                              |
 * |   9 | `Uint8Array` (and `Buffer`)   | the raw bytes                                                     |
 * |  10 | other typed array, `ArrayBuffer`, `DataView` | byte 0: kind (see `TYPED_KINDS`); then the raw bytes, little-endian |
 * |  11 | plain object with an own `__proto__` key | payload: array `[k0, v0, k1, v1, ...]`                 |
 * |  12 | invalid `Date`                | empty                                                             |
 * |  13 | LangChain `Document`          | payload: `[pageContent, metadata, id]`                            |
 * |  14 | ill-formed string (lone surrogate) | its UTF-16 code units, little-endian                         |
 *
 * Decoding rebuilds only these types. LangChain objects are rebuilt only from a
 * fixed allowlist of class ids (the message classes of `@langchain/core/messages`,
 * the prompt values of `@langchain/core/prompt_values`, plus classes registered
 * explicitly through {@link MsgpackSerializerOptions});
 * `@langchain/core/load` is deliberately NOT used for msgpack data: it can
 * instantiate any exported `@langchain/core` class (runnables, tracers, ...)
 * with stored constructor arguments, and the point of this format is that stored
 * bytes can only produce inert data and a handful of known, side-effect-free
 * classes. A LangChain object outside the allowlist is written as the plain
 * record its `toJSON()` gives (refused in strict mode), so nothing unreadable is
 * ever stored.
 *
 * Values no extension covers (class instances, a `URL`, objects with `toJSON`,
 * functions inside objects, circular references) are written as LangGraph's
 * `JsonPlusSerializer` would write them, as plain data (see `jsonForm`); in
 * strict mode they are refused. That path runs only after the plain encode
 * failed, so values that need none of it cost nothing extra.
 *
 * Decoded LangGraph objects (`Send`, `Command`, `Overwrite`) come back in their
 * `toJSON()` form (`{ lg_name: "Send", node, args, timeout }`, `{ __overwrite__ }`,
 * `{ lg_name: "Command", update, resume, goto }`). LangGraph accepts the Send and
 * Overwrite forms wherever it reads them back from a checkpoint (pending sends are
 * rebuilt through `_isSendInterface`; the official JSON serializer also returns
 * plain objects here). LangGraph never persists a `Command` itself (it is turned
 * into writes first), and its `isCommand()` would not accept the plain form.
 * `@langchain/langgraph` is not a dependency of this package, so the real classes
 * are not rebuilt; ext 7 keeps the information should a later version want to.
 *
 * Limits: values nest at most {@link MAX_DEPTH} levels (a circular structure
 * fails with SerializationError instead of overflowing the stack); shared
 * references are written once per occurrence. Like JSON, only own enumerable
 * string keys are stored (no symbol keys). An object key longer than 50 UTF-16
 * units that contains a lone surrogate is refused (the library would alter it).
 * Errors keep name, message, stack, cause and own enumerable properties, and
 * come back as the built-in error class of that name (or `Error` with that `name`).
 *
 * Implementation notes: `@msgpack/msgpack` cannot express `undefined`, `-0`,
 * lone surrogates, a depth limit on decode, or a sanity check of array length
 * headers; those few hooks are installed on our own Encoder/Decoder instances
 * (see `patchEncoder` / `patchDecoder`), which verify at construction time that
 * the library still has the internals they wrap.
 */
import {
  DecodeError,
  Decoder,
  Encoder,
  ExtData,
  decodeTimestampExtension,
  encodeTimestampExtension,
  type ExtensionCodecType,
} from "@msgpack/msgpack";
import { DeltaSnapshot, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  ChatMessageChunk,
  FunctionMessage,
  FunctionMessageChunk,
  HumanMessage,
  HumanMessageChunk,
  RemoveMessage,
  SystemMessage,
  SystemMessageChunk,
  ToolMessage,
  ToolMessageChunk,
} from "@langchain/core/messages";
import { Document } from "@langchain/core/documents";
import { ChatPromptValue, ImagePromptValue, StringPromptValue } from "@langchain/core/prompt_values";
import { DeserializationError, InvalidOptionsError, SerializationError } from "../errors.js";
import { readJsonPlus } from "./jsonplus.js";
import { PY_MSGPACK_TYPE, loadsPython } from "./pyserde.js";

/** Maximum nesting of objects, arrays and extension values, on write and on read. */
export const MAX_DEPTH = 512;

const EXT_DATE = -1;
const EXT_UNDEFINED = 0;
const EXT_MAP = 1;
const EXT_SET = 2;
const EXT_BIGINT = 3;
const EXT_REGEXP = 4;
const EXT_ERROR = 5;
const EXT_LANGCHAIN = 6;
const EXT_LANGGRAPH = 7;
const EXT_DELTA_SNAPSHOT = 8;
const EXT_BYTES = 9;
const EXT_TYPED = 10;
const EXT_PROTO_KEY_OBJECT = 11;
const EXT_INVALID_DATE = 12;
const EXT_DOCUMENT = 13;
const EXT_ILL_FORMED_STRING = 14;

/** Kind byte of ext 10 (on-disk: never renumber). */
const TYPED_KINDS = {
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
type TypedKindName = keyof typeof TYPED_KINDS;
type TypedArrayCtor = new (buffer: ArrayBuffer) => ArrayBufferView;
const TYPED_CTORS: Record<number, TypedArrayCtor | undefined> = {
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
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A LangChain class the serializer may rebuild: `new ctor(kwargs)`. */
export interface LangChainClassEntry {
  /** The class id written to storage, e.g. `["langchain_core", "prompt_values", "ChatPromptValue"]`. */
  id: readonly string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  ctor: new (kwargs: any) => unknown;
}

/** Options of {@link MsgpackSerializer}. */
export interface MsgpackSerializerOptions {
  /**
   * LangChain `Serializable` classes to allow besides the built-in message
   * classes. Each is stored under `id` and rebuilt with `new ctor(kwargs)`, so
   * register only classes whose constructor is safe to run on stored data.
   * Classes that declare `lc_secrets` are refused (secrets are never stored).
   */
  langchainClasses?: readonly LangChainClassEntry[];
  /**
   * Refuse, with a {@link SerializationError} naming the path inside the value,
   * anything that would not come back exactly: class instances other than the
   * supported ones (a `URL`, your own classes), objects with `toJSON`,
   * functions and symbols, circular references, subclasses of the supported
   * classes (a `Buffer`, a custom `Error`). Default `false`: such values are
   * stored as LangGraph's JSON serializer would store them (see the README's
   * serialization table).
   */
  strict?: boolean;
}

/**
 * The built-in allowlist. The ids are part of the on-disk format: they are what
 * `toJSON().id` returned for these classes in @langchain/core 1.x. Keep old ids
 * here if @langchain/core ever changes them, so that old rows stay readable.
 */
const BUILTIN_LANGCHAIN_CLASSES: readonly (LangChainClassEntry & Pick<ResolvedEntry, "build">)[] = [
  { id: ["langchain_core", "messages", "HumanMessage"], ctor: HumanMessage },
  { id: ["langchain_core", "messages", "HumanMessageChunk"], ctor: HumanMessageChunk },
  { id: ["langchain_core", "messages", "AIMessage"], ctor: AIMessage },
  { id: ["langchain_core", "messages", "AIMessageChunk"], ctor: AIMessageChunk },
  { id: ["langchain_core", "messages", "SystemMessage"], ctor: SystemMessage },
  { id: ["langchain_core", "messages", "SystemMessageChunk"], ctor: SystemMessageChunk },
  { id: ["langchain_core", "messages", "ToolMessage"], ctor: ToolMessage },
  { id: ["langchain_core", "messages", "ToolMessageChunk"], ctor: ToolMessageChunk },
  { id: ["langchain_core", "messages", "ChatMessage"], ctor: ChatMessage },
  { id: ["langchain_core", "messages", "ChatMessageChunk"], ctor: ChatMessageChunk },
  { id: ["langchain_core", "messages", "FunctionMessage"], ctor: FunctionMessage },
  { id: ["langchain_core", "messages", "FunctionMessageChunk"], ctor: FunctionMessageChunk },
  { id: ["langchain_core", "messages", "RemoveMessage"], ctor: RemoveMessage },
  // Prompt values: what a prompt template returns, often kept in state. Their
  // constructors only store the messages / text / image URL they are given.
  { id: ["langchain_core", "prompt_values", "ChatPromptValue"], ctor: ChatPromptValue },
  // Its constructor takes the string itself, not { value }.
  { id: ["langchain_core", "prompt_values", "StringPromptValue"], ctor: StringPromptValue, build: (kwargs) => new StringPromptValue(String(kwargs.value)) },
  { id: ["langchain_core", "prompt_values", "ImagePromptValue"], ctor: ImagePromptValue },
];

/** Built-in error classes rebuilt by name; any other name becomes an `Error` with that `name`. */
const ERROR_CTORS: Record<string, ErrorConstructor | undefined> = {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
};

const idKey = (id: readonly string[]): string => id.join("/");

interface ResolvedEntry {
  readonly id: readonly string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly ctor: new (kwargs: any) => unknown;
  /** Rebuilds the object from its kwargs when the constructor does not take them as they are. */
  readonly build?: (kwargs: Record<string, unknown>) => unknown;
}

/** Allowlist of LangChain classes, by constructor (fast path) and by stored id. */
class LangChainTable {
  readonly byCtor = new Map<unknown, ResolvedEntry>();
  readonly byKey = new Map<string, ResolvedEntry>();
  /** Constructors resolved through `lc_id` (e.g. a second copy of @langchain/core); null = not allowed. */
  readonly resolved = new WeakMap<object, ResolvedEntry | null>();

  constructor(extra: readonly LangChainClassEntry[]) {
    for (const entry of BUILTIN_LANGCHAIN_CLASSES) this.add(entry);
    extra.forEach((entry, i) => {
      if (
        !entry ||
        !Array.isArray(entry.id) ||
        entry.id.length === 0 ||
        !entry.id.every((part) => typeof part === "string" && part.length > 0)
      ) {
        throw new InvalidOptionsError(`langchainClasses[${i}].id`, "must be a non-empty array of non-empty strings");
      }
      if (typeof entry.ctor !== "function") {
        throw new InvalidOptionsError(`langchainClasses[${i}].ctor`, "must be a class");
      }
      if (this.byKey.has(idKey(entry.id)) || this.byCtor.has(entry.ctor)) {
        throw new InvalidOptionsError(`langchainClasses[${i}]`, `${entry.id.join(".")} is already registered`);
      }
      this.add(entry);
    });
  }

  private add(entry: LangChainClassEntry & Pick<ResolvedEntry, "build">): void {
    const resolved: ResolvedEntry = { id: Object.freeze([...entry.id]), ctor: entry.ctor, build: entry.build };
    this.byCtor.set(entry.ctor, resolved);
    this.byKey.set(idKey(entry.id), resolved);
  }

  /** The entry for a LangChain object being written, or undefined when it is not allowed. */
  lookup(obj: LcLike): ResolvedEntry | undefined {
    const ctor = (obj as { constructor?: unknown }).constructor;
    const direct = this.byCtor.get(ctor);
    if (direct) return direct;
    if (typeof ctor !== "function") return undefined;
    const cached = this.resolved.get(ctor);
    if (cached !== undefined) return cached ?? undefined;
    // Another copy of the same class (duplicate @langchain/core install): match by its id.
    const id = obj.lc_id;
    const byId =
      Array.isArray(id) && id.every((part) => typeof part === "string") ? this.byKey.get(idKey(id)) : undefined;
    this.resolved.set(ctor, byId ?? null);
    return byId;
  }
}

interface LcLike {
  lc_serializable?: unknown;
  lc_kwargs?: unknown;
  lc_id?: unknown;
  [key: string]: unknown;
}

/**
 * The constructor arguments of a LangChain object: exactly what `Serializable.toJSON()`
 * puts in `kwargs` (current field values for the keys of `lc_kwargs`, plus
 * `lc_attributes`), but without its JSON-specific escaping and key renaming, so
 * values such as Dates or Maps inside survive.
 */
function langChainKwargs(obj: LcLike): Record<string, unknown> | string {
  const source = obj.lc_kwargs;
  if (source === null || typeof source !== "object" || Array.isArray(source)) return "it has no lc_kwargs object";
  const kwargs = Object.create(null) as Record<string, unknown>;
  for (const key of Object.keys(source)) {
    kwargs[key] = key in obj ? obj[key] : (source as Record<string, unknown>)[key];
  }
  for (let proto = Object.getPrototypeOf(obj) as object | null; proto; proto = Object.getPrototypeOf(proto) as object | null) {
    const secrets: unknown = Reflect.get(proto, "lc_secrets", obj);
    if (secrets && typeof secrets === "object" && Object.keys(secrets).length > 0) {
      return "its class declares lc_secrets, which are never stored";
    }
    const attributes: unknown = Reflect.get(proto, "lc_attributes", obj);
    if (attributes && typeof attributes === "object") Object.assign(kwargs, attributes);
  }
  return kwargs;
}

/** Ends a write: `value` (found again by identity to name its path) cannot be encoded. */
class EncodeFailure extends Error {
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

/** Per-Encoder/Decoder context handed to the extension codec. */
interface Ctx {
  /** Extension nesting level of the Encoder/Decoder owning this context (0 = top level). */
  readonly level: number;
  /** Absolute depth of the extension value whose payload this level is encoding/decoding (0 at the top). */
  base: number;
  /** Encoding: library depth (1 = payload root) of the object just offered to the codec. */
  depth: number;
  /** Decoding: the Decoder owning this context (to read its stack height). */
  decoder: DecoderInternals | undefined;
  /** Largest output of this level's Encoder since it was created (to drop oversized buffers). */
  maxOutput: number;
  /** Encoding a value already turned into its JSON form (see `jsonForm`): payloads are turned too. */
  compat: boolean;
}

// The private @msgpack/msgpack 3.x members the hooks below use.
interface EncoderInternals {
  doEncode(object: unknown, depth: number): void;
  encodeString(value: string): void;
  encodeExtension(ext: ExtData): void;
  encodeNumberAsFloat(value: number): void;
}
interface DecoderInternals {
  pushArrayState(size: number): void;
  pushMapState(size: number): void;
  stack: { readonly length: number };
  view: DataView;
  pos: number;
}

/** The non-plain objects the encoder writes as an extension (see the table at the top). */
type InstanceKind = "date" | "bytes" | "typed" | "map" | "set" | "regexp" | "error" | "delta" | "langgraph" | "langchain" | "document";

/** `jsonForm` of a function or symbol: left out of an object, null in an array, refused as a whole value. */
const OMIT: unique symbol = Symbol("omit");

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

const UNDEFINED_EXT = new ExtData(EXT_UNDEFINED, new Uint8Array([0]));
const EMPTY = new Uint8Array(0);
const NIL = new Uint8Array([0xc0]);
/** Encoder buffers are kept for reuse up to this size, then dropped. */
const MAX_RETAINED_BUFFER = 1 << 20;

const isWellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === "function"
    ? (s) => (s as unknown as { isWellFormed(): boolean }).isWellFormed()
    : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

function patchEncoder(encoder: Encoder<Ctx>, ctx: Ctx): void {
  const internals = encoder as unknown as EncoderInternals;
  const original = internals.doEncode;
  const encodeString = internals.encodeString;
  if (
    typeof original !== "function" ||
    typeof encodeString !== "function" ||
    typeof internals.encodeExtension !== "function" ||
    typeof internals.encodeNumberAsFloat !== "function"
  ) {
    throw new Error("Unsupported @msgpack/msgpack version: Encoder internals changed (need 3.x)");
  }
  internals.doEncode = function doEncode(this: EncoderInternals, object: unknown, depth: number): void {
    switch (typeof object) {
      case "undefined":
        this.encodeExtension(UNDEFINED_EXT);
        return;
      case "number":
        if (object === 0 && 1 / object < 0) {
          this.encodeNumberAsFloat(object); // -0 (the library would write integer 0)
          return;
        }
        break;
      case "string":
        if (!isWellFormed(object)) {
          this.encodeExtension(new ExtData(EXT_ILL_FORMED_STRING, utf16Bytes(object)));
          return;
        }
        break;
      case "object":
        if (object !== null) {
          if (ctx.base + depth > MAX_DEPTH) {
            throw new EncodeFailure(object, `a value nested deeper than ${MAX_DEPTH} levels (circular reference?)`, true, !ctx.compat);
          }
          ctx.depth = depth;
        }
        break;
      default:
        break;
    }
    original.call(this, object, depth);
  };
  // String values never get here ill-formed (see above); object keys do. The library
  // writes strings longer than 50 UTF-16 units with TextEncoder, which would turn a lone
  // surrogate into U+FFFD: refuse such a key rather than change it. Shorter ones
  // round-trip exactly (the library's own UTF-8 code keeps lone surrogates).
  internals.encodeString = function encodeStringChecked(this: EncoderInternals, value: string): void {
    if (value.length > 50 && !isWellFormed(value)) {
      throw new EncodeFailure(value, "an object key containing a lone surrogate (longer than 50 UTF-16 units)", false, false);
    }
    encodeString.call(this, value);
  };
}

function patchDecoder(decoder: Decoder<Ctx>, ctx: Ctx): void {
  const internals = decoder as unknown as DecoderInternals;
  const pushArray = internals.pushArrayState;
  const pushMap = internals.pushMapState;
  if (typeof pushArray !== "function" || typeof pushMap !== "function" || !internals.stack) {
    throw new Error("Unsupported @msgpack/msgpack version: Decoder internals changed (need 3.x)");
  }
  ctx.decoder = internals;
  // Called right after a container header is read: refuse nesting beyond MAX_DEPTH and
  // length headers that promise more elements than there are bytes left (so a lying
  // header can never make the library preallocate a huge array).
  internals.pushArrayState = function pushArrayState(this: DecoderInternals, size: number): void {
    if (ctx.base + this.stack.length + 1 > MAX_DEPTH) throw new DeserializationError(`Data nested deeper than ${MAX_DEPTH} levels`);
    if (size > this.view.byteLength - this.pos) throw new DeserializationError(`Corrupt msgpack data: array length ${size} exceeds the data`);
    pushArray.call(this, size);
  };
  internals.pushMapState = function pushMapState(this: DecoderInternals, size: number): void {
    if (ctx.base + this.stack.length + 1 > MAX_DEPTH) throw new DeserializationError(`Data nested deeper than ${MAX_DEPTH} levels`);
    if (size * 2 > this.view.byteLength - this.pos) throw new DeserializationError(`Corrupt msgpack data: map size ${size} exceeds the data`);
    pushMap.call(this, size);
  };
}

function utf16Bytes(s: string): Uint8Array {
  const out = new Uint8Array(s.length * 2);
  for (let i = 0, j = 0; i < s.length; i++, j += 2) {
    const unit = s.charCodeAt(i);
    out[j] = unit & 0xff;
    out[j + 1] = unit >>> 8;
  }
  return out;
}

function bigintBytes(value: bigint): Uint8Array {
  const negative = value < 0n;
  let hex = (negative ? -value : value).toString(16);
  if (hex === "0") hex = "";
  else if (hex.length % 2 === 1) hex = `0${hex}`;
  const out = new Uint8Array(1 + hex.length / 2);
  out[0] = negative ? 1 : 0;
  for (let i = 1, j = 0; i < out.length; i++, j += 2) out[i] = parseInt(hex.slice(j, j + 2), 16);
  return out;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function corrupt(what: string): DeserializationError {
  return new DeserializationError(`Corrupt msgpack data: ${what}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (typeof value === "function") return `a function${value.name ? ` (${value.name})` : ""}`;
  if (typeof value === "symbol") return `a symbol (${String(value.description ?? "")})`;
  if (value !== null && typeof value === "object") {
    const ctor = (value as { constructor?: { name?: unknown } }).constructor;
    const name = typeof ctor === "function" && typeof ctor.name === "string" && ctor.name ? ctor.name : "an unknown class";
    return `an instance of ${name}`;
  }
  return `a ${typeof value}`;
}

interface EncoderSlot {
  encoder: Encoder<Ctx>;
  ctx: Ctx;
}
interface DecoderSlot {
  decoder: Decoder<Ctx>;
  ctx: Ctx;
}

/**
 * One set of reusable Encoder/Decoder instances, one per extension nesting level.
 * An extension payload is encoded by the next level's Encoder (the library's
 * instances are not reentrant) and copied once into its parent.
 */
class Engine implements ExtensionCodecType<Ctx> {
  busy = false;
  /** Set while encoding a value's JSON form: every extension payload is turned into its JSON form too. */
  private compat = false;
  private readonly encoders: EncoderSlot[] = [];
  private readonly decoders: DecoderSlot[] = [];

  constructor(
    private readonly langchain: LangChainTable,
    readonly strict: boolean,
  ) {}

  // ---- encoding ----

  private encoderAt(level: number): EncoderSlot {
    let slot = this.encoders[level];
    if (!slot) {
      const ctx: Ctx = { level, base: 0, depth: 0, decoder: undefined, maxOutput: 0, compat: false };
      const encoder = new Encoder<Ctx>({ extensionCodec: this, context: ctx, maxDepth: MAX_DEPTH + 1 });
      patchEncoder(encoder, ctx);
      slot = { encoder, ctx };
      this.encoders[level] = slot;
    }
    return slot;
  }

  /** Encodes `value`; with `compat`, the value is a JSON form (see {@link jsonForm}) and so are its payloads. */
  encodeValue(value: unknown, compat = false): Uint8Array {
    const root = this.encoderAt(0);
    root.ctx.base = 0;
    root.ctx.compat = compat;
    this.compat = compat;
    try {
      const out = root.encoder.encode(value);
      if (out.length > root.ctx.maxOutput) root.ctx.maxOutput = out.length;
      return out;
    } finally {
      // Do not keep a huge buffer alive because one checkpoint was huge.
      for (let level = 0; level < this.encoders.length; level++) {
        if ((this.encoders[level]?.ctx.maxOutput ?? 0) > MAX_RETAINED_BUFFER) this.encoders.length = level;
      }
    }
  }

  private payload(parent: Ctx, value: unknown): Uint8Array {
    const slot = this.encoderAt(parent.level + 1);
    slot.ctx.base = parent.base + parent.depth;
    slot.ctx.compat = this.compat;
    if (this.compat) value = this.jsonForm(value, "", [], slot.ctx.base);
    // Shared reference into the child's buffer: the parent copies it right away.
    const out = slot.encoder.encodeSharedRef(value);
    if (out.length > slot.ctx.maxOutput) slot.ctx.maxOutput = out.length;
    return out;
  }

  /** Called by the Encoder for every non-primitive value; null = encode as a plain array/map. */
  tryToEncode(object: unknown, ctx: Ctx): ExtData | null {
    if (typeof object !== "object" || object === null) {
      if (typeof object === "bigint") return new ExtData(EXT_BIGINT, bigintBytes(object));
      throw new EncodeFailure(object, describe(object));
    }
    const proto = Object.getPrototypeOf(object) as unknown;
    if (proto === Object.prototype || proto === null) {
      if (Object.prototype.hasOwnProperty.call(object, "__proto__")) {
        // The library refuses "__proto__" map keys on decode: store such objects as entries.
        const entries: unknown[] = [];
        for (const key of Object.keys(object)) entries.push(key, (object as Record<string, unknown>)[key]);
        return new ExtData(EXT_PROTO_KEY_OBJECT, this.payload(ctx, entries));
      }
      return null;
    }
    if (proto === Array.prototype || Array.isArray(object)) return null;
    return this.encodeInstance(object, ctx);
  }

  /** Which extension writes `object` (a non-plain, non-array object), or undefined: none does. */
  private kindOf(object: object): InstanceKind | undefined {
    if (object instanceof Date) return "date";
    if (object instanceof Uint8Array) return "bytes";
    if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) return typedKind(object) === undefined ? undefined : "typed";
    if (object instanceof Map) return "map";
    if (object instanceof Set) return "set";
    if (object instanceof RegExp) return "regexp";
    if (object instanceof Error) return "error";
    const record = object as LcLike & { lg_name?: unknown; toJSON?: unknown };
    if (record.lg_name === "DeltaSnapshot") return "delta";
    if (typeof record.lg_name === "string") return typeof record.toJSON === "function" ? "langgraph" : undefined;
    if ("lc_serializable" in record) return "langchain";
    if (object.constructor === Document) return "document";
    return undefined;
  }

  private encodeInstance(object: object, ctx: Ctx): ExtData {
    const kind = this.kindOf(object);
    if (kind === undefined) throw new EncodeFailure(object, describe(object));
    if (this.strict) this.checkExact(object, kind);
    switch (kind) {
      case "date":
        return Number.isNaN((object as Date).getTime())
          ? new ExtData(EXT_INVALID_DATE, EMPTY)
          : new ExtData(EXT_DATE, encodeTimestampExtension(object as Date) as Uint8Array);
      case "bytes":
        return new ExtData(EXT_BYTES, object as Uint8Array);
      case "typed":
        return new ExtData(EXT_TYPED, typedBytes(object as ArrayBufferView | ArrayBuffer));
      case "map": {
        const entries: unknown[] = [];
        for (const [key, value] of object as Map<unknown, unknown>) entries.push(key, value);
        return new ExtData(EXT_MAP, this.payload(ctx, entries));
      }
      case "set":
        return new ExtData(EXT_SET, this.payload(ctx, [...(object as Set<unknown>)]));
      case "regexp":
        return new ExtData(EXT_REGEXP, this.payload(ctx, [(object as RegExp).source, (object as RegExp).flags]));
      case "error":
        return new ExtData(EXT_ERROR, this.payload(ctx, errorPayload(object as Error)));
      case "delta":
        return new ExtData(EXT_DELTA_SNAPSHOT, this.payload(ctx, (object as DeltaSnapshot).value));
      case "langgraph":
        return new ExtData(EXT_LANGGRAPH, this.payload(ctx, ((object as { toJSON: () => unknown }).toJSON)()));
      case "langchain": {
        const [id, kwargs] = this.langChainParts(object as LcLike);
        return new ExtData(EXT_LANGCHAIN, this.payload(ctx, [id, kwargs]));
      }
      case "document": {
        const doc = object as Document;
        return new ExtData(EXT_DOCUMENT, this.payload(ctx, [doc.pageContent, doc.metadata, doc.id]));
      }
    }
  }

  /** Strict mode: refuse a subclass (or a Buffer) that would come back as its base class. */
  private checkExact(object: object, kind: InstanceKind): void {
    const proto = Object.getPrototypeOf(object) as unknown;
    let expected: unknown;
    switch (kind) {
      case "date":
        expected = Date.prototype;
        break;
      case "bytes":
        expected = Uint8Array.prototype;
        break;
      case "typed": {
        const code = typedKind(object as ArrayBufferView | ArrayBuffer)!;
        expected = code === TYPED_KINDS.ArrayBuffer ? ArrayBuffer.prototype : TYPED_CTORS[code]?.prototype;
        break;
      }
      case "map":
        expected = Map.prototype;
        break;
      case "set":
        expected = Set.prototype;
        break;
      case "regexp":
        expected = RegExp.prototype;
        break;
      case "error": {
        const name = (object as { constructor?: { name?: unknown } }).constructor?.name;
        expected = typeof name === "string" && Object.prototype.hasOwnProperty.call(ERROR_CTORS, name) ? ERROR_CTORS[name]?.prototype : undefined;
        break;
      }
      default:
        return; // LangGraph and LangChain objects, DeltaSnapshot, Document: checked by their own rules.
    }
    if (proto !== expected) {
      throw new EncodeFailure(object, `${describe(object)}, which would come back as its base class (strict mode)`, false, false);
    }
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
  jsonForm(value: unknown, key: string, ancestors: object[], depth: number, fromToJSON = false): unknown {
    if (typeof value === "function" || typeof value === "symbol") return OMIT;
    if (value === null || typeof value !== "object") return value;
    if (ancestors.includes(value)) return "[Circular]";
    if (depth > MAX_DEPTH) throw new EncodeFailure(value, `a value nested deeper than ${MAX_DEPTH} levels`, true, false);
    if (Array.isArray(value)) {
      ancestors.push(value);
      const out = value.map((item: unknown, i) => {
        const form = this.jsonForm(item, String(i), ancestors, depth + 1);
        return form === OMIT ? null : form;
      });
      ancestors.pop();
      return out;
    }
    const proto = Object.getPrototypeOf(value) as unknown;
    const plain = proto === Object.prototype || proto === null;
    if (!plain) {
      const kind = this.kindOf(value);
      if (kind !== undefined && (kind !== "langchain" || this.allowedLangChain(value as LcLike))) return value;
      const boxed = unbox(value);
      if (boxed !== OMIT) return boxed;
    }
    const toJSON = fromToJSON ? undefined : (value as { toJSON?: unknown }).toJSON;
    const json: unknown = typeof toJSON === "function" ? toJSON.call(value, key) : value;
    if (json !== value) {
      ancestors.push(value);
      const form = this.jsonForm(json, key, ancestors, depth, true);
      ancestors.pop();
      return form;
    }
    // A plain object, or the own enumerable properties of an instance (as JSON.stringify).
    const out = (proto === null ? Object.create(null) : {}) as Record<string, unknown>;
    ancestors.push(value);
    for (const k of Object.keys(value)) {
      const form = this.jsonForm((value as Record<string, unknown>)[k], k, ancestors, depth + 1);
      if (form !== OMIT) Object.defineProperty(out, k, { value: form, writable: true, enumerable: true, configurable: true });
    }
    ancestors.pop();
    return out;
  }

  private allowedLangChain(value: LcLike): boolean {
    try {
      this.langChainParts(value);
      return true;
    } catch {
      return false;
    }
  }

  /** [stored id, kwargs] of an allowed LangChain object; throws EncodeFailure otherwise. */
  langChainParts(obj: LcLike): [readonly string[], Record<string, unknown>] {
    const name = describe(obj);
    if (obj.lc_serializable !== true) throw new EncodeFailure(obj, `${name}, a LangChain object that is not serializable`);
    const entry = this.langchain.lookup(obj);
    if (!entry) {
      const id = Array.isArray(obj.lc_id) ? obj.lc_id.join(".") : name;
      throw new EncodeFailure(
        obj,
        `${name} (LangChain id ${id}), which is not in the allowlist; register it with the langchainClasses option`,
      );
    }
    const kwargs = langChainKwargs(obj);
    if (typeof kwargs === "string") throw new EncodeFailure(obj, `${name}: ${kwargs}`);
    return [entry.id, kwargs];
  }

  // ---- decoding ----

  private decoderAt(level: number): DecoderSlot {
    let slot = this.decoders[level];
    if (!slot) {
      const ctx: Ctx = { level, base: 0, depth: 0, decoder: undefined, maxOutput: 0, compat: false };
      const decoder = new Decoder<Ctx>({ extensionCodec: this, context: ctx });
      patchDecoder(decoder, ctx);
      slot = { decoder, ctx };
      this.decoders[level] = slot;
    }
    return slot;
  }

  decodeValue(bytes: Uint8Array): unknown {
    const root = this.decoderAt(0);
    root.ctx.base = 0;
    try {
      return root.decoder.decode(bytes);
    } finally {
      // Drop the references the decoders keep to the input.
      for (const slot of this.decoders) {
        try {
          slot.decoder.decode(NIL);
        } catch {
          /* cannot happen */
        }
      }
    }
  }

  private decodePayload(parent: Ctx, data: Uint8Array): unknown {
    const depth = parent.base + (parent.decoder?.stack.length ?? 0) + 1; // depth of the extension value
    if (depth > MAX_DEPTH) throw new DeserializationError(`Data nested deeper than ${MAX_DEPTH} levels`);
    const slot = this.decoderAt(parent.level + 1);
    slot.ctx.base = depth;
    return slot.decoder.decode(data);
  }

  /** Called by the Decoder for every extension value. */
  decode(data: Uint8Array, type: number, ctx: Ctx): unknown {
    switch (type) {
      case EXT_UNDEFINED:
        if (data.length !== 1 || data[0] !== 0) throw corrupt("bad undefined extension");
        return undefined;
      case EXT_DATE:
        return decodeTimestampExtension(data);
      case EXT_INVALID_DATE:
        if (data.length !== 0) throw corrupt("bad invalid-date extension");
        return new Date(Number.NaN);
      case EXT_BIGINT:
        return decodeBigint(data);
      case EXT_BYTES:
        return new Uint8Array(data); // a copy: never alias the input buffer
      case EXT_TYPED:
        return decodeTyped(data);
      case EXT_ILL_FORMED_STRING:
        return decodeUtf16(data);
      case EXT_MAP: {
        const entries = this.decodePayload(ctx, data);
        if (!Array.isArray(entries) || entries.length % 2 !== 0) throw corrupt("bad Map extension");
        const map = new Map<unknown, unknown>();
        for (let i = 0; i < entries.length; i += 2) map.set(entries[i], entries[i + 1]);
        return map;
      }
      case EXT_SET: {
        const values = this.decodePayload(ctx, data);
        if (!Array.isArray(values)) throw corrupt("bad Set extension");
        return new Set(values);
      }
      case EXT_REGEXP: {
        const parts = this.decodePayload(ctx, data);
        if (!Array.isArray(parts) || parts.length !== 2 || typeof parts[0] !== "string" || typeof parts[1] !== "string") {
          throw corrupt("bad RegExp extension");
        }
        try {
          return new RegExp(parts[0], parts[1]);
        } catch (cause) {
          throw new DeserializationError("Corrupt msgpack data: invalid RegExp", { cause });
        }
      }
      case EXT_ERROR:
        return decodeError(this.decodePayload(ctx, data));
      case EXT_LANGCHAIN:
        return this.decodeLangChain(this.decodePayload(ctx, data));
      case EXT_LANGGRAPH: {
        const value = this.decodePayload(ctx, data);
        if (!isPlainObject(value)) throw corrupt("bad LangGraph extension");
        return value;
      }
      case EXT_DELTA_SNAPSHOT:
        return new DeltaSnapshot(this.decodePayload(ctx, data));
      case EXT_PROTO_KEY_OBJECT: {
        const entries = this.decodePayload(ctx, data);
        if (!Array.isArray(entries) || entries.length % 2 !== 0) throw corrupt("bad object extension");
        const object: Record<string, unknown> = {};
        for (let i = 0; i < entries.length; i += 2) {
          const key: unknown = entries[i];
          if (typeof key !== "string") throw corrupt("bad object extension key");
          Object.defineProperty(object, key, { value: entries[i + 1], writable: true, enumerable: true, configurable: true });
        }
        return object;
      }
      case EXT_DOCUMENT: {
        const parts = this.decodePayload(ctx, data);
        if (!Array.isArray(parts) || parts.length !== 3 || typeof parts[0] !== "string" || !isPlainObject(parts[1])) {
          throw corrupt("bad Document extension");
        }
        const id: unknown = parts[2];
        if (id !== undefined && typeof id !== "string") throw corrupt("bad Document id");
        return new Document({ pageContent: parts[0], metadata: parts[1], id });
      }
      default:
        throw new DeserializationError(`Unknown msgpack extension type ${type}`);
    }
  }

  private decodeLangChain(parts: unknown): unknown {
    if (!Array.isArray(parts) || parts.length !== 2 || !Array.isArray(parts[0]) || !isPlainObject(parts[1])) {
      throw corrupt("bad LangChain extension");
    }
    const id = parts[0] as unknown[];
    if (!id.every((part) => typeof part === "string")) throw corrupt("bad LangChain id");
    const entry = this.langchain.byKey.get(idKey(id as string[]));
    if (!entry) throw new DeserializationError(`LangChain class ${id.join(".")} is not in the allowlist`);
    try {
      return entry.build ? entry.build(parts[1]) : new entry.ctor(parts[1]);
    } catch (cause) {
      throw new DeserializationError(`Could not rebuild LangChain ${id.join(".")}`, { cause });
    }
  }
}

function errorPayload(error: Error): unknown[] {
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

function decodeError(parts: unknown): Error {
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

function decodeBigint(data: Uint8Array): bigint {
  const sign = data[0];
  if (data.length === 0 || (sign !== 0 && sign !== 1)) throw corrupt("bad bigint extension");
  let hex = "";
  for (let i = 1; i < data.length; i++) hex += HEX[data[i] as number];
  const magnitude = hex === "" ? 0n : BigInt(`0x${hex}`);
  return sign === 1 ? -magnitude : magnitude;
}

/** The ext 10 kind byte of a typed array, ArrayBuffer or DataView; undefined for one it does not know (e.g. Float16Array). */
function typedKind(object: ArrayBufferView | ArrayBuffer): number | undefined {
  const tag = (object as { [Symbol.toStringTag]?: unknown })[Symbol.toStringTag];
  return typeof tag === "string" && Object.prototype.hasOwnProperty.call(TYPED_KINDS, tag) ? TYPED_KINDS[tag as TypedKindName] : undefined;
}

function typedBytes(object: ArrayBufferView | ArrayBuffer): Uint8Array {
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

function decodeTyped(data: Uint8Array): unknown {
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

function decodeUtf16(data: Uint8Array): string {
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

// ---- naming the path of a value that cannot be written (only runs after a failure) ----

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const MAX_PATH_SEGMENTS = 12;

function formatKey(key: unknown): string {
  if (typeof key === "string") return IDENTIFIER.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  if (typeof key === "number" || typeof key === "boolean" || key === null || key === undefined) return `[${String(key)}]`;
  return "[…]";
}

function formatMapKey(key: unknown): string {
  if (typeof key === "string") return JSON.stringify(key);
  if (typeof key === "number" || typeof key === "boolean" || key === null || key === undefined) return String(key);
  if (typeof key === "bigint") return `${key}n`;
  return "…";
}

/** The children the encoder visits, with their path segments. */
function childrenOf(value: unknown, engine: Engine): Array<[string, unknown]> {
  if (value === null || typeof value !== "object") return [];
  if (Array.isArray(value)) return value.map((item, i) => [`[${i}]`, item]);
  const proto = Object.getPrototypeOf(value) as unknown;
  const record = value as Record<string, unknown>;
  if (proto === Object.prototype || proto === null) return Object.keys(record).map((key) => [formatKey(key), record[key]]);
  try {
    if (value instanceof Map) {
      const out: Array<[string, unknown]> = [];
      let i = 0;
      for (const [key, item] of value) {
        out.push([`.keys()[${i++}]`, key], [`.get(${formatMapKey(key)})`, item]);
      }
      return out;
    }
    if (value instanceof Set) return [...value].map((item, i) => [`.values()[${i}]`, item]);
    if (value instanceof Error) return Object.keys(record).map((key) => [formatKey(key), record[key]] as [string, unknown]).concat("cause" in value ? [[".cause", value.cause]] : []);
    if (record.lg_name === "DeltaSnapshot") return [[".value", record.value]];
    if (typeof record.lg_name === "string" && typeof record.toJSON === "function") {
      const json = (record.toJSON as () => unknown).call(value);
      return json !== null && typeof json === "object" ? Object.entries(json).map(([key, item]) => [formatKey(key), item]) : [];
    }
    if ("lc_serializable" in record) {
      const [, kwargs] = engine.langChainParts(record);
      return Object.keys(kwargs).map((key) => [formatKey(key), kwargs[key]]);
    }
    if (value.constructor === Document) return [[".metadata", (value as Document).metadata]];
  } catch {
    return [];
  }
  return [];
}

/** Path (from `$`) of `target` inside `root`, or of the first value nested too deep. */
function findPath(root: unknown, target: unknown, tooDeep: boolean, engine: Engine): string | undefined {
  const stack: Array<{ value: unknown; path: string[] }> = [{ value: root, path: [] }];
  let visited = 0;
  while (stack.length > 0 && visited++ < 1_000_000) {
    const { value, path } = stack.pop()!;
    if (tooDeep ? path.length >= MAX_DEPTH : Object.is(value, target)) {
      const shown = path.length > MAX_PATH_SEGMENTS ? [...path.slice(0, MAX_PATH_SEGMENTS), `…(${path.length - MAX_PATH_SEGMENTS} more)`] : path;
      return `$${shown.join("")}`;
    }
    if (path.length > MAX_DEPTH) continue;
    const children = childrenOf(value, engine);
    for (let i = children.length - 1; i >= 0; i--) {
      const [segment, child] = children[i]!;
      stack.push({ value: child, path: [...path, segment] });
    }
  }
  return undefined;
}

/**
 * The default serializer of the saver: msgpack with a fixed extension table.
 *
 * Round-trips exactly: `undefined` (also as an object value or array item),
 * `null`, NaN, ±Infinity, -0, strings (also with lone surrogates), nested
 * arrays and objects (including keys `__proto__`, `constructor`, `prototype`,
 * which come back as own data properties), `Uint8Array` and the other typed
 * arrays, `ArrayBuffer`, `DataView`, `Date` (millisecond precision; also an
 * invalid Date), `Map`, `Set`, `bigint`, `RegExp`, built-in `Error` classes,
 * LangChain messages (`HumanMessage`, `AIMessage`, `ToolMessage`, ..., and
 * their chunks), prompt values and `Document` as instances of their class,
 * `DeltaSnapshot`, and LangGraph `Send` / `Command` / `Overwrite` (in their
 * `toJSON()` form, which LangGraph accepts back).
 *
 * Everything else `JsonPlusSerializer` accepts is stored as it would store it
 * (class instances as their `toJSON()` result or own properties, a `URL` as its
 * href, functions left out of objects, a cycle as `"[Circular]"`); a subclass
 * of a supported class (`Buffer`, a custom `Error`) comes back as the base
 * class. With `strict: true` all of these throw a {@link SerializationError}
 * naming where the value is (`path`, e.g. `$.items[2].link`). In both modes a
 * function as the whole value and nesting deeper than {@link MAX_DEPTH} throw.
 * Reading corrupt, truncated or unknown data throws
 * {@link DeserializationError}; decoding only ever builds plain data and the
 * allowlisted classes above, so stored bytes cannot run arbitrary constructors.
 *
 * `loadsTyped("json" | "bytes", ...)` reads values written by LangGraph's
 * `JsonPlusSerializer` (for example by `@langchain/langgraph-checkpoint-postgres`).
 *
 * @example
 * ```ts
 * import { HumanMessage } from "@langchain/core/messages";
 * import { MsgpackSerializer } from "langgraph-checkpoint-pg";
 *
 * const serde = new MsgpackSerializer();
 * const [type, bytes] = await serde.dumpsTyped({ messages: [new HumanMessage("hi")], seen: new Set([1]) });
 * // type === "msgpack"
 * const state = await serde.loadsTyped(type, bytes);
 * state.messages[0] instanceof HumanMessage; // true
 * state.seen instanceof Set; // true
 *
 * // Refuse anything that would not come back exactly:
 * const saver = new PostgresSaver(pool, { serde: new MsgpackSerializer({ strict: true }) });
 * ```
 */
export class MsgpackSerializer implements SerializerProtocol {
  readonly #langchain: LangChainTable;
  readonly #engine: Engine;
  readonly #strict: boolean;

  constructor(options: MsgpackSerializerOptions = {}) {
    if (options.strict !== undefined && typeof options.strict !== "boolean") throw new InvalidOptionsError("strict", "expected a boolean");
    this.#langchain = new LangChainTable(options.langchainClasses ?? []);
    this.#strict = options.strict ?? false;
    this.#engine = new Engine(this.#langchain, this.#strict);
  }

  /** True when built with `strict: true`. */
  get strict(): boolean {
    return this.#strict;
  }

  /** Encodes any supported value; always returns the type tag `"msgpack"`. */
  async dumpsTyped(data: unknown): Promise<[string, Uint8Array]> {
    return ["msgpack", this.#encode(data)];
  }

  /**
   * Decodes a value written by {@link dumpsTyped} (`"msgpack"`), by
   * LangGraph's `JsonPlusSerializer` (`"json"`, `"bytes"`), or, in a database
   * adopted from the Python saver, plain values of its serializer
   * (`"msgpack-py"`, `"null"`, `"bytearray"`).
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async loadsTyped(type: string, data: Uint8Array | string): Promise<any> {
    switch (type) {
      case "msgpack":
        if (!(data instanceof Uint8Array)) {
          throw new DeserializationError(`msgpack data must be bytes, got ${typeof data === "string" ? "a string" : describe(data)}`);
        }
        return this.#decode(data);
      case "json":
        // Our own reader, not JsonPlusSerializer's: LangChain records only from
        // the allowlist, "__proto__" keys as data, any size (see jsonplus.ts).
        return readJsonPlus(typeof data === "string" ? data : new TextDecoder().decode(data), (id) => this.#langchain.byKey.get(idKey(id))?.ctor);
      case "bytes":
        return typeof data === "string" ? new TextEncoder().encode(data) : data;
      // Written by the Python saver, in a database adopted from it (see pyserde.ts).
      case PY_MSGPACK_TYPE:
      case "null":
      case "bytearray":
        return loadsPython(type, data);
      default:
        throw new DeserializationError(`Unknown serialization type ${JSON.stringify(type)}`);
    }
  }

  #encode(data: unknown): Uint8Array {
    // The Encoders are not reentrant; a getter that itself serializes gets a fresh set.
    const engine = this.#engine.busy ? new Engine(this.#langchain, this.#strict) : this.#engine;
    engine.busy = true;
    try {
      try {
        return engine.encodeValue(data);
      } catch (error) {
        // Not strict: what msgpack cannot write as it is gets written as LangGraph's
        // JSON serializer would write it. Only after a failure, so values that need
        // none of this pay nothing for it.
        if (!(error instanceof EncodeFailure) || !error.fixable || this.#strict) throw error;
        const form = engine.jsonForm(data, "", [], 0);
        if (form === OMIT) throw new EncodeFailure(data, describe(data), false, false);
        return engine.encodeValue(form, true);
      }
    } catch (error) {
      if (error instanceof EncodeFailure) {
        let path: string | undefined;
        try {
          path = findPath(data, error.value, error.tooDeep, engine);
        } catch {
          path = undefined;
        }
        throw new SerializationError(`Cannot serialize ${error.reason}${path ? ` at ${path}` : ""}`, { path });
      }
      if (error instanceof SerializationError) throw error;
      const message = error instanceof Error ? error.message : String(error);
      throw new SerializationError(`Cannot serialize value: ${message}`, { cause: error });
    } finally {
      engine.busy = false;
    }
  }

  #decode(data: Uint8Array): unknown {
    const engine = this.#engine.busy ? new Engine(this.#langchain, this.#strict) : this.#engine;
    engine.busy = true;
    try {
      return engine.decodeValue(data);
    } catch (error) {
      if (error instanceof DeserializationError) throw error;
      const message = error instanceof DecodeError || error instanceof RangeError ? error.message : String(error);
      throw new DeserializationError(`Corrupt msgpack data: ${message}`, { cause: error });
    } finally {
      engine.busy = false;
    }
  }
}
