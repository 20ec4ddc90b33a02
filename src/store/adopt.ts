/**
 * Switching from the official `PostgresStore`: its items copied into this
 * store's table (never changed in place: the official tables keep working
 * for official instances until they are replaced). Its `namespace_path`
 * (labels joined by ":") is split on ":" as the official store itself reads
 * it (each ":" becomes a label boundary of our key); an item's TTL is what its expiry says (`expires_at - updated_at`).
 * Copying again later takes each official item updated since (the newer
 * `updated_at` wins): deletions made by official instances in between are
 * not copied, which the runbook in docs/store.md accounts for.
 */
import type { Queryable } from "../db/db.js";
import { InvalidOptionsError, MigrationError, StoreAdoptionRequiredError } from "../errors.js";
import type { SaverEvent } from "../events.js";
import { suggest, type SuggestedCommand } from "../hint.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { SCHEMA_LOCK_SQL } from "../db/official.js";
import { inspectAdoptionSource, refuse } from "../db/trust.js";
import { VECTOR_TABLE } from "./vector.js";

/**
 * What to do with the official store's tables: not given (default): on the
 * first setup, stop with `StoreAdoptionRequiredError` if this schema holds
 * them (start beside them, said once, if only other schemas do); `{ from }` /
 * `true` (the one schema holding them): copy their items (again: copy what
 * changed since); `false`: ignore them.
 *
 * @example
 * ```ts
 * await store.setup({ adopt: { from: "public" } });
 * ```
 */
export type StoreAdoptOption = boolean | { from: string };

export interface StoreAdoptionSummary {
  from: string;
  /** Items copied or updated (a dry run: that would be). */
  items: number;
  /** Vector rows copied (their embeddings too when the dimensions are the same). */
  vectors: number;
  sql: string[];
}

export function checkStoreAdopt(adopt: unknown): StoreAdoptOption | undefined {
  if (adopt === undefined || typeof adopt === "boolean") return adopt;
  if (adopt !== null && typeof adopt === "object" && Object.keys(adopt).every((k) => k === "from")) {
    return { from: checkSchemaName((adopt as { from?: unknown }).from, "adopt.from") };
  }
  throw new InvalidOptionsError("adopt", 'expected true, false, or { from: "<schema of the official store>" }');
}

/** Schemas holding the official store's tables (`store` and `store_migrations`). */
export async function findOfficialStores(tx: Queryable): Promise<string[]> {
  const { rows } = await tx.query<{ schema: string }>(
    `SELECT n.nspname AS schema FROM pg_catalog.pg_namespace n
      WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = 'store' AND c.relkind IN ('r', 'p'))
        AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = 'store_migrations' AND c.relkind IN ('r', 'p'))
      ORDER BY 1`,
  );
  return rows.map((r) => r.schema);
}

/**
 * The schema to copy from on this migration, if any (see {@link StoreAdoptOption}),
 * and, not told anything, the schemas holding the official store's tables beside this one (to say once).
 */
export async function officialStoreDecision(tx: Queryable, schema: string, adopt: StoreAdoptOption | undefined): Promise<{ adoptFrom: string | undefined; elsewhere: string[] }> {
  if (adopt === false) return { adoptFrom: undefined, elsewhere: [] };
  const found = await findOfficialStores(tx);
  if (adopt === undefined) {
    // Adoption concerns the schema being set up; another schema's official store must not stop it (issue 39).
    if (found.includes(schema)) throw new StoreAdoptionRequiredError(schema, [schema, ...found.filter((f) => f !== schema)]);
    return { adoptFrom: undefined, elsewhere: found };
  }
  if (typeof adopt === "object") {
    if (!found.includes(adopt.from)) throw new MigrationError(`adopt: schema "${adopt.from}" holds no official PostgresStore tables (store, store_migrations). Nothing was changed.`);
    return { adoptFrom: adopt.from, elsewhere: [] };
  }
  if (found.length === 1) return { adoptFrom: found[0], elsewhere: [] };
  throw new MigrationError(
    found.length === 0
      ? "adopt: no schema of this database holds the official PostgresStore's tables. Nothing was changed."
      : `adopt: several schemas hold the official PostgresStore's tables (${found.map((f) => `"${f}"`).join(", ")}); name one: adopt: { from: "<schema>" }. Nothing was changed.`,
  );
}

