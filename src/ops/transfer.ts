/**
 * Export and import of whole threads (`export` / `import` in the CLI, see
 * cli/transfer.ts): every row of a thread as JSON records, bytes as base64
 * (decoded views alongside on request), and back, validated before any SQL
 * and written in one transaction. Moves threads between schemas, databases
 * and releases.
 *
 * Rows are exported as stored, so a value stored by content (saver/stored.ts)
 * comes as its own row, which names element rows by hash, and each element
 * row comes once per thread and namespace: an export grows with what the
 * thread holds, as its tables do, not with how many versions repeat it
 * (issue #27: before, every list version was decoded whole, and a 200-turn
 * chat exported to 8.7x its size on disk).
 */
import type { Db } from "../db/db.js";
import { CheckpointerError, DatabaseOperationError, InvalidInputError, sqlStateOf } from "../errors.js";
import { latestVersion } from "../db/migrate.js";
import type { ValueRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { checkKey, LIMITS, quoteIdent } from "../validate.js";
import { suggest, type SuggestedCommand } from "../hint.js";
import { decodeMetadataRaw, decodeSafe, outlineSafe, toJsonSafe } from "./decode.js";
import { open, run, type InspectOptions } from "./inspect.js";
import { COL } from "../db/names.js";
import { compact, type CompactResult } from "./compact.js";
import { ELEMENTS_CHANNEL } from "../saver/elements.js";
import { namesElements } from "../saver/stored.js";
import { NOT_COLUMNS, TABLES, validateRecords, type Column, type Columns, type TableKind } from "./transfer-check.js";
import { EXPORT_FORMAT, EXPORT_FORMAT_VERSION, type BlobRecord, type CheckpointRecord, type EndRecord, type ExportHeader, type ExportRecord, type WriteRecord } from "./transfer-format.js";
import { ThreadExistsError } from "../errors.js";


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

/**
 * Columns of the three tables in `schema` (type, NULL, default), in table
 * order; checkpoints also carry `is_head`, so an export names the heads and
 * reads the same whatever table keeps them.
 */
async function tableColumns(db: Pick<Db, "query">, schema: string): Promise<Columns> {
  const rows = await run<{ table: string; name: string; type: string; nullable: boolean; defaulted: boolean }>(
    db,
    "reading table columns",
    `SELECT c.relname AS table, a.attname AS name, t.typname AS type, NOT a.attnotnull AS nullable, a.atthasdef AS defaulted
       FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`,
    [schema, Object.values(TABLES)],
  );
  const out = { checkpoint: new Map(), write: new Map(), blob: new Map() } as Record<TableKind, Map<string, Column>>;
  for (const r of rows) {
    const kind = (Object.keys(TABLES) as TableKind[]).find((k) => TABLES[k] === r.table)!;
    out[kind].set(r.name, { type: r.type, nullable: r.nullable, defaulted: r.defaulted });
  }
  out.checkpoint.set("is_head", { type: "bool", nullable: false, defaulted: false, head: true });
  return out;
}

/**
 * The target's columns, for {@link checkRecords}: records checked against
 * them are refused before anything is written, as an import would refuse them.
 *
 * @example
 * ```ts
 * const columns = await importColumns({ pool, schema: "restored" });
 * for (const records of threads) checkRecords(records, columns); // every thread first, then import
 * ```
 */
export async function importColumns(options: Omit<InspectOptions, "serde">): Promise<Columns> {
  const { db, schema } = await open(options);
  return tableColumns(db, schema);
}

/** `to_jsonb` writes bytea as `\x` + hex. */
const hexToBytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex.slice(2), "hex"));
const hexToBase64 = (hex: unknown): string | null => (typeof hex === "string" ? Buffer.from(hex.slice(2), "hex").toString("base64") : null);

/**
 * Every stored row of a thread (all namespaces, every column), read in one
 * consistent snapshot: checkpoints, then writes, then blobs, then an `end`
 * record. Empty (no records at all) when the thread does not exist.
 *
 * `decoded: true` adds a readable view of each value (`decoded`,
 * `metadata_decoded`, `unversioned_decoded`; ignored on import), decoded
 * with `serde`. Off by default: an import needs only the stored bytes, and
 * the views make an export about 1.5 times as large (with them, a long
 * chat's export is larger than its tables: docs/cli.md); `show` reads a
 * checkpoint decoded.
 *
 * @example
 * ```ts
 * for (const record of await exportThread({ pool, threadId: "12345" })) out.write(JSON.stringify(record) + "\n");
 * const readable = await exportThread({ pool, threadId: "12345", decoded: true });
 * ```
 */
