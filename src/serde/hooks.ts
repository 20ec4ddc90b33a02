/**
 * The few hooks installed on our own @msgpack/msgpack Encoder and Decoder
 * instances, for what the library cannot express: `undefined`, `-0`, lone
 * surrogates, a string's leading U+FEFF, a depth limit on decode, and a sanity
 * check of array and map length headers. Each verifies at construction that
 * the library still has the internals it wraps.
 */
import { ExtData, type Decoder, type Encoder } from "@msgpack/msgpack";
import { DeserializationError } from "../errors.js";
import { EXT_ILL_FORMED_STRING, EXT_UNDEFINED, EncodeFailure, MAX_DEPTH, utf16Bytes } from "./ext.js";

/** Per-Encoder/Decoder context handed to the extension codec. */
export interface Ctx {
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
  /** Encoding a value already turned into its JSON form (see jsonform.ts): payloads are turned too. */
  compat: boolean;
}

// The private @msgpack/msgpack 3.x members the hooks below use.
export interface EncoderInternals {
  doEncode(object: unknown, depth: number): void;
  encodeString(value: string): void;
  encodeExtension(ext: ExtData): void;
  encodeNumberAsFloat(value: number): void;
}
export interface DecoderInternals {
  pushArrayState(size: number): void;
  pushMapState(size: number): void;
  decodeUtf8String(byteLength: number, headerOffset: number): string;
  stack: { readonly length: number };
  view: DataView;
  bytes: Uint8Array;
  pos: number;
}

const UNDEFINED_EXT = new ExtData(EXT_UNDEFINED, new Uint8Array([0]));

/**
 * Decodes a string that starts with U+FEFF as it is. The library decodes long
 * strings (over 200 bytes) with a default TextDecoder, which drops a leading
 * byte-order mark; `fatal`: bytes that are not UTF-8 (a short key with a lone
 * surrogate, which the library's own code decoded right) throw instead.
 */
const KEEP_BOM = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });

export const isWellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === "function"
    ? (s) => (s as unknown as { isWellFormed(): boolean }).isWellFormed()
    : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

export function patchEncoder(encoder: Encoder<Ctx>, ctx: Ctx): void {
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

export function patchDecoder(decoder: Decoder<Ctx>, ctx: Ctx): void {
  const internals = decoder as unknown as DecoderInternals;
  const pushArray = internals.pushArrayState;
  const pushMap = internals.pushMapState;
  const decodeUtf8String = internals.decodeUtf8String;
  if (typeof pushArray !== "function" || typeof pushMap !== "function" || typeof decodeUtf8String !== "function" || !internals.stack) {
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
  // Every string and key goes through here, whichever path the library takes
  // for its length; only those whose bytes start with EF BB BF are decoded again.
  internals.decodeUtf8String = function decodeUtf8StringKeepingBom(this: DecoderInternals, byteLength: number, headerOffset: number): string {
    const start = this.pos + headerOffset;
    const value = decodeUtf8String.call(this, byteLength, headerOffset);
    const b = this.bytes;
    if (byteLength < 3 || b[start] !== 0xef || b[start + 1] !== 0xbb || b[start + 2] !== 0xbf) return value;
    try {
      return KEEP_BOM.decode(b.subarray(start, start + byteLength));
    } catch {
      return value;
    }
  };
}
