/**
 * Issue 26 row 8: an import checks every record as Postgres will read it
 * before anything is written (int4 ranges, timestamps, JSON Postgres
 * accepts, the checkpoint's shape), naming the line or record and the field;
 * a file whose second thread is bad writes nothing, through the CLI and
 * through importThread. And one malformed checkpoint row (written with SQL)
 * never makes `list()` over all threads fail. Issue 27: a thread written with
 * whole values is stored by content once imported (compact), unless asked not to.
 * Issue 37: a line is read up to its limit and no further, and messages show
 * what a record holds only cut short (an id may be megabytes, or personal).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { HumanMessage } from "@langchain/core/messages";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  EncryptedSerializer,
  ExportLineTooLongError,
  exportHeader,
  exportThread,
  importColumns,
  importThread,
  InvalidInputError,
  InvalidOptionsError,
  MAX_EXPORT_LINE_BYTES,
  MAX_LINE_BYTES_CEILING,
  migrate,
  PostgresSaver,
  readExportLines,
  type ExportRecord,
  type ImportColumns,
} from "../../src/index.js";
import { REFS_TYPE } from "../../src/saver/elements.js";
import { SCHEMA_COLUMNS } from "../../src/ops/transfer-check.js";
import { longText } from "../helpers/checkpoints.js";
import { collect, runCli, spawnScript, type Run } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { addressGraph, chatGraph } from "../helpers/graphs.js";

const db = withTestDatabase("import_check");
const dir = mkdtempSync(join(tmpdir(), "lgpg-import-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const pg = (schema: string) => ["--database-url", db.url, "--schema", schema];
const firstLine = (r: Run) => r.stderr.split("\n")[0]!;

/** The export file's lines (header, then "first" and "second"), as parsed records. */
let lines: Record<string, unknown>[];

beforeAll(async () => {
  await migrate({ pool: db.pool, schema: "src" });
  const saver = new PostgresSaver(db.pool, { schema: "src" });
  for (const thread of ["first", "second"]) await addressGraph(saver).invoke({}, { configurable: { thread_id: thread } });
  const file = join(dir, "good.jsonl");
  const out = await runCli(["export", "first", "second", ...pg("src"), "-o", file]);
  expect(out.code, out.stderr).toBe(0);
  lines = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
});

/** Index of the first line of thread "second" of `kind` (that line is 1 + the index). */
const lineOf = (kind: string) => lines.findIndex((l) => l.kind === kind && l.thread_id === "second");

async function count(schema: string): Promise<number> {
  const { rows } = await db.pool.query(
    `SELECT (SELECT count(*) FROM ${schema}.checkpoints)::int + (SELECT count(*) FROM ${schema}.checkpoint_writes)::int + (SELECT count(*) FROM ${schema}.checkpoint_blobs)::int AS n`,
  );
  return rows[0].n;
}

