/** A value that could not be written or read back. */
import { CheckpointerError } from "./base.js";

/**
 * A value could not be encoded (a function as the whole value, nesting deeper
 * than the serializer allows; in strict mode anything that would not come back
 * exactly, such as a class instance). Nothing was written.
 *
 * @example
 * ```ts
 * await new MsgpackSerializer({ strict: true }).dumpsTyped({ link: new URL("https://x.dev") });
 * // throws SerializationError, path "$.link"
 * ```
 */
export class SerializationError extends CheckpointerError {
  /** The saver input that held the value, e.g. `put checkpoint.channel_values["messages"]` (set by the saver). */
  readonly field: string | undefined;
  /** Where inside the value, e.g. `$.items[2].link`, when the serializer could tell. */
  readonly path: string | undefined;
  constructor(message: string, options?: { cause?: unknown; field?: string; path?: string }) {
    super("SERIALIZATION_FAILED", options?.field === undefined ? message : `${options.field}: ${message}`, { cause: options?.cause });
    this.field = options?.field;
    this.path = options?.path;
  }
}

/**
 * Stored bytes could not be decoded into an allowed value (corrupt data, an
 * unknown type tag or extension, a type outside the allowlist).
 *
 * @example
 * ```ts
 * await serde.loadsTyped("msgpack", new Uint8Array([0xc1])); // throws DeserializationError
 * ```
 */
export class DeserializationError extends CheckpointerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("DESERIALIZATION_FAILED", message, options);
  }
}
