/**
 * Export and import of whole threads (`export` / `import` in the CLI, see
 * cli/transfer.ts): every row of a thread as JSON records, bytes as base64,
 * decoded values alongside for reading, and back, validated before any SQL
 * and written in one transaction. Moves threads between schemas, databases
 * and releases.
 */
import type { Db } from "../db/db.js";
import { CheckpointerError, DatabaseOperationError, InvalidInputError, sqlStateOf } from "../errors.js";
import { latestVersion } from "../db/migrate.js";
import type { ValueRow } from "../serde/rowserde.js";
import { checkKey, LIMITS, quoteIdent } from "../validate.js";
import { ELEMENTS_CHANNEL, elementKey } from "../saver/elements.js";
import { decodeMetadataRaw, decodeSafe, toJsonSafe, type Elements } from "./decode.js";
import { open, run, type InspectOptions } from "./inspect.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_WRITES, CHECKPOINTS, COL } from "../db/names.js";

/** Name and version of the export format (the first line of an export file). */
export const EXPORT_FORMAT = "langgraph-checkpoint-pg/export";
export const EXPORT_FORMAT_VERSION = 1;

/** First line of an export file. */
export interface ExportHeader {
  kind: "header";
  format: typeof EXPORT_FORMAT;
  version: number;
  /** Migration version of the schema the rows were read from. */
  schema_version: number;
  exported_at: string;
}

/**
 * A row of `checkpoints`, every column under its own name (columns added by
 * later migrations appear as further fields), and `is_head`: whether the
 * lineage's `checkpoint_heads` row names it. `checkpoint` and `metadata` are
 * the stored JSON; `metadata_raw` (base64) is set when the metadata needed
 * exact msgpack, and then `metadata_decoded` shows it (ignored on import).
 */
export interface CheckpointRecord {
  kind: "checkpoint";
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint: Record<string, unknown>;
  metadata: unknown;
  metadata_raw: string | null;
  is_head: boolean;
  row_version: number;
  created_at: string;
  ttl_seconds?: number | null;
  metadata_decoded?: unknown;
  /** The values of channels without a version, decoded from `unversioned_values` (ignored on import). */
  unversioned_decoded?: unknown;
}

/** A row of `checkpoint_writes`: `value` is base64 of the stored bytes, `decoded` the tagged JSON (ignored on import). */
export interface WriteRecord {
  kind: "write";
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  task_id: string;
  idx: number;
  channel: string;
  type: string;
  value: string | null;
  task_path: string;
  row_version: number;
  decoded?: unknown;
}

/**
 * A row of `checkpoint_blobs`: `value` is base64 of the stored bytes (null for `type: "empty"`), `decoded` the tagged JSON.
 * Lists stored by their elements (saver/elements.ts) come as their rows: element rows (channel `__elements__`, version
 * the hash), and the list's own row of type `pg:refs`, whose `decoded` is the whole list; a chunk's `decoded` is
 * `{"$type":"pg:refs","hashes":[...]}`.
 */
export interface BlobRecord {
  kind: "blob";
  thread_id: string;
  checkpoint_ns: string;
  channel: string;
  version: string;
  type: string;
  value: string | null;
  row_version: number;
  decoded?: unknown;
}

/** Last record of a thread: its row counts, so a truncated file is detected instead of half-imported. */
export interface EndRecord {
  kind: "end";
  thread_id: string;
  checkpoints: number;
  writes: number;
  blobs: number;
}

export type ExportRecord = CheckpointRecord | WriteRecord | BlobRecord | EndRecord;

/** Record fields that are not columns: informational, never written. */
const NOT_COLUMNS = new Set(["kind", "decoded", "metadata_decoded", "unversioned_decoded"]);

const TABLES = { checkpoint: CHECKPOINTS.table, write: CHECKPOINT_WRITES.table, blob: CHECKPOINT_BLOBS.table } as const;
type TableKind = keyof typeof TABLES;

/**
 * The header line of an export file (written once, before any thread).
 *
 * @example
 * ```ts
 * out.write(JSON.stringify(exportHeader()) + "\n");
 * ```
 */