describe("import validates every record before writing anything", () => {
  const cases: [string, string, (r: Record<string, unknown>) => void, RegExp][] = [
    ["write", "idx", (r) => (r.idx = 3_000_000_000), /\(idx\): expected an integer from -2147483648 to 2147483647/],
    ["checkpoint", "created_at", (r) => (r.created_at = "1"), /\(created_at\): expected a timestamp as Postgres reads it/],
    ["checkpoint", "created_at", (r) => (r.created_at = "2024-02-30T10:00:00+00:00"), /\(created_at\): expected a timestamp/],
    ["checkpoint", "ttl_seconds", (r) => (r.ttl_seconds = 2 ** 31), /\(ttl_seconds\): expected an integer from/],
    ["checkpoint", "row_version", (r) => (r.row_version = null), /\(row_version\): must not be null/],
    ["checkpoint", "checkpoint.channel_versions", (r) => ((r.checkpoint as Record<string, unknown>).channel_versions = "oops"), /\(checkpoint\.channel_versions\): expected an object/],
    [
      "checkpoint",
      "checkpoint.versions_seen",
      (r) => ((r.checkpoint as Record<string, unknown>).versions_seen = { node: { channel: [1] } }),
      /\(checkpoint\.versions_seen\["node"\]\["channel"\]\): expected a version \(a string or a number\)/,
    ],
    ["checkpoint", "checkpoint.id", (r) => ((r.checkpoint as Record<string, unknown>).id = "another"), /\(checkpoint\.id\): is "another", but the record's checkpoint_id is /],
    ["checkpoint", "metadata", (r) => (r.metadata = { note: "nul\u0000inside" }), /\(metadata\["note"\]\): Postgres JSON cannot hold NUL/],
    ["checkpoint", "metadata", (r) => (r.metadata = "just a string"), /\(metadata\): expected an object/],
    ["write", "task_path", (r) => (r.task_path = "half\uD800"), /\(task_path\): is not valid Unicode/],
    ["blob", "row_version", (r) => (r.row_version = 1.5), /\(row_version\): expected an integer/],
  ];

  // The CLI and importThread run the same checks (src/ops/transfer-check.ts): importThread meets every case
  // below, the CLI one of each kind of record, for what it adds (the line, the exit code, nothing written).
  const oneOfEachKind = cases.filter(([kind], i) => cases.findIndex(([k]) => k === kind) === i);

  it("through the CLI: a bad field of the second thread names its line and field, and the first thread is not written", async () => {
    await migrate({ pool: db.pool, schema: "cli_target" });
    expect(oneOfEachKind.map(([kind]) => kind).sort()).toEqual(["blob", "checkpoint", "write"]);
    for (const [kind, field, spoil, message] of oneOfEachKind) {
      const i = lineOf(kind);
      const copy = lines.map((l) => structuredClone(l));
      spoil(copy[i]!);
      const file = join(dir, `${kind}-${field}.jsonl`);
      writeFileSync(file, copy.map((l) => JSON.stringify(l)).join("\n"));
      const run = await runCli(["import", file, ...pg("cli_target")]);
      expect(run.code, `${field}: ${run.stderr}`).toBe(1);
      expect(firstLine(run), field).toMatch(new RegExp(`^.*line ${i + 1} ${message.source}`));
      expect(await count("cli_target"), field).toBe(0);
    }
    // The good file imports (both threads).
    const good = join(dir, "good.jsonl");
    const run = await runCli(["import", good, ...pg("cli_target")]);
    expect(run.code, run.stderr).toBe(0);
    expect(await count("cli_target")).toBe(await count("src"));
  });

  it("through importThread: the same checks, naming the record, before any SQL", async () => {
    await migrate({ pool: db.pool, schema: "api_target" });
    const records = await exportThread({ pool: db.pool, schema: "src", threadId: "second" });
    const noSql = { query: () => Promise.reject(new Error("no SQL may run")), connect: () => Promise.reject(new Error("no SQL may run")) } as never;
    for (const [kind, field, spoil, message] of cases) {
      const i = records.findIndex((r) => r.kind === kind);
      const copy = records.map((r) => structuredClone(r)) as ExportRecord[];
      spoil(copy[i] as unknown as Record<string, unknown>);
      for (const pool of [noSql, db.pool]) {
        const error = await importThread({ pool, schema: "api_target", records: copy }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, field).toBeInstanceOf(InvalidInputError);
        const where = message.source.replace(/^\\\((.*?)\\\)/, (_, f: string) => `records\\[${i}\\]\\.${f}`);
        expect((error as Error).message, field).toMatch(new RegExp(where));
      }
      expect(await count("api_target"), field).toBe(0);
    }
  });
});

describe("the columns checked before any SQL", () => {
  it("are this release's migrated schema's, type, NULL and default alike", async () => {
    const target = await importColumns({ pool: db.pool, schema: "src" });
    const plain = (c: ImportColumns) => Object.fromEntries(Object.entries(c).map(([k, m]) => [k, Object.fromEntries(m)]));
    expect(plain(target)).toEqual(plain(SCHEMA_COLUMNS));
  });
});

describe("a malformed checkpoint row", () => {
  it("written with SQL, never makes list() over all threads fail", async () => {
    await migrate({ pool: db.pool, schema: "poisoned" });
    const saver = new PostgresSaver(db.pool, { schema: "poisoned" });
    for (const thread of ["a", "b"]) await addressGraph(saver).invoke({}, { configurable: { thread_id: thread } });
    const { rowCount } = await db.pool.query(
      `UPDATE poisoned.checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_versions}', '"oops"')
        WHERE thread_id = 'b' AND checkpoint_id = (SELECT checkpoint_id FROM poisoned.checkpoint_heads WHERE thread_id = 'b')`,
    );
    expect(rowCount).toBe(1);
    const seen: string[] = [];
    for await (const t of saver.list({})) seen.push(t.config.configurable!.thread_id as string);
    expect(seen.filter((t) => t === "a")).toHaveLength(3);
    expect(seen.filter((t) => t === "b")).toHaveLength(3);
    // Thread a reads as before.
    expect((await saver.getTuple({ configurable: { thread_id: "a" } }))!.checkpoint.channel_values).toMatchObject({ name: "pavaneeshwar" });
  });
});

describe("import stores a thread written with whole values by content (issue 27)", () => {
  const cfg = (thread_id: string) => ({ configurable: { thread_id, checkpoint_ns: "" } });
  async function listAll(saver: BaseCheckpointSaver, thread: string): Promise<CheckpointTuple[]> {
    const out: CheckpointTuple[] = [];
    for await (const t of saver.list(cfg(thread))) out.push(t);
    return out;
  }
  const types = async (schema: string) =>
    (await db.pool.query(`SELECT DISTINCT type FROM "${schema}".checkpoint_blobs WHERE channel = 'messages' ORDER BY type`)).rows.map((r) => r.type as string);
  /** Three turns of messages of a realistic length: a list of one is stored by its elements (a list of short ones stays whole, issue 40). */
  const chat = async (saver: BaseCheckpointSaver, thread: string) => {
    for (let i = 0; i < 3; i++) await chatGraph(saver).invoke({ messages: [new HumanMessage({ id: `h${i}`, content: longText(`question ${i}`) })] }, cfg(thread));
  };

  it("after the commit, compacted: lists by their elements, reading the same; elementStorage: false imports byte for byte", async () => {
    await Promise.all(["whole", "whole_api", "whole_kept"].map((schema) => migrate({ pool: db.pool, schema })));
    const source = new PostgresSaver(db.pool, { schema: "whole", elementStorage: false });
    await chat(source, "w");
    const before = await listAll(source, "w");
    const records = await exportThread({ pool: db.pool, schema: "whole", threadId: "w" });
    expect(await types("whole")).toEqual(["msgpack"]);

    const noSql = { query: () => Promise.reject(new Error("no SQL may run")), connect: () => Promise.reject(new Error("no SQL may run")) } as never;
    await expect(importThread({ pool: noSql, records, elementStorage: "yes" as never })).rejects.toThrow(/Invalid elementStorage: expected true or false/);

    const [converted, kept] = await Promise.all([
      importThread({ pool: db.pool, schema: "whole_api", records }),
      importThread({ pool: db.pool, schema: "whole_kept", records, elementStorage: false }),
    ]);
    // 15 values: the 6 versions of messages, the 3 inputs ({ messages: [question] }, by their list) and the 6 writes (3 questions, 3 answers).
    expect(converted).toMatchObject({ status: "imported", compacted: { dryRun: false, values: 15, writes: 6, undecodable: 0, threadsCompacted: 1 } });
    expect(converted.compactError).toBeUndefined();
    expect(kept.compacted).toBeUndefined();
    expect(await types("whole_api")).toEqual([REFS_TYPE]);
    expect(await types("whole_kept")).toEqual(["msgpack"]);
    expect(await listAll(new PostgresSaver(db.pool, { schema: "whole_api" }), "w")).toEqual(before);
    expect(await listAll(new PostgresSaver(db.pool, { schema: "whole_kept" }), "w")).toEqual(before);
  });

  it("encrypted whole values: without the saver's serializer the import stands whole and compactError says why; with it, they are stored by content", async () => {
    await Promise.all(["enc", "enc_plain", "enc_keyed"].map((schema) => migrate({ pool: db.pool, schema })));
    const serde = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });
    const source = new PostgresSaver(db.pool, { schema: "enc", serde, elementStorage: false });
    await chat(source, "e");
    const before = await listAll(source, "e");
    const records = await exportThread({ pool: db.pool, schema: "enc", threadId: "e" });
    const [plain, keyed] = await Promise.all([
      importThread({ pool: db.pool, schema: "enc_plain", records }),
      importThread({ pool: db.pool, schema: "enc_keyed", records, serde }),
    ]);
    expect(plain).toMatchObject({ status: "imported" });
    expect(plain.compacted).toMatchObject({ values: 0, threadsCompacted: 0 });
    expect(plain.compacted!.undecodable).toBeGreaterThan(0);
    expect(plain.compactError).toMatch(/could not be decoded .*pass the saver's serde/);
    expect(keyed.compacted).toMatchObject({ values: 15, writes: 6, undecodable: 0 });
    expect(keyed.compactError).toBeUndefined();
    expect(await types("enc_keyed")).toEqual([REFS_TYPE]);
    for (const schema of ["enc_plain", "enc_keyed"]) expect(await listAll(new PostgresSaver(db.pool, { schema, serde }), "e")).toEqual(before);
  });
});

