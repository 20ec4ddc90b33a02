/**
 * The store: LangGraph's long-term memory (`BaseStore`) in the same Postgres
 * as the checkpointer, a drop-in for the official `PostgresStore`. The class
 * is in store.ts, its batches (and the checks and SQL of each kind of
 * operation) in batch.ts; its options in options.ts; its input checks in input.ts;
 * its statements in queries.ts, built with sql.ts, their filters compiled by
 * filter.ts; TTL and the sweeper in ttl.ts; vector search (pgvector) in
 * vector.ts, its ranking statement (through the index) in vector-search.ts;
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
