/** Bad input and bad options: refused before any SQL, naming the field. */
import { constants } from "node:buffer";
import { CheckpointerError } from "./base.js";

/**
 * Bad input to a saver method or function, detected before any SQL runs.
 * `field` names the offending input, e.g. `config.configurable.thread_id`.
 *
 * @example
 * ```ts
 * await saver.getTuple({ configurable: { thread_id: 42 } }); // throws InvalidInputError, field "config.configurable.thread_id"
 * ```
 */
export class InvalidInputError extends CheckpointerError {
  readonly field: string;
  constructor(field: string, problem: string) {
    super("INVALID_INPUT", `Invalid ${field}: ${problem}`);
    this.field = field;
  }
}

/**
 * A value, or everything one statement would carry, is larger than the saver
 * accepts: a single serialized value above `maxValueBytes`, or a whole `put` /
 * `putWrites` above what Postgres takes in one message (1 GiB, less 1 MiB
 * kept for keys and framing). Found after serialization and before any SQL;
 * nothing was written. Not retryable: the same input fails the same way.
 * `largest` names the biggest parts (channels, writes), largest first.
 *
 * @example
 * ```ts
 * try { await saver.put(config, checkpoint, metadata, versions); }
 * catch (e) { if (e instanceof PayloadTooLargeError) console.error(e.largest.map((p) => `${p.name}: ${p.bytes}`)); }
 * ```
 */
export class PayloadTooLargeError extends InvalidInputError {
  /** Serialized size of the value, or of the whole statement's payload. */
  readonly bytes: number;
  /** The limit it exceeded. */
  readonly limit: number;
  /** The largest parts, largest first (at most 5). */
  readonly largest: { name: string; bytes: number }[];
  constructor(field: string, problem: string, info: { bytes: number; limit: number; largest: { name: string; bytes: number }[] }) {
    super(field, problem);
    this.bytes = info.bytes;
    this.limit = info.limit;
    this.largest = info.largest;
  }
}

/**
 * Bad options passed to a constructor or a plain function (`migrate`, `prune`, ...).
 *
 * @example
 * ```ts
 * new PostgresSaver(pool, { schema: "" }); // throws InvalidOptionsError, option "schema"
 * ```
 */
export class InvalidOptionsError extends CheckpointerError {
  readonly option: string;
  constructor(option: string, problem: string) {
    super("INVALID_OPTIONS", `Invalid option ${option}: ${problem}`);
    this.option = option;
  }
}

/**
 * The most `maxLineBytes` may be: the longest string V8 holds (about 512 MiB).
 * A line has at least as many bytes as characters, so one within this limit
 * always fits in a string; a longer one cannot be read as JSON at all.
 */
export const MAX_LINE_BYTES_CEILING = constants.MAX_STRING_LENGTH;

/**
 * A line of an export is longer than the limit (`maxLineBytes`). Thrown as
 * soon as the line passes it, having held no more than the limit of it; the
 * message names the line and the limit, never its content. `bytes` is what
 * was read of the line when it was refused (it may be longer).
 *
 * @example
 * ```ts
 * try { for await (const { text } of readExportLines(stream)) records.push(JSON.parse(text)); }
 * catch (e) { if (e instanceof ExportLineTooLongError) console.error(`line ${e.line} is over ${e.limit} bytes`); }
 * ```
 */
export class ExportLineTooLongError extends PayloadTooLargeError {
  /** The line's number, from 1. */
  readonly line: number;
  constructor(line: number, bytes: number, limit: number) {
    super(
      `line ${line}`,
      `is longer than ${limit} bytes, the limit of a line (maxLineBytes); it was not read further. ` +
        `A record of a saver whose maxValueBytes is larger than the default needs a larger limit (at most ${MAX_LINE_BYTES_CEILING})`,
      { bytes, limit, largest: [{ name: `line ${line}`, bytes }] },
    );
    this.line = line;
  }
}
