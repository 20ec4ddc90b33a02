/**
 * The store's migrations: a track of their own (src/db/migrations.ts), in
 * `migrations/store/` (drizzle-kit output of src/store/schema.ts; `npm run
 * generate` writes both tracks), recorded in `checkpointer_store_migrations`.
 * Numbered apart from the checkpointer's so that the two never claim the same
 * number, and so that a checkpointer-only schema never gets the store's table.
 *
 * Compatibility levels work as for the checkpointer (see src/db/compat.ts),
 * counted in store migrations. Adding a store migration: add its entry below.
 */
import { migrationNumber } from "../errors.js";
import type { MigrationCompatibility } from "../db/compat.js";
import type { MigrationTrack } from "../db/migrations.js";
import { ITEMS } from "./queries.js";

/** The table that records the store's applied migrations, inside the store's schema. */
export const STORE_MIGRATIONS_TABLE = "checkpointer_store_migrations";
/** The store's tables, in the order a migration locks them. */
export const STORE_TABLES = ["store_items", "store_item_vectors"] as const;

/**
 * By store migration version (1-based: `0000_store_init` is 1). Released entries never change.
 *
 * @example
 * ```ts
 * STORE_COMPATIBILITY[1]; // { compatibleFrom: 1, why: "0000_store_init creates the store's table" }
 * ```
 */
export const STORE_COMPATIBILITY: Readonly<Record<number, MigrationCompatibility>> = {
  1: { compatibleFrom: 1, why: "0000_store_init creates the store's table" },
  2: { compatibleFrom: 0, why: "0001_store_namespace_index adds an index (for listNamespaces)" },
};

/** The store's track, for the runner and the schema checks of src/db. */
export const STORE_TRACK: MigrationTrack = {
  name: "store",
  folder: "store",
  table: STORE_MIGRATIONS_TABLE,
  ownTables: STORE_TABLES,
  partitionKey: ITEMS.nsKey,
  firstTable: ITEMS.table,
  compatibleFrom(version) {
    const entry = STORE_COMPATIBILITY[version];
    if (!entry) throw new Error(`store migration ${migrationNumber(version)} declares no compatibility level in src/store/migrations.ts`);
    return entry.compatibleFrom;
  },
};
