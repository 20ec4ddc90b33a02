/**
 * langgraph-checkpoint-pg: a durable, lineage-safe Postgres checkpointer and
 * store for LangGraph.js. The package's one face: every public name, from the
 * file that defines it (docs/architecture.md draws the parts behind it).
 *
 * @example
 * ```ts
 * import { PostgresSaver, migrate } from "langgraph-checkpoint-pg";
 * ```
 */

// The saver: the core's checkpointer with the operations wing's features (src/ops/postgres-saver.ts).
export { PostgresSaver, type PostgresSaverOptions, type OpenOptions, type SetupResult, type AdoptionReport } from "./ops/postgres-saver.js";
export { ALLOW_FORK_KEY, type SaverOptions, type SetupOptions, type LineageMode } from "./saver/options.js";
export type { Upcaster, UpcastFunction, UpcastContext } from "./saver/upcast.js";
export { withConflictRetry, withRetry, type ConflictRetryOptions, type WithRetryOptions } from "./retry.js";
export { EVENT_CHANNEL, type SaverEvent, type RetentionEvent, type EventHandler, type HandlerErrorHandler, type HandlerErrorInfo } from "./events.js";

// Serialization.
export { MsgpackSerializer } from "./serde/serde.js";
export { EncryptedSerializer, ENCRYPTED_TYPE_PREFIX, type EncryptedSerializerOptions, type EncryptionKey } from "./serde/encryption.js";
export type { ValueRow, RowBoundSerializer, SealingSerializer } from "./serde/rowserde.js";

// The database: migrations, pools, the embedded database.
export { migrate } from "./ops/migrate.js";
export {
  loadMigrations,
  latestVersion,
  schemaVersion,
  MIGRATIONS_TABLE,
  DEFAULT_RETRY,
  type MigrateOptions,
  type MigrateResult,
  type Migration,
  type AdoptOption,
  type RetryOptions,
  type TargetOptions,
} from "./db/migrate.js";
export { COMPATIBILITY, type MigrationCompatibility } from "./db/compat.js";
export { BOUNDED_POOL, type PGliteLike } from "./db/db.js";
export { openEmbedded, lockDataDir, DEFAULT_DATA_DIR, type EmbeddedDatabase, type OpenEmbeddedOptions } from "./db/embedded.js";
export type { OpenLocationOptions } from "./db/open.js";
export { ADOPTION_SQLSTATE, type AdoptionRecord, type AdoptionState, type AdoptionSummary } from "./db/official.js";

// Operations: plain functions over a migrated schema.
export { finishAdoption, adoptionStatus, type FinishAdoptionOptions, type FinishAdoptionResult } from "./ops/adopt-steps.js";
export { rollbackAdoption, type RollbackAdoptionOptions, type RollbackAdoptionResult } from "./ops/rollback.js";
export { grantStatements, type GrantOptions } from "./ops/grants.js";
export { reencrypt, type ReencryptOptions, type ReencryptResult, type ReencryptCounts } from "./ops/reencrypt.js";
export { compact, type CompactOptions, type CompactResult, type CompactCounts, type CompactProgress } from "./ops/compact.js";
export { prune, type PruneOptions, type PruneResult, type PruneProgress, type PruneCounts, type PruneThreadCounts, type PruneKept } from "./ops/prune.js";
export type { RetentionOptions } from "./ops/retention.js";
export type { CopyThreadOptions, CopyThreadResult } from "./ops/copy.js";
export { listThreads, history, threadIds, type InspectOptions, type ThreadSummary, type HistoryEntry, type Lineage } from "./ops/inspect.js";
export { migrationStatus, type MigrationStatus } from "./ops/status.js";
export { show, type StoredCheckpoint } from "./ops/show.js";
export { exportThread, importThread, exportHeader, checkRecords, importColumns, type ImportResult } from "./ops/transfer.js";
export {
  EXPORT_FORMAT,
  EXPORT_FORMAT_VERSION,
  type ExportHeader,
  type ExportRecord,
  type CheckpointRecord,
  type WriteRecord,
  type BlobRecord,
  type EndRecord,
} from "./ops/transfer-format.js";
export type { Columns as ImportColumns, Column as ImportColumn } from "./ops/transfer-check.js";
export { readExportLines, MAX_EXPORT_LINE_BYTES, type ExportLine } from "./ops/transfer-lines.js";
export { toJsonSafe } from "./ops/decode.js";

// The store (LangGraph's BaseStore); also `langgraph-checkpoint-pg/store` (src/store/index.ts).
export { PostgresStore, type StoreStats } from "./store/store.js";
export type { PostgresStoreConfig, PostgresStoreOptions, SearchMode, StoreOpenOptions, StoreSearchOptions, StoreSetupOptions, TTLConfig } from "./store/options.js";
export type { DistanceMetric, Embeddings, EmbeddingsFunc, IndexConfig, VectorIndexType } from "./store/vector.js";
export { migrateStore, type MigrateStoreOptions, type MigrateStoreResult } from "./store/migrate.js";
export { STORE_COMPATIBILITY, STORE_MIGRATIONS_TABLE } from "./store/migrations.js";
export type { StoreAdoptOption, StoreAdoptionSummary } from "./store/adopt.js";

// Errors.
export {
  CheckpointerError,
  InvalidInputError,
  PayloadTooLargeError,
  InvalidOptionsError,
  SchemaNotMigratedError,
  SchemaTooNewError,
  MigrationError,
  PartitionsMismatchError,
  UnsafeSchemaError,
  AdoptionRequiredError,
  AdoptionRolledBackError,
  CheckpointConflictError,
  CheckpointParentMissingError,
  ThreadDeletedError,
  ThreadCopyError,
  type ThreadCopyRefusal,
  SerializationError,
  DeserializationError,
  DatabaseOperationError,
  UnconfirmedCommitError,
  HistoryCorruptError,
  StateVersionError,
  ThreadExistsError,
  ExportLineTooLongError,
  MAX_LINE_BYTES_CEILING,
  DataDirLockedError,
  DatabaseUrlMissingError,
  type LockInfo,
  StoreAdoptionRequiredError,
  StoreIndexMismatchError,
  VectorExtensionMissingError,
  type VectorIndexShape,
  isRetryable,
  sqlStateOf,
  type CheckpointerErrorCode,
  type OfficialTables,
} from "./errors.js";
