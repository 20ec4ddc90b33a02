/**
 * The extension codec of the msgpack serializer: one set of reusable
 * Encoder/Decoder instances per extension nesting level, which writes each
 * value of the extension table (serde.ts) and reads it back. The bytes of
 * the simple extensions are ext.ts; the LangChain allowlist is langchain.ts.
 */
import { Decoder, Encoder, ExtData, decodeTimestampExtension, encodeTimestampExtension, type ExtensionCodecType } from "@msgpack/msgpack";
import { DeltaSnapshot } from "@langchain/langgraph-checkpoint";
import { Document } from "@langchain/core/documents";
import { DeserializationError } from "../errors.js";
import {
  EXT_BIGINT, EXT_BYTES, EXT_DATE, EXT_DELTA_SNAPSHOT, EXT_DOCUMENT, EXT_ERROR, EXT_ILL_FORMED_STRING, EXT_INVALID_DATE, EXT_LANGCHAIN,
  EXT_LANGGRAPH, EXT_MAP, EXT_PROTO_KEY_OBJECT, EXT_REGEXP, EXT_SET, EXT_TYPED, EXT_UNDEFINED, EncodeFailure, MAX_DEPTH, bigintBytes, corrupt,
  decodeBigint, decodeError, decodeTyped, decodeUtf16, describe, errorPayload, isPlainObject, typedBytes, typedKind, type InstanceKind,
} from "./ext.js";
import { patchDecoder, patchEncoder, type Ctx } from "./hooks.js";
import { JsonForm } from "./jsonform.js";
import { idKey, langChainKwargs, type LangChainTable, type LcLike } from "./langchain.js";
import { checkExact } from "./strict.js";

const EMPTY = new Uint8Array(0);
const NIL = new Uint8Array([0xc0]);
/** Encoder buffers are kept for reuse up to this size, then dropped. */
const MAX_RETAINED_BUFFER = 1 << 20;

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
export class Engine implements ExtensionCodecType<Ctx> {
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

  /** Encodes `value`; with `compat`, the value is a JSON form (see {@link JsonForm}) and so are its payloads. */
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
      this.dropHugeBuffers();
    }
  }

  /**
   * Encodes each of `values` alone, as {@link encodeValue} would, handing `visit` its bytes: a view
   * of the encoder's buffer, valid only until `visit` returns (no copy per value: the caller copies
   * what it keeps).
   */
  encodeEach(values: readonly unknown[], visit: (bytes: Uint8Array, i: number) => void): void {
    const root = this.encoderAt(0);
    root.ctx.compat = false;
    this.compat = false;
    try {
      for (let i = 0; i < values.length; i++) {
        root.ctx.base = 0;
        const out = root.encoder.encodeSharedRef(values[i]);
        if (out.length > root.ctx.maxOutput) root.ctx.maxOutput = out.length;
        visit(out, i);
      }
    } finally {
      this.dropHugeBuffers();
    }
  }

  /** Do not keep a huge buffer alive because one checkpoint was huge: the encoders from the first that grew one are made again. */
  private dropHugeBuffers(): void {
    for (let level = 0; level < this.encoders.length; level++) {
      if ((this.encoders[level]?.ctx.maxOutput ?? 0) > MAX_RETAINED_BUFFER) this.encoders.length = level;
    }
  }

  private payload(parent: Ctx, value: unknown): Uint8Array {
    const slot = this.encoderAt(parent.level + 1);
    slot.ctx.base = parent.base + parent.depth;
    slot.ctx.compat = this.compat;
    if (this.compat) value = new JsonForm(this).of(value, "", slot.ctx.base);
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
  kindOf(object: object): InstanceKind | undefined {
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
    if (this.strict) checkExact(object, kind);
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

  /** Whether a LangChain object is one the allowlist lets through. */
  allowedLangChain(value: LcLike): boolean {
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