export async function exportThread(options: InspectOptions & { threadId: string; decoded?: boolean }): Promise<ExportRecord[]> {
  const threadId = checkKey("threadId", options.threadId, LIMITS.thread_id);
  const decoded = options.decoded ?? false;
  if (typeof decoded !== "boolean") throw new InvalidInputError("decoded", "expected true or false");
  const { db, t, schema } = await open(options);
  const serde = options.serde ?? new MsgpackSerializer();
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
    for (const [name, col] of columns[kind]) record[name] = col.type === "bytea" ? hexToBase64(row[name]) : row[name];
    return record;
  };
  const records: ExportRecord[] = [];
  for (const { r } of cps) {
    const record = toRecord("checkpoint", r) as unknown as CheckpointRecord;
    records.push(record);
    if (!decoded) continue;
    if (typeof r.metadata_raw === "string") {
      const d = await decodeMetadataRaw(r.metadata, hexToBytes(r.metadata_raw));
      record.metadata_decoded = d.ok ? toJsonSafe(d.value) : { $type: "undecodable", error: d.error };
    }
    if (typeof r.unversioned_values === "string") {
      const row: ValueRow = { table: "checkpoints", threadId, checkpointNs: String(r.checkpoint_ns), checkpointId: String(r.checkpoint_id) };
      record.unversioned_decoded = await decodeSafe(serde, String(r.unversioned_type), hexToBytes(r.unversioned_values), row);
    }
  }
  for (const [kind, rows] of [["write", writes] as const, ["blob", blobs] as const]) {
    for (const { r } of rows) {
      const record = toRecord(kind, r) as unknown as WriteRecord | BlobRecord;
      records.push(record);
      const type = String(r.type);
      if (!decoded || type === "empty") continue;
      const row: ValueRow =
        kind === "blob"
          ? { table: "checkpoint_blobs", threadId, checkpointNs: String(r.checkpoint_ns), channel: String(r.channel), version: String(r.version) }
          : { table: "checkpoint_writes", threadId, checkpointNs: String(r.checkpoint_ns), checkpointId: String(r.checkpoint_id), taskId: String(r.task_id), idx: Number(r.idx) };
      record.decoded = await outlineSafe(serde, type, typeof r.value === "string" ? hexToBytes(r.value) : null, row);
    }
  }
  records.push({ kind: "end", thread_id: threadId, checkpoints: cps.length, writes: writes.length, blobs: blobs.length });
  return records;
}


/** What {@link importThread} did. */
export interface ImportResult {
  threadId: string;
  /** `imported`, or `skipped` (the thread existed and `ifExists: "skip"`). */
  status: "imported" | "skipped";
  /** Rows written, as the records held them. */
  checkpoints: number;
  writes: number;
  blobs: number;
  /** What {@link compact} then stored by content, when it ran: element storage on (the default), and records that named no element row. */
  compacted?: CompactResult;
  /**
   * Why the imported thread's values stored whole could not be stored by content (the thread is
   * imported all the same, and reads as in the source): e.g. they are encrypted and `serde` is not
   * the saver's (then `compacted.undecodable` counts them). `compact` with the saver's serializer
   * finishes the job.
   */
  compactError?: string;
}

