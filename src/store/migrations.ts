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
import type { Table } from "drizzle-orm";
import { migrationNumber } from "../errors.js";
import type { MigrationCompatibility } from "../db/compat.js";
import type { MigrationTrack } from "../db/migrations.js";
import type { storeItems } from "./schema.js";

type Names<T extends Table> = { readonly table: T["_"]["name"] } & { readonly [K in keyof T["_"]["columns"]]: T["_"]["columns"][K]["_"]["name"] };

/**
 * The SQL names of the items' table and columns, checked against schema.ts when the package
 * compiles (`satisfies`), for the code that names them outside the store's statements (this
 * track, grants). The statements (sql/) write them as the migrations create them, and a test
 * prepares each against a migrated schema.
 */
export const ITEMS = {
  table: "store_items",
  nsKey: "ns_key",
  key: "key",
  value: "value",
  createdAt: "created_at",
  updatedAt: "updated_at",
  expiresAt: "expires_at",
  ttlMinutes: "ttl_minutes",
} as const satisfies Names<typeof storeItems>;

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
