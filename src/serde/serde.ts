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
 * |  10 | other typed array, `ArrayBuffer`, `DataView` | byte 0: kind (`TYPED_KINDS`, ext.ts); then the raw bytes, little-endian |
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
 * `JsonPlusSerializer` would write them, as plain data (see jsonform.ts); in
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
 * lone surrogates, a string's leading U+FEFF (its decoder drops it from strings
 * over 200 bytes), a depth limit on decode, or a sanity check of array length
 * headers; those few hooks are installed on our own Encoder/Decoder instances
 * (see hooks.ts), which verify at construction time that
 * the library still has the internals they wrap. The codec itself is
 * engine.ts; the other files of this folder that it uses are listed in
 * index.ts.
 */
import { DecodeError } from "@msgpack/msgpack";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { DeserializationError, InvalidOptionsError, SerializationError } from "../errors.js";
import { Engine } from "./engine.js";
import { EncodeFailure, MAX_DEPTH, describe } from "./ext.js";
import { JsonForm, OMIT } from "./jsonform.js";
import { readJsonPlus } from "./jsonplus.js";
import { LangChainTable, idKey, type LangChainClassEntry } from "./langchain.js";
import { findPath } from "./paths.js";
import { PY_MSGPACK_TYPE, loadsPython } from "./pyserde.js";

export { MAX_DEPTH };
export type { LangChainClassEntry };

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
   * stored as LangGraph's JSON serializer would store them (see the
   * serialization table in docs/serialization.md).
   */
  strict?: boolean;
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
/**
 * An upper bound of the bytes msgpack (with the hooks of hooks.ts) writes for `value`, counted up to
 * `limit`; Infinity for a value it does not bound. A string: its header (at most 5 bytes) and 3 bytes
 * per UTF-16 unit (an ill-formed one is an extension of 2 bytes a unit, behind at most 6); a number
 * at most 9; undefined an extension of 3; an array its header (at most 5) and its items.
 */
function sizeBound(value: unknown, limit: number, depth: number): number {
  switch (typeof value) {
    case "string":
      return 3 * value.length + 6;
    case "number":
      return 9;
    case "boolean":
      return 1;
    case "undefined":
      return 3;
    case "object": {
      if (value === null) return 1;
      if (depth >= 4 || !Array.isArray(value) || Object.getPrototypeOf(value) !== Array.prototype) return Infinity;
      let n = 5;
      for (let i = 0; i < value.length && n < limit; i++) n += sizeBound(value[i], limit - n, depth + 1);
      return n;
    }
    default:
      return Infinity;
  }
}

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
   * {@link dumpsTyped} for a value msgpack writes as it is; undefined when
   * writing it needs LangGraph's JSON form (a cycle, a function, an instance
   * msgpack has no form for), which depends on where the value sits: a cycle
   * through what contains it, a function that is null in an array. Element
   * storage (saver/stored.ts) then keeps the value inside its whole container,
   * so it reads back as the container would. Strict mode throws as dumpsTyped.
   */
  async dumpsTypedExact(data: unknown): Promise<[string, Uint8Array] | undefined> {
    if (this.#strict || this.#engine.busy) return this.dumpsTyped(data);
    const engine = this.#engine;
    engine.busy = true;
    let fixable = false;
    try {
      return ["msgpack", engine.encodeValue(data)];
    } catch (error) {
      fixable = error instanceof EncodeFailure && error.fixable;
    } finally {
      engine.busy = false;
    }
    // Not writable as it is: undefined, or the error dumpsTyped gives (with its path).
    return fixable ? undefined : this.dumpsTyped(data);
  }

  /**
   * Whether {@link dumpsTyped} certainly writes `value` in fewer than `limit` bytes, from an upper
   * bound of each part: strings, numbers, booleans, null, undefined and arrays of them (for any other
   * value: false, without looking into it, nor calling any getter). Stops counting at `limit`.
   */
  fitsUnder(value: unknown, limit: number): boolean {
    return sizeBound(value, limit, 0) < limit;
  }

  /**
   * {@link dumpsTypedExact} for each of `values` in one synchronous pass: `visit` gets each one's
   * bytes, a view valid only until it returns. True when every value was written; false when one
   * is not writable as it is (as dumpsTypedExact's undefined); undefined when this pass cannot say
   * (strict mode, the encoder busy, or a value dumpsTyped refuses: call dumpsTypedExact on each,
   * which gives its error).
   */
  dumpsEachExact(values: readonly unknown[], visit: (bytes: Uint8Array, i: number) => void): boolean | undefined {
    if (this.#strict || this.#engine.busy) return undefined;
    const engine = this.#engine;
    engine.busy = true;
    try {
      engine.encodeEach(values, visit);
      return true;
    } catch (error) {
      return error instanceof EncodeFailure && error.fixable ? false : undefined;
    } finally {
      engine.busy = false;
    }
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
        // The default TextDecoder drops a byte-order mark before the JSON text, as
        // JsonPlusSerializer's does; a value's U+FEFF is inside quotes and stays.
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
        const form = new JsonForm(engine).of(data, "", 0);
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