/** What a first store migration says about the official stores it found in other schemas and left alone (the CLI prints its message). */
export function officialStoresEvent(schema: string, found: string[]): Extract<SaverEvent, { type: "officialTablesFound" }> {
  const copy: SuggestedCommand = { words: ["migrate", "--store-only", "--adopt-store", found[0]!, "--dry-run"], schema };
  return {
    type: "officialTablesFound",
    schema,
    of: "store",
    schemas: found,
    message:
      `${found.map((f) => `schema "${f}"`).join(", ")} ${found.length > 1 ? "hold" : "holds"} the tables of the official PostgresStore: the store in schema "${schema}" ` +
      `was set up beside them, without their items; they stay as they are. To copy their items: ${suggest(copy)} prints the plan.`,
    suggested: [copy],
  };
}

/** Copy the official store's items (and vector rows, when this store has a vector table) into `schema`. */
export async function adoptStore(tx: Queryable, schema: string, from: string, { dryRun, vectors }: { dryRun: boolean; vectors: boolean }): Promise<StoreAdoptionSummary> {
  await tx.query(SCHEMA_LOCK_SQL, [from]);
  refuse({ me: "", always: [], whenApplying: [] }, schema, await inspectAdoptionSource(tx, from));
  const s = quoteIdent(schema);
  const f = quoteIdent(from);
  const sql = [
    `INSERT INTO ${s}.store_items AS it (ns_key, key, value, created_at, updated_at, expires_at, ttl_minutes)
     SELECT pg_catalog.replace(o.namespace_path, ':', pg_catalog.chr(1)), o.key, o.value,
            coalesce(o.created_at, pg_catalog.now()), coalesce(o.updated_at, o.created_at, pg_catalog.now()), o.expires_at,
            CASE WHEN o.expires_at IS NOT NULL AND o.updated_at IS NOT NULL AND o.expires_at > o.updated_at
                 THEN pg_catalog.date_part('epoch', o.expires_at - o.updated_at) / 60 END
       FROM ${f}.store o
     ON CONFLICT (ns_key, key) DO UPDATE
       SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes
     WHERE it.updated_at < EXCLUDED.updated_at`,
  ];
  const official = await tx.query<{ dims: number }>(
    `SELECT a.atttypmod AS dims FROM pg_catalog.pg_attribute a WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attname = 'embedding' AND NOT a.attisdropped`,
    [`${f}.store_vectors`],
  );
  if (vectors && official.rows[0]) {
    const ours = await tx.query<{ dims: number }>(
      `SELECT a.atttypmod AS dims FROM pg_catalog.pg_attribute a WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attname = 'embedding' AND NOT a.attisdropped`,
      [`${s}.${VECTOR_TABLE}`],
    );
    // Embeddings of other dimensions cannot be copied: their texts are, to be embedded again (store.reindex()).
    const embedding = ours.rows[0]?.dims === official.rows[0].dims ? "o.embedding::text" : "NULL";
    sql.push(
      `INSERT INTO ${s}.${VECTOR_TABLE} AS v (ns_key, key, field_path, text_content, embedding)
       SELECT pg_catalog.replace(o.namespace_path, ':', pg_catalog.chr(1)), o.key, o.field_path, o.text_content, ${embedding}
         FROM ${f}.store_vectors o
        WHERE EXISTS (SELECT 1 FROM ${s}.store_items it WHERE it.ns_key = pg_catalog.replace(o.namespace_path, ':', pg_catalog.chr(1)) AND it.key = o.key)
       ON CONFLICT (ns_key, key, field_path) DO UPDATE SET text_content = EXCLUDED.text_content, embedding = EXCLUDED.embedding`,
    );
  }
  let items = 0;
  let vectorRows = 0;
  if (!dryRun) {
    items = ((await tx.query(sql[0]!)) as { rowCount?: number }).rowCount ?? 0;
    if (sql[1]) vectorRows = ((await tx.query(sql[1])) as { rowCount?: number }).rowCount ?? 0;
  } else {
    items = Number((await tx.query<{ n: string }>(`SELECT pg_catalog.count(*) AS n FROM ${f}.store`)).rows[0]!.n);
  }
  return { from, items, vectors: vectorRows, sql };
}
