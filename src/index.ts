/**
 * langgraph-checkpoint-pg: a durable, lineage-safe Postgres checkpointer for LangGraph.js.
 *
 * @example
 * ```ts
 * import { PostgresSaver, migrate } from "langgraph-checkpoint-pg";
 * ```
 */
export * from "./saver/index.js";
export * from "./db/index.js";
export * from "./ops/index.js";
export * from "./serde/index.js";
// The store (LangGraph's BaseStore); also `langgraph-checkpoint-pg/store`.
export * from "./store/index.js";
export type { SaverEvent, RetentionEvent, EventHandler, HandlerErrorHandler, HandlerErrorInfo } from "./events.js";
export { withConflictRetry, withRetry, type ConflictRetryOptions, type WithRetryOptions } from "./retry.js";
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
  isRetryable,
  sqlStateOf,
  type CheckpointerErrorCode,
  type OfficialTables,
} from "./errors.js";