/**
 * Write one thread's exported records into the target, byte for byte: the
 * same rows (every column: `row_version`, `created_at`, raw values and
 * their types) and the same lineage heads (`is_head`), in ONE transaction,
 * so `getState` / `getStateHistory` read exactly as in the source. The
 * records are checked before anything is written; a record field that is not
 * a column of the target table is refused (never silently dropped).
 *
 * Element storage is the default wherever values are written (issue #27):
 * a thread whose records name no element row (written with
 * `elementStorage: false`) is compacted ({@link compact}) once that
 * transaction has committed, so its values are stored by content as a put
 * would store them, and read the same. A thread whose records name element
 * rows was written with element storage, which chose each value's form: it
 * stays byte for byte as exported. Compacting decodes values with `serde`
 * (default `MsgpackSerializer`: pass the saver's when it encrypts); if it
 * fails the import stands, whole, and `compactError` says why.
 * `elementStorage: false` imports byte for byte only.
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
  options: InspectOptions & { records: readonly (ExportRecord | ExportHeader)[]; ifExists?: "fail" | "skip"; elementStorage?: boolean },
): Promise<ImportResult> {
  const ifExists = options.ifExists ?? "fail";
  if (ifExists !== "fail" && ifExists !== "skip") throw new InvalidInputError("ifExists", 'expected "fail" or "skip"');
  const elementStorage = options.elementStorage ?? true;
  if (typeof elementStorage !== "boolean") throw new InvalidInputError("elementStorage", "expected true or false");
  // Checked before any SQL (this release's columns), then against the target's, before anything is written.
  const { threadId } = validateRecords(options.records);
  const { db, t, schema } = await open(options);
  const tables = { checkpoint: t.checkpoints, write: t.writes, blob: t.blobs };
  let result: ImportResult;
  try {
    result = await db.transaction(async (tx) => {
      const columns = await tableColumns(tx, schema);
      const { rows } = validateRecords(options.records, columns);
      // Map each record onto the target's columns: bytes from base64 to bytea's `\x` text, everything else as is.
      const prepared = { checkpoint: [], write: [], blob: [] } as Record<TableKind, { row: Record<string, unknown>; size: number }[]>;
      const used = { checkpoint: new Set<string>(), write: new Set<string>(), blob: new Set<string>() };
      const heads: { ns: string[]; ids: string[] } = { ns: [], ids: [] };
      for (const { kind, record, at } of rows) {
        const row: Record<string, unknown> = {};
        let size = 0;
        for (const [name, value] of Object.entries(record)) {
          if (NOT_COLUMNS.has(name)) continue;
          const col = columns[kind].get(name)!;
          if (col.head) {
            if (value === true) {
              heads.ns.push(String(record.checkpoint_ns));
              heads.ids.push(String(record.checkpoint_id));
            }
            continue;
          }
          if (col.type === "bytea" && value !== null) {
            row[name] = `\\x${Buffer.from(value as string, "base64").toString("hex")}`;
            size += (value as string).length;
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
        throw new ThreadExistsError(threadId, schema);
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
    if (sqlStateOf(err) === "23505") throw new ThreadExistsError(threadId, schema, { cause: err });
    throw new DatabaseOperationError("importing a thread", err);
  }
  // A writer with element storage chose each value's form (small values whole, lists by their elements...): its
  // thread is imported as it was. Only a thread stored whole throughout is converted.
  const byContent = options.records.some((r) => (r.kind === "blob" || r.kind === "write") && (namesElements(r.type) || (r.kind === "blob" && r.channel === ELEMENTS_CHANNEL)));
  if (result.status !== "imported" || !elementStorage || byContent) return result;
  // After the commit, in compact's own transactions: it holds prune's and the deletion lock of the
  // thread as it rewrites, so graphs, prune and deletes may run on the imported thread meanwhile.
  try {
    result.compacted = await compact({ pool: options.pool, schema, threadIds: [threadId], ...(options.serde ? { serde: options.serde } : {}) });
    if (result.compacted.undecodable > 0) {
      result.compactError =
        `${result.compacted.undecodable} value(s) could not be decoded with the serializer given and stay whole ` +
        `(encrypted: pass the saver's serde)`;
    }
  } catch (err) {
    result.compactError = err instanceof Error ? err.message : String(err);
  }
  return result;
}

/** Rows per INSERT statement, and bytes of values (keeps each statement bounded on long threads). */
const CHUNK = 1000;
const CHUNK_BYTES = 16 * 1024 * 1024;
/**
 * Check one thread's records the way {@link importThread} does before it
 * writes anything (every field as Postgres will read it, the checkpoint's
 * shape, one thread, end-record counts); throws {@link InvalidInputError}
 * naming the record and field. With the target's `columns`
 * ({@link importColumns}), also what only the target can tell (fields it
 * has no column for). Returns the thread id.
 *
 * @example
 * ```ts
 * const threadId = checkRecords(records); // throws on the first bad field
 * ```
 */
export function checkRecords(records: readonly (ExportRecord | ExportHeader)[], columns?: Columns): string {
  return validateRecords(records, columns).threadId;
}
