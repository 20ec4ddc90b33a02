/**
 * The checks an import runs on a thread's records before it writes anything
 * (transfer.ts): every field as Postgres will read it, so that nothing fails
 * half-way through a file in the database, and nothing is stored that a read
 * cannot use. Integers within their column's range (an `idx` is an int4),
 * timestamps in the ISO form exports write (Postgres reads `"1"` not as a
 * time, JavaScript's `Date.parse` does), JSON Postgres accepts (no NUL, no
 * lone surrogate), text it stores unchanged, and the checkpoint's shape
 * (`channel_versions` an object of versions, and so on). Errors name the
 * record and the field: `records[12].checkpoint.channel_versions`, and
 * name what the record holds only cut short ({@link shown}): an id or a key
 * that failed its check may be megabytes long, or personal data (issue 37).
 *
 * The column types come from the target (`Columns`, read by transfer.ts);
 * {@link SCHEMA_COLUMNS} are this release's, used before any SQL runs (a test
 * compares them with a migrated schema).
 */
import { CHECKPOINT_BLOBS, CHECKPOINT_WRITES, CHECKPOINTS } from "../db/names.js";
import { InvalidInputError } from "../errors.js";
import { checkKey, LIMITS, LONE_SURROGATE } from "../validate.js";
// transfer.ts imports this file too: its constants are read only when a check runs.
import { EXPORT_FORMAT, EXPORT_FORMAT_VERSION, type EndRecord, type ExportHeader, type ExportRecord } from "./transfer-format.js";

/** Which table a record is a row of. */
export const TABLES = { checkpoint: CHECKPOINTS.table, write: CHECKPOINT_WRITES.table, blob: CHECKPOINT_BLOBS.table } as const;
export type TableKind = keyof typeof TABLES;

/** A column as an import needs to know it: its type (`pg_type.typname`), whether it takes NULL, whether it has a default. */
export interface Column {
  type: string;
  nullable: boolean;
  defaulted: boolean;
  /** Not a column: a checkpoint's `is_head`, which the heads table holds. */
  head?: true;
}

/** Each table's columns, by name. */
export type Columns = Record<TableKind, ReadonlyMap<string, Column>>;

const col = (type: string, nullable = false, defaulted = false): Column => ({ type, nullable, defaulted });

/** This release's columns (test/ops/import.test.ts compares them with a migrated schema). */
export const SCHEMA_COLUMNS: Columns = {
  checkpoint: new Map([
    ["thread_id", col("text")],
    ["checkpoint_ns", col("text", false, true)],
    ["checkpoint_id", col("text")],
    ["parent_checkpoint_id", col("text", true)],
    ["checkpoint", col("jsonb")],
    ["metadata", col("jsonb", false, true)],
    ["metadata_raw", col("bytea", true)],
    ["row_version", col("int8", false, true)],
    ["created_at", col("timestamptz", false, true)],
    ["ttl_seconds", col("int4", true)],
    ["state_version", col("int4", true)],
    ["has_pending_tasks", col("bool", false, true)],
    ["unversioned_type", col("text", true)],
    ["unversioned_values", col("bytea", true)],
    ["is_head", { type: "bool", nullable: false, defaulted: false, head: true }],
  ]),
  write: new Map([
    ["thread_id", col("text")],
    ["checkpoint_ns", col("text", false, true)],
    ["checkpoint_id", col("text")],
    ["task_id", col("text")],
    ["idx", col("int4")],
    ["channel", col("text")],
    ["type", col("text")],
    ["value", col("bytea", true)],
    ["task_path", col("text", false, true)],
    ["row_version", col("int8", false, true)],
    ["created_at", col("timestamptz", false, true)],
  ]),
  blob: new Map([
    ["thread_id", col("text")],
    ["checkpoint_ns", col("text", false, true)],
    ["channel", col("text")],
    ["version", col("text")],
    ["type", col("text")],
    ["value", col("bytea", true)],
    ["row_version", col("int8", false, true)],
  ]),
};

