/**
 * `export` and `import` as streams of JSON lines: one thread in memory at a
 * time, progress on a TTY, a file output that appears only when complete,
 * gzipped when its name ends in `.gz` (and a gzipped file read as such).
 */
import { createReadStream, createWriteStream, renameSync, rmSync } from "node:fs";
import type { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";
import { InvalidInputError } from "../errors.js";
import type { InspectOptions } from "../ops/inspect.js";
import { checkRecords, exportHeader, exportThread, importColumns, importThread, type ImportResult } from "../ops/transfer.js";
import { EXPORT_FORMAT, EXPORT_FORMAT_VERSION, type ExportHeader, type ExportRecord } from "../ops/transfer-format.js";
import { shown } from "../ops/transfer-check.js";
import { readExportLines } from "../ops/transfer-lines.js";
import { ExportLineTooLongError, MAX_LINE_BYTES_CEILING } from "../errors.js";
import { ExportFileError, NotFoundError } from "./exit.js";
import { progress } from "./format.js";

function write(out: Writable, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ok = out.write(text, (err) => (err ? reject(err) : undefined));
    if (ok) resolve();
    else out.once("drain", resolve);
  });
}

/**
 * Write the header and every record of `threads` to `output` (a file path, or
 * stdout when undefined). A file is written under a temporary name and renamed
 * when complete, so a failed export leaves no partial file; a name ending in
 * `.gz` is gzipped as it streams.
 */
export async function exportThreads(
  target: Omit<InspectOptions, "serde">,
  threads: string[] | (() => Promise<string[]>),
  output: string | undefined,
  where: string,
  options: { decoded?: boolean } = {},
): Promise<{ threads: number; records: number }> {
  const ids = typeof threads === "function" ? await threads() : threads;
  const tmp = output === undefined ? undefined : `${output}.tmp-${process.pid}`;
  const file: Writable = tmp === undefined ? process.stdout : createWriteStream(tmp, { flags: "wx" });
  const gzip = tmp !== undefined && output!.endsWith(".gz") ? createGzip() : undefined;
  const out: Writable = gzip ?? file;
  // The gzip stream feeds the file; a failure of either ends both, and fails the pending write.
  const compressed = gzip ? pipeline(gzip, file) : undefined;
  compressed?.catch(() => undefined);
  const bar = progress();
  let records = 0;
  try {
    if (tmp !== undefined) await new Promise<void>((resolve, reject) => file.once("open", () => resolve()).once("error", reject));
    await write(out, `${JSON.stringify(exportHeader())}\n`);
    for (const [i, threadId] of ids.entries()) {
      bar.update(`exporting thread ${i + 1}/${ids.length} (${records} records)`);
      const rows = await exportThread({ ...target, threadId, decoded: options.decoded ?? false });
      if (rows.length === 0) throw new NotFoundError(`Thread ${JSON.stringify(threadId)} not found in ${where}`);
      await write(out, rows.map((r) => `${JSON.stringify(r)}\n`).join(""));
      records += rows.length;
    }
    if (tmp !== undefined) {
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
      await compressed;
      renameSync(tmp, output!);
    }
    return { threads: ids.length, records };
  } catch (err) {
    if (tmp !== undefined) {
      out.destroy();
      file.destroy();
      rmSync(tmp, { force: true });
    }
    throw err;
  } finally {
    bar.done();
  }
}

/** gzip's first two bytes. */
const GZIP_MAGIC = Buffer.from([0x1f, 0x8b]);

/** The first two bytes of `stream` (fewer at its end), left in it to be read. */
async function peek(stream: Readable): Promise<Buffer> {
  for (;;) {
    // read(2) gives null until two bytes are there, or what is left at the end.
    const head = stream.read(2) as Buffer | null;
    if (head !== null) {
      stream.unshift(head);
      return head;
    }
    if (stream.readableEnded) return Buffer.alloc(0);
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        stream.off("readable", done).off("end", done).off("error", done);
        if (err) reject(err);
        else resolve();
      };
      stream.on("readable", done).on("end", done).on("error", done);
    });
  }
}