describe("a line is read up to its limit, and no further (issue 37)", () => {
  /** The default limit, as README "CLI" documents it. */
  const DEFAULT_LIMIT = 256 * 1024 ** 2;
  /** The texts of `parts`' lines; `pulled` counts the bytes the reader took. */
  const pulled = { bytes: 0 };
  async function* chunks(parts: (string | Buffer)[]) {
    for (const p of parts) {
      const b = Buffer.from(p);
      pulled.bytes += b.length;
      yield b;
    }
  }
  async function read(parts: (string | Buffer)[], maxLineBytes: number): Promise<string[]> {
    const out: string[] = [];
    for await (const { line, text } of readExportLines(chunks(parts), { maxLineBytes })) out.push(`${line}:${text}`);
    return out;
  }

  it("readExportLines: lines whole across chunks (a character split between two), CRLF, blank lines, a last line without a break; one over maxLineBytes refused once read that far, naming its number and the limit", async () => {
    const euro = Buffer.from("€"); // 3 bytes: the chunk boundary cuts it
    expect(await read(["ab", "c\r\n\n", euro.subarray(0, 1), Buffer.concat([euro.subarray(1), Buffer.from("\nlast")])], 4)).toEqual(["1:abc", "2:", "3:€", "4:last"]);
    expect(await read(["12345\n"], 5)).toEqual(["1:12345"]);
    pulled.bytes = 0;
    const error = await read(["ok\n", "123", "456", "789\nnever read"], 5).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExportLineTooLongError);
    expect(error).toMatchObject({ line: 2, limit: 5, bytes: 6, code: "INVALID_INPUT" });
    expect((error as Error).message).toMatch(/^Invalid line 2: is longer than 5 bytes, the limit of a line \(maxLineBytes\); it was not read further/);
    expect((error as Error).message).not.toMatch(/123|456/);
    expect(pulled.bytes).toBe(9); // the chunk after the one that passed the limit is never taken
    for (const bad of [0, 1.5, MAX_LINE_BYTES_CEILING + 1]) await expect(read([], bad)).rejects.toThrow(InvalidOptionsError);
  });

  it("readExportLines: the default limit holds against a line just over it, from a generator, having read no more than the limit and a chunk (before: readline held a 600 MB line whole, then a RangeError)", async () => {
    const chunk = Buffer.alloc(1024 ** 2, "x");
    let pulled = 0;
    // A 600 MB line, the size that crashed, never held: the same chunk again and again.
    async function* file() {
      yield Buffer.from(`${JSON.stringify(exportHeader())}\n`);
      for (let i = 0; i < 600; i++, pulled += chunk.length) yield chunk;
      yield Buffer.from("\n");
    }
    const lines: number[] = [];
    const error = await (async () => {
      for await (const { line } of readExportLines(file())) lines.push(line);
    })().catch((e: unknown) => e);
    expect(lines).toEqual([1]);
    expect(error).toMatchObject({ line: 2, limit: DEFAULT_LIMIT });
    expect(MAX_EXPORT_LINE_BYTES).toBe(DEFAULT_LIMIT);
    expect(pulled).toBeLessThanOrEqual(DEFAULT_LIMIT + chunk.length);
  });

  it("import --max-line-bytes: a longer line stops the import there (exit 1, one line naming it and the limit, not its content, nothing written); a line of exactly the limit is read", async () => {
    await migrate({ pool: db.pool, schema: "limit_target" });
    const file = join(dir, "good.jsonl");
    const sizes = readFileSync(file, "utf8").trim().split("\n").map((l) => Buffer.byteLength(l));
    const longest = Math.max(...sizes);
    const over = await runCli(["import", file, ...pg("limit_target"), "--max-line-bytes", String(longest - 1)]);
    expect(over.code, over.stderr).toBe(1);
    expect(over.stderr).toMatch(new RegExp(`^langgraph-checkpoint-pg import: line ${sizes.indexOf(longest) + 1}: longer than ${longest - 1} bytes, the limit of a line; not read further\\. .*--max-line-bytes \\(at most ${MAX_LINE_BYTES_CEILING}\\)\n$`));
    expect(await count("limit_target")).toBe(0);
    const exact = await runCli(["import", file, ...pg("limit_target"), "--max-line-bytes", String(longest)]);
    expect(exact.code, exact.stderr).toBe(0);
    expect(await count("limit_target")).toBe(await count("src"));
    for (const bad of ["0", "1e3", String(MAX_LINE_BYTES_CEILING + 1)]) {
      const run = await runCli(["import", file, ...pg("limit_target"), "--max-line-bytes", bad]);
      expect(run.code, `${bad}: ${run.stderr}`).toBe(2);
      expect(firstLine(run)).toMatch(/--max-line-bytes: /);
    }
  });

  it("import: the default limit holds against a line just over it, piped from a generator into a process with a 128 MB heap (before: out of memory there; a 600 MB line, a RangeError and a stack)", async () => {
    await migrate({ pool: db.pool, schema: "limit_default" });
    const prefix = Buffer.from('{"kind":"end","thread_id":"');
    const suffix = Buffer.from('"}');
    function* input() {
      yield Buffer.from(`${JSON.stringify(exportHeader())}\n`);
      yield prefix;
      const chunk = Buffer.alloc(1024 ** 2, "x");
      // The line is the limit and one byte.
      for (let left = DEFAULT_LIMIT + 1 - prefix.length - suffix.length; left > 0; left -= chunk.length) yield chunk.subarray(0, Math.min(left, chunk.length));
      yield Buffer.concat([suffix, Buffer.from("\n")]);
    }
    const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --max-old-space-size=128` };
    const run = await collect(spawnScript("src/cli/main.ts", ["import", ...pg("limit_default")], { input: input(), env }));
    expect(run.code, run.stderr.slice(0, 2000)).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`^langgraph-checkpoint-pg import: line 2: longer than ${DEFAULT_LIMIT} bytes, the limit of a line; not read further\\. [^\n]*\n$`));
    expect(await count("limit_default")).toBe(0);
  });
});

describe("messages show what a record holds cut short (issue 37)", () => {
  const huge = "x".repeat(2 ** 20);
  /** What a message may show of `huge`: 40 characters and its length. */
  const cutShort = /"x{40}"… \(1048576 characters\)/;
  const echoes = (text: string) => text.includes("x".repeat(41)) || text.length > 600;
  /** Deeply nested JSON with a NUL at the bottom: its path in a message stops after 12 levels. */
  const deep = () => {
    let v: unknown = "nul\u0000";
    for (let i = 0; i < 1000; i++) v = { a: v };
    return v;
  };
  const set = (field: string, value: unknown) => (r: Record<string, unknown>) => (r[field] = value);
  const inCheckpoint = (field: string, value: unknown) => (r: Record<string, unknown>) => ((r.checkpoint as Record<string, unknown>)[field] = value);
  /** Spoiling a record of thread "second": what the message says. */
  const records: [string, string, (r: Record<string, unknown>) => void, RegExp][] = [
    ["checkpoint", "checkpoint.id", inCheckpoint("id", huge), /checkpoint\.id\)?: is "x{40}"… \(1048576 characters\), but the record's checkpoint_id is /],
    ["checkpoint", "a metadata key", set("metadata", { [`${huge}\u0000`]: 1 }), /metadata\["x{40}"… \(1048577 characters\)\]\)?: Postgres JSON cannot hold this key/],
    ["checkpoint", "a nested metadata value", set("metadata", deep()), /metadata(\["a"\]){12}…\)?: Postgres JSON cannot hold NUL/],
    ["checkpoint", "a channel_versions key", inCheckpoint("channel_versions", { [huge]: "1" }), /checkpoint\.channel_versions key "x{40}"… \(1048576 characters\)\)?: is 1048576 bytes long/],
    ["checkpoint", "a versions_seen key", inCheckpoint("versions_seen", { [huge]: "oops" }), /checkpoint\.versions_seen\["x{40}"… \(1048576 characters\)\]\)?: expected an object of channel versions/],
  ];

  it("import: a huge thread id, key or version in a bad file is named by its first 40 characters (before: echoed whole)", async () => {
    await migrate({ pool: db.pool, schema: "echo_target" });
    const files: [string, Record<string, unknown>[], RegExp][] = [];
    // A record's message is importThread's (its test below meets each of them): the CLI shows one; what only a file can hold, all.
    for (const [kind, what, spoil, message] of records.slice(0, 1)) {
      const copy = lines.map((l) => structuredClone(l));
      spoil(copy[lineOf(kind)]!);
      files.push([what, copy, message]);
    }
    const second = lines.filter((l) => l.thread_id === "second");
    const start = lineOf("checkpoint");
    const hugeThread = lines.map((l) => (l.thread_id === "second" ? { ...l, thread_id: huge } : l));
    files.push(
      ["a thread starting inside another", [...lines.slice(0, start + 1), ...second.slice(1).map((l) => ({ ...l, thread_id: huge }))], new RegExp(`line ${start + 2}: thread ${cutShort.source} starts before thread "second" ended`)],
      ["a file ending inside a thread", hugeThread.slice(0, -1), new RegExp(`the file ends inside thread ${cutShort.source}`)],
      ["a header inside a thread", [...hugeThread.slice(0, -1), lines[0]!], new RegExp(`a header inside thread ${cutShort.source}`)],
      ["a header's version", [{ ...lines[0]!, version: huge }, ...lines.slice(1)], new RegExp(`line 1: export format version ${cutShort.source} is newer`)],
      ["a thread id", hugeThread, new RegExp(`line ${start + 1} \\(thread_id\\): is 1048576 bytes long; the limit is 512 bytes`)],
      ["a field that is not a column", lines.map((l, i) => (i === start ? { ...l, [huge]: 1 } : l)), new RegExp(`line ${start + 1} \\(${cutShort.source}\\): is not a column of checkpoints`)],
    );
    const runs = await Promise.all(
      files.map(([what, copy]) => {
        const file = join(dir, `echo-${what.replace(/\W+/g, "-")}.jsonl`);
        writeFileSync(file, copy.map((l) => JSON.stringify(l)).join("\n"));
        return runCli(["import", file, ...pg("echo_target")]);
      }),
    );
    runs.forEach((run, i) => {
      const [what, , message] = files[i]!;
      expect(run.code, what).toBe(1);
      expect(echoes(run.stderr), `${what}: ${run.stderr.length} characters`).toBe(false);
      expect(firstLine(run), what).toMatch(message);
    });
    expect(await count("echo_target")).toBe(0);
  });

  it("importThread: the same records refused, named the same way", async () => {
    await migrate({ pool: db.pool, schema: "echo_api" });
    const exported = await exportThread({ pool: db.pool, schema: "src", threadId: "second" });
    const cases = [
      ...records.map(([kind, what, spoil, message]) => [what, (copy: ExportRecord[]) => spoil(copy.find((r) => r.kind === kind) as unknown as Record<string, unknown>), message] as const),
      ["a field that is not a column", (copy: ExportRecord[]) => ((copy[0] as unknown as Record<string, unknown>)[huge] = 1), new RegExp(`records\\[0\\]\\.${cutShort.source}: is not a column`)] as const,
      ["a thread id", (copy: ExportRecord[]) => copy.forEach((r) => (r.thread_id = huge)), /records\[0\]\.thread_id: is 1048576 bytes long/] as const,
    ];
    for (const [what, spoil, message] of cases) {
      const copy = exported.map((r) => structuredClone(r)) as ExportRecord[];
      spoil(copy);
      const error = await importThread({ pool: db.pool, schema: "echo_api", records: copy }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, what).toBeInstanceOf(InvalidInputError);
      expect(echoes((error as Error).message), `${what}: ${(error as Error).message.length} characters`).toBe(false);
      expect((error as Error).message, what).toMatch(message);
    }
  });
});