export function exportHeader(): ExportHeader {
  return { kind: "header", format: EXPORT_FORMAT, version: EXPORT_FORMAT_VERSION, schema_version: latestVersion(), exported_at: new Date().toISOString() };
}

/** A field of a record: a column of its table, or `is_head` (a checkpoint's `checkpoint_heads` row, stored apart). */
interface Field {
  bytea: boolean;
  head?: true;
}

/**
 * Columns of the three tables in `schema`, in table order, and which hold
 * bytes; checkpoints also carry `is_head`, so an export names the heads and
 * reads the same whatever table keeps them.
 */
async function tableColumns(db: Pick<Db, "query">, schema: string): Promise<Record<TableKind, Map<string, Field>>> {
  const rows = await run<{ table: string; name: string; bytea: boolean }>(
    db,
    "reading table columns",
    `SELECT c.relname AS table, a.attname AS name, a.atttypid = 'bytea'::regtype AS bytea
       FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`,
    [schema, Object.values(TABLES)],
  );
  const out = { checkpoint: new Map(), write: new Map(), blob: new Map() } as Record<TableKind, Map<string, Field>>;
  for (const r of rows) {
    const kind = (Object.keys(TABLES) as TableKind[]).find((k) => TABLES[k] === r.table)!;
    out[kind].set(r.name, { bytea: r.bytea });
  }
  out.checkpoint.set("is_head", { bytea: false, head: true });
  return out;
}

/** `to_jsonb` writes bytea as `\x` + hex. */
const hexToBytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex.slice(2), "hex"));
const hexToBase64 = (hex: unknown): string | null => (typeof hex === "string" ? Buffer.from(hex.slice(2), "hex").toString("base64") : null);

/**
 * Every stored row of a thread (all namespaces, every column), read in one
 * consistent snapshot: checkpoints, then writes, then blobs, then an `end`
 * record. Empty (no records at all) when the thread does not exist.
 *
 * @example
 * ```ts
 * for (const record of await exportThread({ pool, threadId: "12345" })) out.write(JSON.stringify(record) + "\n");
 * ```
 */