interface ThreadChunk {
  records: (ExportRecord | ExportHeader)[];
  /** Line number of each record, for messages. */
  lines: number[];
}

/**
 * Read an export file (or stdin) and call `onThread` once per complete thread, in order. Gzip data (by its
 * first bytes: `export -o x.jsonl.gz` writes it; `gzip -c` on stdin too) is decompressed as it streams.
 * A line over `maxLineBytes` stops the reading there (ops/transfer-lines.ts). Messages name lines, and
 * what a record holds only cut short (`shown`): they are read before any check of their size.
 */
async function scan(input: string | undefined, maxLineBytes: number | undefined, onThread: (chunk: ThreadChunk) => Promise<void>): Promise<void> {
  const file = input === undefined || input === "-" ? undefined : input;
  const stream = file === undefined ? process.stdin : createReadStream(file);
  const opened = new Promise<void>((resolve, reject) => {
    if (stream === process.stdin) resolve();
    else stream.once("open", () => resolve()).once("error", reject);
  });
  await opened.catch((err: NodeJS.ErrnoException) => {
    throw new ExportFileError(`cannot read ${input}: ${err.code === "ENOENT" ? "no such file" : err.message}`);
  });
  const head = await peek(stream).catch((err: Error) => {
    throw new ExportFileError(`cannot read ${input ?? "stdin"}: ${err.message}`);
  });
  const gunzip = head.equals(GZIP_MAGIC) ? createGunzip() : undefined;
  // pipe() does not pass the file's errors on to gunzip, and the lines are read from gunzip: a failure of
  // either stream is kept, ends the reading (gunzip destroyed with it), and is reported after it with the name.
  let failed: Error | undefined;
  const bytes: Readable = gunzip ? stream.pipe(gunzip) : stream;
  const sources: Readable[] = gunzip ? [stream, gunzip] : [stream];
  for (const s of sources) {
    s.on("error", (err: Error) => {
      failed ??= err;
      if (s !== bytes) bytes.destroy(err);
    });
  }
  let lineNo = 0;
  let header = false;
  let chunk: ThreadChunk = { records: [], lines: [] };
  let thread: string | undefined;
  try {
    for await (const { line, text } of readExportLines(bytes, { maxLineBytes })) {
      if (failed) break;
      lineNo = line;
      if (text.trim() === "") continue;
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(text) as Record<string, unknown>;
      } catch {
        throw new ExportFileError(`line ${lineNo}: not valid JSON`);
      }
      if (record === null || typeof record !== "object" || Array.isArray(record)) throw new ExportFileError(`line ${lineNo}: expected a JSON object`);
      if (record.kind === "header") {
        if (chunk.records.length > 0) throw new ExportFileError(`line ${lineNo}: a header inside thread ${shown(thread)} (its end record is missing)`);
        if (record.format !== EXPORT_FORMAT) throw new ExportFileError(`line ${lineNo}: format is not ${JSON.stringify(EXPORT_FORMAT)}`);
        if (typeof record.version !== "number" || record.version > EXPORT_FORMAT_VERSION) {
          throw new ExportFileError(`line ${lineNo}: export format version ${shown(record.version)} is newer than this code reads (${EXPORT_FORMAT_VERSION}); upgrade the package`);
        }
        header = true;
        continue;
      }
      if (!header) throw new ExportFileError(`line ${lineNo}: not a langgraph-checkpoint-pg export (the first record must be its header)`);
      if (chunk.records.length === 0) thread = typeof record.thread_id === "string" ? record.thread_id : undefined;
      else if (record.thread_id !== thread) {
        throw new ExportFileError(`line ${lineNo}: thread ${shown(record.thread_id)} starts before thread ${shown(thread)} ended (its end record is missing)`);
      }
      chunk.records.push(record as unknown as ExportRecord);
      chunk.lines.push(lineNo);
      if (record.kind === "end") {
        await onThread(chunk);
        chunk = { records: [], lines: [] };
      }
    }
  } catch (err) {
    if (err instanceof ExportLineTooLongError) {
      throw new ExportFileError(
        `line ${err.line}: longer than ${err.limit} bytes, the limit of a line; not read further. ` +
          `A record of a saver whose maxValueBytes is larger than the default needs a larger --max-line-bytes (at most ${MAX_LINE_BYTES_CEILING})`,
      );
    }
    if (err !== failed) throw err;
  } finally {
    if (gunzip) stream.unpipe(gunzip);
    if (stream !== process.stdin) stream.destroy();
  }
  if (failed) throw new ExportFileError(`cannot read ${file ?? "stdin"}${gunzip ? " (gzip)" : ""} after line ${lineNo}: ${failed.message}`);
  if (!header) throw new ExportFileError(`${input ?? "stdin"} is empty: not a langgraph-checkpoint-pg export`);
  if (chunk.records.length > 0) throw new ExportFileError(`line ${lineNo}: the file ends inside thread ${shown(thread)} (truncated export?)`);
}

