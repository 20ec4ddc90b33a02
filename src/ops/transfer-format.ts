/**
 * The export format: what `export` writes and `import` reads, one JSON record
 * per line (transfer.ts writes and reads them, transfer-check.ts checks them).
 */
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
 * exact msgpack. With `decoded: true`, `metadata_decoded` shows it (ignored on import).
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

/** A row of `checkpoint_writes`: `value` is base64 of the stored bytes; with `decoded: true`, `decoded` shows it as {@link BlobRecord}'s does (ignored on import). */
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
 * A row of `checkpoint_blobs`: `value` is base64 of the stored bytes (null for `type: "empty"`). Values stored by content
 * (saver/stored.ts) come as their rows: element rows (channel `__elements__`, version the hash), each once, and the
 * value's own row (type `pg:refs`, `pg:val` or `pg:obj:<type>`), which names them.
 *
 * With `decoded: true`, `decoded` shows the value as tagged JSON (decode.ts `toJsonSafe`, ignored on import), each
 * element once (decode.ts `outlineSafe`): an element row's is its value; a chunk's `{"$type":"pg:refs","hashes":[...]}`;
 * a list's the same (hashes of chunks and elements, in order), a large value's `{"$type":"pg:val","hashes":[hash]}`, an
 * object's its fields with such a list in place of each list field.
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
