/**
 * The store's errors (src/store): its vector index missing pgvector, or
 * configured otherwise than it is; the official store's tables in its
 * schema. Users import them from src/errors.ts.
 */
import { suggest, type SuggestedCommand } from "../hint.js";
import { CheckpointerError } from "./base.js";

/** What a store's vector index is, or is asked to be: dimensions, distance metric, index type. */
export interface VectorIndexShape {
  dims: number;
  distanceMetric: "cosine" | "l2" | "inner_product";
  indexType: "hnsw" | "ivfflat";
}

/**
 * A store with `index` (vector search) on a database without the pgvector
 * extension. Nothing was changed. Install pgvector on the server (a DBA runs
 * `CREATE EXTENSION vector` if the migrating role may not), use the embedded
 * database with `@electric-sql/pglite-pgvector` installed, or leave `index` out.
 *
 * @example
 * ```ts
 * try { await store.setup(); } catch (e) { if (e instanceof VectorExtensionMissingError) console.error(e.message); }
 * ```
 */
export class VectorExtensionMissingError extends CheckpointerError {
  readonly schema: string;
  constructor(schema: string, where: "server" | "pglite") {
    super(
      "VECTOR_EXTENSION_MISSING",
      `The store in schema "${schema}" is configured with \`index\` (vector search), which needs the pgvector extension, and ` +
        (where === "pglite"
          ? "the embedded database was opened without it: install @electric-sql/pglite-pgvector (npm install @electric-sql/pglite-pgvector) and open it again, "
          : "this Postgres server does not have it (no \"vector\" in pg_available_extensions): install pgvector on the server, ") +
        "or leave `index` out (search by filter and text works without it). Nothing was changed.",
    );
    this.schema = schema;
  }
}

/**
 * The store's vector table has other dimensions, another distance metric or
 * another index type than the store is configured with. Nothing was changed:
 * changing them is a migration to run on purpose (the CLI prints it with
 * `--dry-run`), after which the stored embeddings are re-made with
 * `store.reindex()` when the dimensions changed.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof StoreIndexMismatchError) console.error(e.current, e.wanted); }
 * ```
 */
export class StoreIndexMismatchError extends CheckpointerError {
  readonly schema: string;
  readonly current: VectorIndexShape;
  readonly wanted: VectorIndexShape;
  constructor(schema: string, current: VectorIndexShape, wanted: VectorIndexShape) {
    const show = (s: VectorIndexShape) => `${s.dims} dimensions, ${s.distanceMetric}, ${s.indexType}`;
    const change: SuggestedCommand = {
      words: ["migrate", "--store-only", "--dims", String(wanted.dims), "--metric", wanted.distanceMetric, "--index-type", wanted.indexType, "--dry-run"],
      schema,
    };
    super(
      "STORE_INDEX_MISMATCH",
      `The store's vector index in schema "${schema}" has ${show(current)}; this store is configured with ${show(wanted)}. Nothing was changed. ` +
        `To change it: ${suggest(change)} prints the migration, without --dry-run it runs it` +
        (current.dims !== wanted.dims ? "; the stored embeddings are dropped with the old dimensions: re-make them with `await store.reindex()`." : "."),
      { suggested: [change] },
    );
    this.schema = schema;
    this.current = current;
    this.wanted = wanted;
  }
}

/**
 * The store's first `setup()` or `migrate --store` found the tables of the
 * official `PostgresStore` (`store`, `store_migrations`) in its own schema and
 * was not told what to do with them. Nothing was changed. Copy their items (`adopt: { from }`,
 * CLI `--adopt-store <schema>`), or start empty beside them (`adopt: false`).
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof StoreAdoptionRequiredError) console.error(e.found); }
 * ```
 */
export class StoreAdoptionRequiredError extends CheckpointerError {
  readonly schema: string;
  /** The schemas holding the official store's tables. */
  readonly found: string[];
  constructor(schema: string, found: string[]) {
    // --store-only: the store's migration alone. With --store the checkpointer's runs first, and refuses
    // a schema that also holds the official saver's tables (their usual place, beside the official store).
    const copy: SuggestedCommand = { words: ["migrate", "--store-only", "--adopt-store", found[0]!, "--dry-run"], schema };
    super(
      "ADOPTION_REQUIRED",
      `Setting up the store in schema "${schema}" stopped: ${found.map((f) => `schema "${f}"`).join(", ")} holds the tables of the official PostgresStore ` +
        "(@langchain/langgraph-checkpoint-postgres/store). langgraph-checkpoint-pg never changes them. Nothing was changed. " +
        `To copy their items (the official tables stay as they are): ${suggest(copy)} ` +
        `prints the plan, without --dry-run it runs it; in code: \`store.setup({ adopt: { from: "${found[0]}" } })\`. To start empty beside them: \`adopt: false\`. ` +
        "See docs/store.md (switching from the official PostgresStore).",
      { suggested: [copy] },
    );
    this.schema = schema;
    this.found = found;
  }
}
