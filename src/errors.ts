/**
 * Typed errors: every name, from the one home of errors (src/errors/). Every
 * error this package throws is a {@link CheckpointerError} with a stable
 * `code`; database failures keep the driver error as `cause` (with its
 * SQLSTATE) but never copy parameters or payloads into messages. The base
 * class is in errors/base.ts; bad input and options in errors/input.ts;
 * database failures and their classification in errors/database.ts; the
 * migrations' errors in errors/schema.ts; what a thread's operations meet in
 * errors/thread.ts; values that cannot be written or read in errors/serde.ts;
 * the embedded database's in errors/embedded.ts; the store's in
 * errors/store.ts.
 */
export { CheckpointerError, type CheckpointerErrorCode } from "./errors/base.js";
export { InvalidInputError, PayloadTooLargeError, InvalidOptionsError, ExportLineTooLongError, MAX_LINE_BYTES_CEILING } from "./errors/input.js";
export { DatabaseOperationError, UnconfirmedCommitError, classify, describeFailure, failureText, isRetryable, sqlStateOf, type FailureClass } from "./errors/database.js";
export {
  AdoptionRequiredError,
  AdoptionRolledBackError,
  MigrationError,
  PartitionsMismatchError,
  SchemaNotMigratedError,
  SchemaTooNewError,
  UnsafeSchemaError,
  migrationNumber,
  type OfficialTables,
} from "./errors/schema.js";
export {
  CheckpointConflictError,
  CheckpointParentMissingError,
  HistoryCorruptError,
  StateVersionError,
  ThreadCopyError,
  ThreadDeletedError,
  ThreadExistsError,
  type ConflictReason,
  type ThreadCopyRefusal,
} from "./errors/thread.js";
export { SerializationError, DeserializationError } from "./errors/serde.js";
export { DataDirLockedError, DatabaseUrlMissingError, type LockInfo } from "./errors/embedded.js";
export { StoreAdoptionRequiredError, StoreIndexMismatchError, VectorExtensionMissingError, type VectorIndexShape } from "./errors/store.js";
