/**
 * The store's table, in drizzle: the one definition that `migrations/store/`
 * is generated from (`npm run generate`; a test fails when the two drift)
 * and whose names the store's statements (sql/) write as its migrations create them.
 * Kept apart from src/db/schema.ts: a checkpointer-only user never gets it,
 * and the store's migrations are numbered on their own (see migrations.ts).
 *
 * The vector table is not here: its column type depends on the configured
 * dimensions and needs the pgvector extension, so vector.ts creates it when
 * a store with `index` is set up.
 *
 * @example
 * ```ts
 * import { storeItems } from "./schema.js";
 * await db.select({ key: storeItems.key }).from(storeItems); // drizzle, on the store's schema (search_path)
 * ```
 */
import { customType, doublePrecision, index, jsonb, pgTable, primaryKey, timestamp } from "drizzle-orm/pg-core";

/** Byte-wise ordering whatever the database locale: prefix ranges and listing order match JavaScript's. */
const key = customType<{ data: string }>({ dataType: () => 'text COLLATE "C"' });

/**
 * One item: namespace -> key -> JSON value, with its times. `expires_at` is
 * NULL for an item without TTL; `ttl_minutes` is the TTL it was put with, so
 * a read refreshes it by that item's own TTL.
 *
 * The namespace is stored once, as `ns_key`: its labels joined by U+0001
 * (which labels may not contain; U+0000 Postgres text cannot hold). U+0001
 * sorts before every other character, so byte-wise order of keys is the
 * order of label lists, and the namespaces under a prefix `p` are exactly
 * the keys from `p` to `p` + U+0002: one btree range, whole labels only
 * (`["a"]` never matches `["ab"]`), and any other character (dots, colons,
 * `%`, `_`, backslashes) is a plain character. Read it as labels with
 * `string_to_array(ns_key, chr(1))`. (One text column, not also an array:
 * narrower rows and text comparisons keep every statement at least as fast
 * as the official store's.)
 */
export const storeItems = pgTable(
  "store_items",
  {
    nsKey: key("ns_key").notNull(),
    key: key("key").notNull(),
    value: jsonb("value").$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true }),
    ttlMinutes: doublePrecision("ttl_minutes"),
  },
  (t) => [
    primaryKey({ name: "store_items_pkey", columns: [t.nsKey, t.key] }),
    /** For the sweeper: expired items are a range read, not a scan. */
    index("store_items_expires_at").on(t.expiresAt),
    /**
     * For listNamespaces: the namespaces in order, read from the index alone. Narrower than the
     * primary key and deduplicated (one entry per namespace, not per item), it reads several times
     * faster than the primary key for a few items per namespace.
     */
    index("store_items_ns_key").on(t.nsKey),
  ],
);