/** `records[3].idx` → `line 17 (idx)`. */
function atLines(err: unknown, chunk: ThreadChunk): unknown {
  if (!(err instanceof InvalidInputError)) return err;
  const lines = (text: string) => text.replace(/records\[(\d+)\]/g, (_, i: string) => `line ${chunk.lines[Number(i)]}`);
  const m = /^Invalid records\[(\d+)\]\.?([^:]*): (.*)$/s.exec(err.message);
  if (m) return new ExportFileError(`line ${chunk.lines[Number(m[1])]}${m[2] ? ` (${m[2]})` : ""}: ${lines(m[3]!)}`);
  const whole = /^Invalid records: (.*)$/s.exec(err.message);
  return whole ? new ExportFileError(`line ${chunk.lines[chunk.lines.length - 1]}: ${lines(whole[1]!)}`) : err;
}

export interface ImportSummary {
  imported: ImportResult[];
  skipped: string[];
}

/**
 * Import every thread of an export, one transaction per thread. A file is
 * checked completely first (JSON, structure, every record's fields as the
 * target's columns will read them, the checkpoints' shape and the per-thread
 * counts), so a malformed file writes nothing; stdin is checked thread by
 * thread as it streams.
 */
export async function importThreads(
  target: Omit<InspectOptions, "serde">,
  input: string | undefined,
  options: Pick<Parameters<typeof importThread>[0], "ifExists" | "elementStorage" | "serde"> & { maxLineBytes?: number },
  on: { onPartial: (summary: ImportSummary) => void; onThread?: (result: ImportResult) => void },
): Promise<ImportSummary> {
  // Against the target's columns: every thread of a file is checked as its import will check it.
  const columns = await importColumns(target);
  const check = async (chunk: ThreadChunk) => {
    try {
      checkRecords(chunk.records, columns);
    } catch (err) {
      throw atLines(err, chunk);
    }
  };
  const { maxLineBytes, ...importOptions } = options;
  if (input !== undefined && input !== "-") await scan(input, maxLineBytes, check);
  const summary: ImportSummary = { imported: [], skipped: [] };
  const bar = progress();
  let rows = 0;
  try {
    await scan(input, maxLineBytes, async (chunk) => {
      let result: ImportResult;
      try {
        result = await importThread({ ...target, ...importOptions, records: chunk.records });
      } catch (err) {
        throw atLines(err, chunk);
      }
      if (result.status === "skipped") summary.skipped.push(result.threadId);
      else summary.imported.push(result);
      on.onThread?.(result);
      rows += result.checkpoints + result.writes + result.blobs;
      bar.update(`importing: ${summary.imported.length} threads${summary.skipped.length ? ` (${summary.skipped.length} skipped)` : ""}, ${rows} rows`);
    });
  } catch (err) {
    on.onPartial(summary);
    throw err;
  } finally {
    bar.done();
  }
  return summary;
}