/** Characters of a record's string that a message shows: a UUID whole, never a payload. */
const SHOWN_CHARS = 40;
/** Levels of a JSON path that a message shows: a value nested deeper is named by its first levels and `…`. */
const SHOWN_LEVELS = 12;

/**
 * A value of a record as a message names it, before (or without) a check of
 * its size: a string as JSON, cut to its first 40 characters (then its
 * length); a number or boolean as it is; anything else by its kind.
 *
 * @example
 * ```ts
 * shown("x".repeat(1e6)); // "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"… (1000000 characters)"
 * ```
 */
export function shown(value: unknown): string {
  if (typeof value === "string") return value.length > SHOWN_CHARS ? `${JSON.stringify(value.slice(0, SHOWN_CHARS))}… (${value.length} characters)` : JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  return Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value;
}

/** Record fields that are not columns: informational, never written. */
export const NOT_COLUMNS = new Set(["kind", "decoded", "metadata_decoded", "unversioned_decoded"]);

/**
 * Padded base64. Not one regular expression of 4-character groups: V8 runs
 * out of stack on a repeated group over a few megabytes (a large value).
 */
const isBase64 = (s: string): boolean => s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);
const INT4 = 2 ** 31;
/** What exports write (`to_jsonb` of a timestamptz), and the ISO 8601 forms Postgres reads the same way. */
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?(?:Z|[+-](\d{2})(?::?(\d{2}))?)$/;

/** Whether `s` is a timestamp Postgres reads as the moment it says: a real date and time, an offset it accepts. */
function isTimestamp(s: string): boolean {
  const m = TIMESTAMP.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((x) => (x === undefined ? 0 : Number(x)));
  const days = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  return year! >= 1 && month! >= 1 && month! <= 12 && day! >= 1 && day! <= days && hour! <= 23 && minute! <= 59 && second! <= 59 && offsetHours! <= 15 && offsetMinutes! <= 59;
}

/** A string Postgres stores as given: no NUL (text cannot hold it), no lone surrogate (it would become U+FFFD). */
function checkText(field: string, s: string): void {
  if (s.includes("\u0000")) throw new InvalidInputError(field, "must not contain NUL (\\u0000) characters (Postgres text cannot hold them)");
  if (LONE_SURROGATE.test(s)) throw new InvalidInputError(field, "is not valid Unicode (a lone surrogate: half of a character)");
}

/**
 * A JSON value Postgres's jsonb accepts: every string and key without NUL or lone surrogates (walked without
 * recursion). The path in a message shows keys cut short, and its first levels only (a value may nest deep).
 */
function checkJson(field: string, value: unknown): void {
  const stack: { v: unknown; path: () => string; depth: number }[] = [{ v: value, path: () => field, depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    const below = (segment: () => string) => (depth < SHOWN_LEVELS ? () => `${path()}${segment()}` : depth === SHOWN_LEVELS ? () => `${path()}…` : path);
    if (typeof v === "string") {
      if (v.includes("\u0000")) throw new InvalidInputError(path(), "Postgres JSON cannot hold NUL (\\u0000) characters");
      if (LONE_SURROGATE.test(v)) throw new InvalidInputError(path(), "Postgres JSON cannot hold a lone surrogate (half of a character)");
    } else if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push({ v: x, path: below(() => `[${i}]`), depth: depth + 1 }));
    } else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        const at = below(() => `[${shown(k)}]`);
        if (k.includes("\u0000") || LONE_SURROGATE.test(k)) throw new InvalidInputError(at(), "Postgres JSON cannot hold this key (NUL or a lone surrogate)");
        stack.push({ v: x, path: at, depth: depth + 1 });
      }
    } else if (typeof v === "number" && !Number.isFinite(v)) {
      throw new InvalidInputError(path(), "expected a finite number");
    }
  }
}