export async function exportThread(options: InspectOptions & { threadId: string }): Promise<ExportRecord[]> {
  const threadId = checkKey("threadId", options.threadId, LIMITS.thread_id);
  const { db, t, schema, serde } = await open(options);
  const [columns, cps, writes, blobs] = await db
    .transaction(async (tx) => {
      // One snapshot: a run writing to the thread meanwhile is either all in or all out.
      await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      // bytea as `\x` + hex whatever the server's default output format.
      await tx.query("SET LOCAL bytea_output = 'hex'");
      // to_jsonb: every column, including ones later migrations add; bytea as hex, timestamps to the microsecond.
      const read = (table: string, order: string, extra = "") =>
        run<{ r: Record<string, unknown> }>(tx, "exporting a thread", `SELECT pg_catalog.to_jsonb(x)${extra} AS r FROM ${table} x WHERE ${COL.threadId} = $1 ORDER BY ${order}`, [
          threadId,
        ]);
      const isHead = ` || pg_catalog.jsonb_build_object('is_head', EXISTS (SELECT 1 FROM ${t.heads} h
                           WHERE h.${COL.threadId} = x.${COL.threadId} AND h.${COL.checkpointNs} = x.${COL.checkpointNs} AND h.${COL.checkpointId} = x.${COL.checkpointId}))`;
      return [
        await tableColumns(tx, schema),
        await read(t.checkpoints, `${COL.checkpointNs}, ${COL.checkpointId}`, isHead),
        await read(t.writes, `${COL.checkpointNs}, ${COL.checkpointId}, ${COL.taskPath}, ${COL.taskId}, ${COL.idx}`),
        await read(t.blobs, `${COL.checkpointNs}, ${COL.channel}, ${COL.version}`),
      ] as const;
    })
    .catch((err: unknown) => {
      throw err instanceof CheckpointerError ? err : new DatabaseOperationError("exporting a thread", err);
    });
  if (cps.length + writes.length + blobs.length === 0) return [];
  const toRecord = (kind: TableKind, row: Record<string, unknown>): Record<string, unknown> => {
    const record: Record<string, unknown> = { kind };
    for (const [name, col] of columns[kind]) record[name] = col.bytea ? hexToBase64(row[name]) : row[name];
    return record;
  };
  const records: ExportRecord[] = [];
  // Every element row of the thread is exported: lists are decoded from them.
  const elements: Elements = new Map();
  for (const { r } of blobs) {
    if (r.channel !== ELEMENTS_CHANNEL) continue;
    elements.set(elementKey(threadId, String(r.checkpoint_ns), String(r.version)), { type: String(r.type), value: typeof r.value === "string" ? hexToBytes(r.value) : null });
  }
  for (const { r } of cps) {
    const record = toRecord("checkpoint", r) as unknown as CheckpointRecord;
    if (typeof r.metadata_raw === "string") {
      const d = await decodeMetadataRaw(r.metadata, hexToBytes(r.metadata_raw));
      record.metadata_decoded = d.ok ? toJsonSafe(d.value) : { $type: "undecodable", error: d.error };
    }
    if (typeof r.unversioned_values === "string") {
      const row: ValueRow = { table: "checkpoints", threadId, checkpointNs: String(r.checkpoint_ns), checkpointId: String(r.checkpoint_id) };
      record.unversioned_decoded = await decodeSafe(serde, String(r.unversioned_type), hexToBytes(r.unversioned_values), row);
    }
    records.push(record);
  }
  for (const [kind, rows] of [["write", writes] as const, ["blob", blobs] as const]) {
    for (const { r } of rows) {
      const record = toRecord(kind, r) as unknown as WriteRecord | BlobRecord;
      const type = String(r.type);
      const row: ValueRow =
        kind === "blob"
          ? { table: "checkpoint_blobs", threadId, checkpointNs: String(r.checkpoint_ns), channel: String(r.channel), version: String(r.version) }
          : { table: "checkpoint_writes", threadId, checkpointNs: String(r.checkpoint_ns), checkpointId: String(r.checkpoint_id), taskId: String(r.task_id), idx: Number(r.idx) };
      if (type !== "empty") record.decoded = await decodeSafe(serde, type, typeof r.value === "string" ? hexToBytes(r.value) : null, row, elements);
      records.push(record);
    }
  }
  records.push({ kind: "end", thread_id: threadId, checkpoints: cps.length, writes: writes.length, blobs: blobs.length });
  return records;
}

/**
 * Importing a thread that already has rows in the target. Nothing was written.
 * (Code `INVALID_INPUT`: the input conflicts with what is stored.)
 *
 * @example
 * ```ts
 * try { await importThread({ pool, records }); } catch (e) { if (e instanceof ThreadExistsError) console.log(e.threadId); }
 * ```
 */
export class ThreadExistsError extends CheckpointerError {
  readonly threadId: string;
  constructor(threadId: string, options?: { cause?: unknown }) {
    super(
      "INVALID_INPUT",
      `Thread ${JSON.stringify(threadId)} already exists in the target; nothing was imported. ` +
        `Delete it first (\`npx langgraph-checkpoint-pg threads delete ${JSON.stringify(threadId)}\` or \`saver.deleteThread(id)\`), ` +
        "or skip existing threads (`import --skip-existing`, `ifExists: \"skip\"`).",
      options,
    );
    this.threadId = threadId;
  }
}

/** What {@link importThread} did. */
export interface ImportResult {
  threadId: string;
  /** `imported`, or `skipped` (the thread existed and `ifExists: "skip"`). */
  status: "imported" | "skipped";
  checkpoints: number;
  writes: number;
  blobs: number;
}

