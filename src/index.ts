/**
 * langgraph-checkpoint-pg: a durable, lineage-safe Postgres checkpointer for LangGraph.js.
 *
 * @example
 * ```ts
 * import { PostgresSaver, migrate } from "langgraph-checkpoint-pg";
 * ```
 */
export { PostgresSaver, ALLOW_FORK_KEY, BOUNDED_POOL, type PostgresSaverOptions, type SetupOptions, type LineageMode } from "./saver.js";
export {
  migrate,
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
export { finishAdoption, adoptionStatus, type FinishAdoptionOptions, type FinishAdoptionResult } from "./ops/adopt-steps.js";
export { rollbackAdoption, type RollbackAdoptionOptions, type RollbackAdoptionResult } from "./ops/rollback.js";
export { ADOPTION_SQLSTATE, type AdoptionRecord, type AdoptionState, type AdoptionSummary } from "./ops/adopt.js";
export { COMPATIBILITY, type MigrationCompatibility } from "./db/compat.js";
export { MsgpackSerializer } from "./serde.js";
export { EncryptedSerializer, ENCRYPTED_TYPE_PREFIX, type EncryptedSerializerOptions, type EncryptionKey } from "./serde/encryption.js";
export { grantStatements, type GrantOptions } from "./ops/grants.js";
export { reencrypt, type ReencryptOptions, type ReencryptResult, type ReencryptCounts } from "./ops/reencrypt.js";
export type { ValueRow, RowBoundSerializer } from "./serde/rowserde.js";
export type { SaverEvent, EventHandler, HandlerErrorHandler, HandlerErrorInfo } from "./events.js";
export { StateVersionError, type Upcaster, type UpcastFunction, type UpcastContext } from "./serde/upcast.js";
export { openEmbedded, lockDataDir, DataDirLockedError, DEFAULT_DATA_DIR, type EmbeddedDatabase, type LockInfo, type OpenEmbeddedOptions } from "./db/embedded.js";
export type { PGliteLike } from "./db/db.js";
export { withConflictRetry, withRetry, type ConflictRetryOptions, type WithRetryOptions } from "./retry.js";
export {
  CheckpointerError,
  InvalidInputError,
  PayloadTooLargeError,
  InvalidOptionsError,
  SchemaNotMigratedError,
  SchemaTooNewError,
  MigrationError,
  UnsafeSchemaError,
  AdoptionRequiredError,
  AdoptionRolledBackError,
  CheckpointConflictError,
  CheckpointParentMissingError,
  SerializationError,
  DeserializationError,
  DatabaseOperationError,
  UnconfirmedCommitError,
  HistoryCorruptError,
  isRetryable,
  sqlStateOf,
  type CheckpointerErrorCode,
  type OfficialTables,
} from "./errors.js";
export { prune, type PruneOptions, type PruneResult, type PruneProgress, type PruneCounts, type PruneThreadCounts } from "./ops/prune.js";
export {
  migrationStatus,
  listThreads,
  history,
  show,
  threadIds,
  type InspectOptions,
  type MigrationStatus,
  type ThreadSummary,
  type HistoryEntry,
  type Lineage,
  type StoredCheckpoint,
} from "./ops/inspect.js";
export {
  exportThread,
  importThread,
  exportHeader,
  checkRecords,
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
} from "./ops/transfer.js";
export { toJsonSafe } from "./ops/decode.js";
