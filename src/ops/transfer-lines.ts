/**
 * The lines of an export file (JSON lines, transfer.ts), split from a byte
 * stream with each line bounded: `import` reads through here (cli/transfer.ts),
 * and so can code that reads an export before `importThread`. A line is
 * held as bytes until its newline and refused as soon as it passes the limit,
 * so a file never makes the reader hold more than the limit, whatever its
 * lines hold (issue 37: readline gathered a 600 MB line into one string until
 * V8 refused it, an uncaught RangeError; a 200 MB one peaked at 1.46 GB).
 */
import { InvalidOptionsError, PayloadTooLargeError } from "../errors.js";
import { ExportLineTooLongError, MAX_LINE_BYTES_CEILING } from "../errors.js";

/**
 * The longest line an import reads unless told otherwise, in bytes (256 MiB).
 * An export's largest record holds one value: a write's or a blob's (a
 * checkpoint's: its values without a version, and its metadata). The saver
 * refuses a value over `maxValueBytes`, 64 MiB by default, which base64 makes
 * 85.4 MiB, and an export with `--decoded` adds a readable view of it: this
 * limit leaves room for both, three times over. A saver with a larger
 * `maxValueBytes` writes larger records: raise the limit (`maxLineBytes`,
 * `import --max-line-bytes`), up to {@link MAX_LINE_BYTES_CEILING}.
 */
export const MAX_EXPORT_LINE_BYTES = 256 * 1024 ** 2;



/** One line of an export: its number (from 1) and its text, without the line break. */
export interface ExportLine {
  line: number;
  text: string;
}

/**
 * The lines of `input` (a file or stdin stream, decompressed if it was
 * gzipped, or any iterable of byte or string chunks), each as its number and
 * text. A line ends at `\n` (a `\r` before it is dropped too); the last may
 * have no line break. A line over `maxLineBytes` bytes (without its line
 * break; default {@link MAX_EXPORT_LINE_BYTES}) throws
 * {@link ExportLineTooLongError} once that many have been read; nothing after
 * it is read. Blank lines are yielded as they are.
 *
 * @example
 * ```ts
 * import { createReadStream } from "node:fs";
 * const records = [];
 * for await (const { text } of readExportLines(createReadStream("thread.jsonl"))) if (text.trim()) records.push(JSON.parse(text));
 * await importThread({ pool, records }); // one thread's records (an export of one thread)
 * ```
 */
export async function* readExportLines(input: AsyncIterable<Uint8Array | string>, options: { maxLineBytes?: number } = {}): AsyncGenerator<ExportLine> {
  const limit = options.maxLineBytes ?? MAX_EXPORT_LINE_BYTES;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LINE_BYTES_CEILING) {
    throw new InvalidOptionsError("maxLineBytes", `expected a positive integer up to ${MAX_LINE_BYTES_CEILING} (the longest string JavaScript holds)`);
  }
  // The line so far, as the chunks' bytes: decoded once whole (a character may span two chunks; a
  // newline byte is never part of one), and never more than the limit of them.
  const parts: Buffer[] = [];
  let held = 0;
  let line = 0;
  const text = (): string => {
    const s = (parts.length === 1 ? parts[0]! : Buffer.concat(parts, held)).toString("utf8");
    parts.length = 0;
    held = 0;
    return s.endsWith("\r") ? s.slice(0, -1) : s;
  };
  for await (const chunk of input) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    for (let start = 0; start < bytes.length; ) {
      const newline = bytes.indexOf(0x0a, start);
      const end = newline === -1 ? bytes.length : newline;
      held += end - start;
      if (held > limit) throw new ExportLineTooLongError(line + 1, held, limit);
      if (end > start) parts.push(bytes.subarray(start, end));
      if (newline === -1) break;
      line++;
      yield { line, text: text() };
      start = newline + 1;
    }
  }
  if (held > 0) yield { line: line + 1, text: text() };
}