/**
 * Write one thread's exported records into the target, byte for byte: the
 * same rows (every column: `row_version`, `created_at`, raw values and
 * their types) and the same lineage heads (`is_head`), in ONE transaction,
 * so `getState` / `getStateHistory` read exactly as in the source. The
 * records are checked before anything is written; a record field that is not
 * a column of the target table is refused (never silently dropped).
 *
 * A thread that already has rows in the target is refused
 * ({@link ThreadExistsError}, nothing written) unless `ifExists: "skip"`;
 * threads are never merged. Of two concurrent imports of one thread, one
 * commits, the other fails on the primary key and writes nothing.
 *
 * @example
 * ```ts
 * const records = await exportThread({ pool: source, threadId: "12345" });
 * await importThread({ pool: target, schema: "restored", records });
 * ```
 */
export async function importThread(
  options: Omit<InspectOptions, "serde"> & { records: readonly (ExportRecord | ExportHeader)[]; ifExists?: "fail" | "skip" },
): Promise<ImportResult> {
  const ifExists = options.ifExists ?? "fail";
  if (ifExists !== "fail" && ifExists !== "skip") throw new InvalidInputError("ifExists", 'expected "fail" or "skip"');
  const { threadId, rows } = validateRecords(options.records);
  const { db, t, schema } = await open(options);
  const tables = { checkpoint: t.checkpoints, write: t.writes, blob: t.blobs };
  try {
    return await db.transaction(async (tx) => {
      const columns = await tableColumns(tx, schema);
      // Map each record onto the target's columns: bytes from base64 to bytea's `\x` text, everything else as is.
      const prepared = { checkpoint: [], write: [], blob: [] } as Record<TableKind, { row: Record<string, unknown>; size: number }[]>;
      const used = { checkpoint: new Set<string>(), write: new Set<string>(), blob: new Set<string>() };
      const heads: { ns: string[]; ids: string[] } = { ns: [], ids: [] };
      for (const { kind, record, at } of rows) {
        const row: Record<string, unknown> = {};
        let size = 0;
        for (const [name, value] of Object.entries(record)) {
          if (NOT_COLUMNS.has(name)) continue;
          const col = columns[kind].get(name);
          if (!col) throw new InvalidInputError(`${at}.${name}`, `is not a column of ${TABLES[kind]} in schema "${schema}" (an export from a newer schema?)`);
          if (col.head) {
            if (value === true) {
              heads.ns.push(String(record.checkpoint_ns));
              heads.ids.push(String(record.checkpoint_id));
            }
            continue;
          }
          if (col.bytea && value !== null) {
            if (typeof value !== "string" || !isBase64(value)) throw new InvalidInputError(`${at}.${name}`, "expected base64 or null");
            row[name] = `\\x${Buffer.from(value, "base64").toString("hex")}`;
            size += value.length;
          } else {
            row[name] = value;
          }
          used[kind].add(name);
        }
        prepared[kind].push({ row, size });
      }
      const [exists] = await run<{ found: boolean }>(
        tx,
        "checking the target thread",
        `SELECT EXISTS (SELECT 1 FROM ${t.checkpoints} WHERE ${COL.threadId} = $1)
             OR EXISTS (SELECT 1 FROM ${t.writes} WHERE ${COL.threadId} = $1)
             OR EXISTS (SELECT 1 FROM ${t.blobs} WHERE ${COL.threadId} = $1) AS found`,
        [threadId],
      );
      if (exists!.found) {
        if (ifExists === "skip") return { threadId, status: "skipped" as const, checkpoints: 0, writes: 0, blobs: 0 };
        throw new ThreadExistsError(threadId);
      }
      for (const kind of ["checkpoint", "write", "blob"] as const) {
        // Columns the records do not carry (an export from an older schema) take their defaults.
        const cols = [...columns[kind].keys()].filter((c) => used[kind].has(c)).map(quoteIdent).join(", ");
        const all = prepared[kind];
        for (let i = 0; i < all.length; ) {
          // Bounded statements: at most CHUNK rows or about CHUNK_BYTES of values each.
          let j = i;
          let bytes = 0;
          while (j < all.length && j - i < CHUNK && (j === i || bytes + all[j]!.size <= CHUNK_BYTES)) bytes += all[j++]!.size;
          await tx.query(`INSERT INTO ${tables[kind]} (${cols}) SELECT ${cols} FROM pg_catalog.jsonb_populate_recordset(NULL::${tables[kind]}, $1::text::jsonb)`, [
            JSON.stringify(all.slice(i, j).map((p) => p.row)),
          ]);
          i = j;
        }
      }
      await tx.query(
        `INSERT INTO ${t.heads} (${COL.threadId}, ${COL.checkpointNs}, ${COL.checkpointId}, ${COL.movedAt}, ${COL.hasPendingTasks})
         SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.checkpointId}, c.${COL.createdAt}, c.${COL.hasPendingTasks}
           FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS h(ns, id)
           JOIN ${t.checkpoints} c ON c.${COL.threadId} = $1 AND c.${COL.checkpointNs} = h.ns AND c.${COL.checkpointId} = h.id`,
        [threadId, heads.ns, heads.ids],
      );
      return { threadId, status: "imported" as const, checkpoints: prepared.checkpoint.length, writes: prepared.write.length, blobs: prepared.blob.length };
    });
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    // A concurrent import of the same thread committed first.
    if (sqlStateOf(err) === "23505") throw new ThreadExistsError(threadId, { cause: err });
    throw new DatabaseOperationError("importing a thread", err);
  }
}