/** One field of a record against its column's type. */
function checkField(field: string, value: unknown, column: Column): void {
  if (value === undefined) {
    if (!column.nullable && !column.defaulted) throw new InvalidInputError(field, "is missing");
    return;
  }
  if (value === null) {
    if (!column.nullable) throw new InvalidInputError(field, "must not be null");
    return;
  }
  switch (column.type) {
    case "text":
      if (typeof value !== "string") throw new InvalidInputError(field, "expected a string");
      return checkText(field, value);
    case "int2":
    case "int4":
    case "int8": {
      const range = column.type === "int2" ? 2 ** 15 : column.type === "int4" ? INT4 : 2 ** 53;
      const ok = typeof value === "number" && Number.isSafeInteger(value) && value >= -range && value < range;
      if (!ok) throw new InvalidInputError(field, column.type === "int8" ? "expected an integer" : `expected an integer from ${-range} to ${range - 1} (${column.type})`);
      return;
    }
    case "bool":
      if (typeof value !== "boolean") throw new InvalidInputError(field, "expected a boolean");
      return;
    case "timestamptz":
      if (typeof value !== "string" || !isTimestamp(value)) {
        throw new InvalidInputError(field, "expected a timestamp as Postgres reads it, in ISO 8601 (2026-01-31T12:00:00.123456+00:00), a real date and time");
      }
      return;
    case "jsonb":
    case "json":
      return checkJson(field, value);
    case "bytea":
      if (typeof value !== "string" || !isBase64(value)) throw new InvalidInputError(field, "expected base64 or null");
      return;
    default:
      // A column of a type this release does not write (a newer schema's): Postgres judges it.
      if (typeof value === "string") checkText(field, value);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

function checkVersion(field: string, v: unknown): void {
  if (typeof v === "string") checkKey(field, v, LIMITS.version);
  else if (typeof v !== "number" || !Number.isFinite(v)) throw new InvalidInputError(field, "expected a version (a string or a number)");
}

/** A map of channel versions, as `channel_versions` and each entry of `versions_seen` hold. */
function checkVersions(field: string, v: unknown): void {
  if (!isObject(v)) throw new InvalidInputError(field, "expected an object of channel versions");
  for (const [channel, version] of Object.entries(v)) {
    checkKey(`${field} key ${shown(channel)}`, channel, LIMITS.channel);
    checkVersion(`${field}[${JSON.stringify(channel)}]`, version);
  }
}

/** The stored checkpoint (without its values): what the read path and prune interpret of it. */
function checkCheckpoint(at: string, cp: unknown, checkpointId: string): void {
  const field = `${at}.checkpoint`;
  if (!isObject(cp)) throw new InvalidInputError(field, "expected an object");
  if (cp.v !== undefined && (typeof cp.v !== "number" || !Number.isInteger(cp.v))) throw new InvalidInputError(`${field}.v`, "expected an integer (the checkpoint format)");
  if (cp.id !== undefined && cp.id !== checkpointId) {
    throw new InvalidInputError(`${field}.id`, `is ${shown(cp.id)}, but the record's checkpoint_id is ${JSON.stringify(checkpointId)}`);
  }
  if (cp.ts !== undefined && typeof cp.ts !== "string") throw new InvalidInputError(`${field}.ts`, "expected a string");
  if (cp.channel_versions !== undefined) {
    if (!isObject(cp.channel_versions)) throw new InvalidInputError(`${field}.channel_versions`, "expected an object of channel versions");
    checkVersions(`${field}.channel_versions`, cp.channel_versions);
  }
  if (cp.versions_seen !== undefined) {
    if (!isObject(cp.versions_seen)) throw new InvalidInputError(`${field}.versions_seen`, "expected an object (node: channel versions)");
    for (const [node, seen] of Object.entries(cp.versions_seen)) checkVersions(`${field}.versions_seen[${shown(node)}]`, seen);
  }
  if (cp.channel_values !== undefined && !isObject(cp.channel_values)) throw new InvalidInputError(`${field}.channel_values`, "expected an object");
  for (const list of ["updated_channels", "pending_sends"] as const) {
    if (cp[list] !== undefined && cp[list] !== null && !Array.isArray(cp[list])) throw new InvalidInputError(`${field}.${list}`, "expected an array");
  }
  if (Array.isArray(cp.updated_channels)) cp.updated_channels.forEach((c, i) => checkKey(`${field}.updated_channels[${i}]`, c, LIMITS.channel));
}

/** One thread's records, checked: its id and its rows, in order. */
export interface Validated {
  threadId: string;
  rows: { kind: TableKind; record: Record<string, unknown>; at: string }[];
}

/**
 * Check one thread's records as {@link importThread} does before it writes
 * anything; throws {@link InvalidInputError} naming the record and field.
 * `columns`: the target's (fields that are not its columns are refused); by
 * default this release's, and fields it does not know are left to the target.
 */
export function validateRecords(records: readonly (ExportRecord | ExportHeader)[], columns?: Columns): Validated {
  if (!Array.isArray(records)) throw new InvalidInputError("records", "expected an array of export records");
  const known = columns ?? SCHEMA_COLUMNS;
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
    if (r.kind === "header") {
      if (r.format !== EXPORT_FORMAT) throw new InvalidInputError(`${at}.format`, `expected ${JSON.stringify(EXPORT_FORMAT)}`);
      if (typeof r.version !== "number" || r.version > EXPORT_FORMAT_VERSION) {
        throw new InvalidInputError(`${at}.version`, `format version ${shown(r.version)} is newer than this code reads (${EXPORT_FORMAT_VERSION})`);
      }
      return;
    }
    if (end) throw new InvalidInputError(at, "comes after the thread's end record");
    const tid = checkKey(`${at}.thread_id`, r.thread_id, LIMITS.thread_id);
    if (threadId === undefined) threadId = tid;
    else if (tid !== threadId) throw new InvalidInputError(`${at}.thread_id`, `is ${JSON.stringify(tid)}, but these records are for thread ${JSON.stringify(threadId)}`);
    if (r.kind === "end") {
      end = record as EndRecord;
      return;
    }
    if (r.kind !== "checkpoint" && r.kind !== "write" && r.kind !== "blob") throw new InvalidInputError(`${at}.kind`, 'expected "checkpoint", "write", "blob" or "end"');
    const kind: TableKind = r.kind;
    checkRecord(at, r, kind, known[kind], columns !== undefined);
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

/**
 * One record's fields: its keys by kind, then every field against its column (what the target
 * would refuse, or alter, is refused here); `strict`: a field the target has no column for too.
 */
function checkRecord(at: string, r: Record<string, unknown>, kind: TableKind, table: Columns[TableKind], strict: boolean): void {
  const key = (field: string, limit: number, allowEmpty = false) => checkKey(`${at}.${field}`, r[field], limit, { allowEmpty });
  key("checkpoint_ns", LIMITS.checkpoint_ns, true);
  switch (kind) {
    case "checkpoint":
      key("checkpoint_id", LIMITS.checkpoint_id);
      if (r.parent_checkpoint_id !== null && r.parent_checkpoint_id !== undefined) key("parent_checkpoint_id", LIMITS.checkpoint_id);
      if (typeof r.is_head !== "boolean") throw new InvalidInputError(`${at}.is_head`, "expected a boolean");
      checkCheckpoint(at, r.checkpoint, r.checkpoint_id as string);
      if (r.metadata === undefined) throw new InvalidInputError(`${at}.metadata`, "is missing");
      if (!isObject(r.metadata)) throw new InvalidInputError(`${at}.metadata`, "expected an object");
      break;
    case "write":
      key("checkpoint_id", LIMITS.checkpoint_id);
      key("task_id", LIMITS.task_id);
      key("channel", LIMITS.channel);
      if (r.task_path !== undefined) key("task_path", LIMITS.task_path, true);
      break;
    case "blob":
      key("channel", LIMITS.channel);
      key("version", LIMITS.version);
      break;
  }
  for (const [name, column] of table) if (!column.head) checkField(`${at}.${name}`, r[name], column);
  if (!strict) return;
  for (const name of Object.keys(r)) {
    if (!NOT_COLUMNS.has(name) && !table.has(name)) {
      throw new InvalidInputError(`${at}.${name.length > SHOWN_CHARS ? shown(name) : name}`, `is not a column of ${TABLES[kind]} in the target schema (an export from a newer schema?)`);
    }
  }
}
