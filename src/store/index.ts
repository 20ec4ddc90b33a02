/**
 * The store: LangGraph's long-term memory (`BaseStore`) in the same Postgres
 * as the checkpointer, a drop-in for the official `PostgresStore`. The class
 * is in store.ts, its batches (and the checks of each kind of operation) in
 * batch.ts; its options in options.ts; its input checks in input.ts; its
 * statements in sql/, each written whole (sql/index.ts lists them), search
 * filters compiled by sql/filter.ts; the TTL sweeper in ttl.ts; vector search
 * (pgvector: the index option, the embedder, the vector table) in vector.ts;
 * its table in schema.ts and its migrations (a track of their own) in
 * migrations.ts and migrate.ts; switching from the official store in adopt.ts. This file is what the package exports from the folder, also as
 * `langgraph-checkpoint-pg/store`.
 *
 * @example
 * ```ts
 * import { PostgresStore } from "langgraph-checkpoint-pg/store";
 * ```
 */
export { PostgresStore, type StoreStats } from "./store.js";
export type { PostgresStoreConfig, PostgresStoreOptions, SearchMode, StoreOpenOptions, StoreSearchOptions, StoreSetupOptions, TTLConfig } from "./options.js";
export type { DistanceMetric, Embeddings, EmbeddingsFunc, IndexConfig, VectorIndexType } from "./vector.js";
export { migrateStore, type MigrateStoreOptions, type MigrateStoreResult } from "./migrate.js";
export { STORE_COMPATIBILITY, STORE_MIGRATIONS_TABLE } from "./migrations.js";
export type { StoreAdoptOption, StoreAdoptionSummary } from "./adopt.js";
export { PartitionsMismatchError, StoreAdoptionRequiredError, StoreIndexMismatchError, VectorExtensionMissingError, type VectorIndexShape } from "../errors.js";