/** Rows per INSERT statement, and bytes of values (keeps each statement bounded on long threads). */
const CHUNK = 1000;
const CHUNK_BYTES = 16 * 1024 * 1024;
/**
 * Padded base64. Not one regular expression of 4-character groups: V8 runs
 * out of stack on a repeated group over a few megabytes (a large value).
 */
const isBase64 = (s: string): boolean => s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);

interface Validated {
  threadId: string;
  rows: { kind: TableKind; record: Record<string, unknown>; at: string }[];
}

/**
 * Check one thread's records the way {@link importThread} does before it
 * writes anything (fields, one thread, end-record counts); throws
 * {@link InvalidInputError} naming the record and field. Returns the thread id.
 *
 * @example
 * ```ts
 * const threadId = checkRecords(records); // throws on the first bad field
 * ```
 */
export function checkRecords(records: readonly (ExportRecord | ExportHeader)[]): string {
  return validateRecords(records).threadId;
}

function validateRecords(records: readonly (ExportRecord | ExportHeader)[]): Validated {
  if (!Array.isArray(records)) throw new InvalidInputError("records", "expected an array of export records");
  let threadId: string | undefined;
  let end: EndRecord | undefined;
  const rows: Validated["rows"] = [];
  const counts = { checkpoint: 0, write: 0, blob: 0 };
  const keys = new Map<string, number>();
  const heads = new Map<string, number>();
  records.forEach((record, i) => {
    const at = `records[${i}]`;
    if (record === null || typeof record !== "object" || Array.isArray(record)) throw new InvalidInputError(at, "expected an object");
    const r = record as unknown as Record<string, unknown>;
    const key = (field: string, limit: number, allowEmpty = false) => checkKey(`${at}.${field}`, r[field], limit, { allowEmpty });
    const text = (field: string) => {
      if (typeof r[field] !== "string" || (r[field] as string).includes("\u0000")) throw new InvalidInputError(`${at}.${field}`, "expected a string without NUL characters");
    };
    const int = (field: string, nullable = false) => {
      const v = r[field];
      if (nullable && (v === null || v === undefined)) return;
      if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new InvalidInputError(`${at}.${field}`, "expected an integer");
    };
    const bytes = (field: string) => {
      const v = r[field];
      if (v !== null && v !== undefined && (typeof v !== "string" || !isBase64(v))) throw new InvalidInputError(`${at}.${field}`, "expected base64 or null");
    };
    if (r.kind === "header") {
      if (r.format !== EXPORT_FORMAT) throw new InvalidInputError(`${at}.format`, `expected ${JSON.stringify(EXPORT_FORMAT)}`);
      if (typeof r.version !== "number" || r.version > EXPORT_FORMAT_VERSION) {
        throw new InvalidInputError(`${at}.version`, `format version ${String(r.version)} is newer than this code reads (${EXPORT_FORMAT_VERSION})`);
      }
      return;
    }
    if (end) throw new InvalidInputError(at, "comes after the thread's end record");
    const tid = key("thread_id", LIMITS.thread_id);
    if (threadId === undefined) threadId = tid;
    else if (tid !== threadId) throw new InvalidInputError(`${at}.thread_id`, `is ${JSON.stringify(tid)}, but these records are for thread ${JSON.stringify(threadId)}`);
    switch (r.kind) {
      case "checkpoint":
        key("checkpoint_ns", LIMITS.checkpoint_ns, true);
        key("checkpoint_id", LIMITS.checkpoint_id);
        if (r.parent_checkpoint_id !== null && r.parent_checkpoint_id !== undefined) key("parent_checkpoint_id", LIMITS.checkpoint_id);
        if (typeof r.is_head !== "boolean") throw new InvalidInputError(`${at}.is_head`, "expected a boolean");
        if (r.checkpoint === null || typeof r.checkpoint !== "object" || Array.isArray(r.checkpoint)) throw new InvalidInputError(`${at}.checkpoint`, "expected an object");
        if (r.metadata === undefined) throw new InvalidInputError(`${at}.metadata`, "is missing");
        int("row_version");
        if (r.created_at !== undefined && (typeof r.created_at !== "string" || Number.isNaN(Date.parse(r.created_at)))) {
          throw new InvalidInputError(`${at}.created_at`, "expected an ISO 8601 timestamp");
        }
        bytes("metadata_raw");
        break;
      case "write":
        key("checkpoint_ns", LIMITS.checkpoint_ns, true);
        key("checkpoint_id", LIMITS.checkpoint_id);
        key("task_id", LIMITS.task_id);
        key("channel", LIMITS.channel);
        text("task_path");
        text("type");
        int("idx");
        int("row_version");
        bytes("value");
        break;
      case "blob":
        key("checkpoint_ns", LIMITS.checkpoint_ns, true);
        key("channel", LIMITS.channel);
        key("version", LIMITS.version);
        text("type");
        int("row_version");
        bytes("value");
        break;
      case "end":
        end = record as EndRecord;
        return;
      default:
        throw new InvalidInputError(`${at}.kind`, 'expected "checkpoint", "write", "blob" or "end"');
    }
    const kind = r.kind as TableKind;
    // The target's keys would refuse these too, but only as a bare duplicate-key error.
    const id =
      kind === "checkpoint"
        ? [r.checkpoint_ns, r.checkpoint_id]
        : kind === "write"
          ? [r.checkpoint_ns, r.checkpoint_id, r.task_id, r.idx]
          : [r.checkpoint_ns, r.channel, r.version];
    const k = `${kind}\u0000${id.join("\u0000")}`;
    const dup = keys.get(k);
    if (dup !== undefined) throw new InvalidInputError(at, `repeats the key of records[${dup}] (a ${kind} is stored once)`);
    keys.set(k, i);
    if (kind === "checkpoint" && r.is_head === true) {
      const other = heads.get(r.checkpoint_ns as string);
      if (other !== undefined) throw new InvalidInputError(`${at}.is_head`, `records[${other}] is already the head of namespace ${JSON.stringify(r.checkpoint_ns)} (one head per lineage)`);
      heads.set(r.checkpoint_ns as string, i);
    }
    counts[kind]++;
    rows.push({ kind, record: r, at });
  });
  if (threadId === undefined) throw new InvalidInputError("records", "contain no rows of any thread");
  if (end && (end.checkpoints !== counts.checkpoint || end.writes !== counts.write || end.blobs !== counts.blob)) {
    throw new InvalidInputError(
      "records",
      `thread ${JSON.stringify(threadId)} is incomplete: its end record counts ${end.checkpoints}/${end.writes}/${end.blobs} ` +
        `checkpoints/writes/blobs, the records hold ${counts.checkpoint}/${counts.write}/${counts.blob}`,
    );
  }
  return { threadId, rows };
}
