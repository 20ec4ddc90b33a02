/**
 * The operations tools: plain functions over a migrated schema, run from code,
 * the CLI or CI while graphs keep running. Retention (prune.ts, its statements
 * in prune-sql.ts, its options in prune-options.ts), reading the tables
 * (inspect.ts, decode.ts), export and import of threads (transfer*.ts),
 * switching from the official saver (adopt*.ts, rollback.ts), least-privilege
 * grants (grants.ts), re-encryption (reencrypt.ts) and the conversion of
 * values stored whole into element storage (compact.ts). This file is what the
 * package exports from the folder.
 */
export { finishAdoption, adoptionStatus, type FinishAdoptionOptions, type FinishAdoptionResult } from "./adopt-steps.js";
export { rollbackAdoption, type RollbackAdoptionOptions, type RollbackAdoptionResult } from "./rollback.js";
export { ADOPTION_SQLSTATE, type AdoptionRecord, type AdoptionState, type AdoptionSummary } from "./adopt.js";
export { grantStatements, type GrantOptions } from "./grants.js";
export { reencrypt, type ReencryptOptions, type ReencryptResult, type ReencryptCounts } from "./reencrypt.js";
export { compact, type CompactOptions, type CompactResult, type CompactCounts, type CompactProgress } from "./compact.js";
export { prune, type PruneOptions, type PruneResult, type PruneProgress, type PruneCounts, type PruneThreadCounts, type PruneKept } from "./prune.js";
export { listThreads, history, threadIds, type InspectOptions, type ThreadSummary, type HistoryEntry, type Lineage } from "./inspect.js";
export { migrationStatus, type MigrationStatus } from "./status.js";
export { show, type StoredCheckpoint } from "./show.js";
export {
  exportThread,
  importThread,
  exportHeader,
  checkRecords,
  importColumns,
  ThreadExistsError,
  EXPORT_FORMAT,
  EXPORT_FORMAT_VERSION,
  type ExportHeader,
  type ExportRecord,
  type CheckpointRecord,
  type WriteRecord,
  type BlobRecord,
  type EndRecord,
  type ImportResult,
} from "./transfer.js";
export type { Columns as ImportColumns, Column as ImportColumn } from "./transfer-check.js";
export { readExportLines, ExportLineTooLongError, MAX_EXPORT_LINE_BYTES, MAX_LINE_BYTES_CEILING, type ExportLine } from "./transfer-lines.js";
export { toJsonSafe } from "./decode.js";
