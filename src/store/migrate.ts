/**
 * Migrating the store's schema: the store's numbered migrations (its own
 * track, see migrations.ts) applied by the same runner as the
 * checkpointer's (src/db/migrate.ts: one transaction, the same advisory lock
 * per schema, the same trust checks and compatibility gate, retried the same
 * way), then the vector table when the store has `index` (vector.ts).
 * `store.setup()`, `migrateStore()` and `migrate --store` come here; nothing
 * here creates the checkpointer's tables, and the checkpointer's migrate
 * never creates the store's.
 */
import { applyTrack, MIGRATION_LOCK_TIMEOUT, tablesIn, withRetry, withTarget, type RetryOptions, type TargetOptions, type TrackProgress } from "../db/migrate.js";
import type { Db, Queryable } from "../db/db.js";
import { checkPartitions, type Partitioning } from "../db/partitions.js";
import { inspectTrust, refuse, type TrustReport } from "../db/trust.js";
import { CheckpointerError, MigrationError, StoreIndexMismatchError, failureText, VectorExtensionMissingError, type VectorIndexShape } from "../errors.js";
import { emit, guard, type EventHandler } from "../events.js";
import { SCHEMA_LOCK_SQL } from "../db/official.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { STORE_MIGRATIONS_TABLE, STORE_TABLES, STORE_TRACK } from "./migrations.js";
import { adoptStore, checkStoreAdopt, officialStoreDecision, officialStoresEvent, type StoreAdoptOption, type StoreAdoptionSummary } from "./adopt.js";
import { checkIndexConfig, metricOfOpclass, VECTOR_INDEX, VECTOR_TABLE, vectorIndexDdl, vectorTableDdl, type IndexConfig, type VectorIndex } from "./vector.js";

/**
 * Options of {@link migrateStore}.
 *
 * @example
 * ```ts
 * await migrateStore({ pool, schema: "memory", index: { dims: 1536, distanceMetric: "cosine" } });
 * ```
 */
export interface MigrateStoreOptions extends TargetOptions {
  /** The vector index to have (the store's `index` option; `embed` is not needed here). Without it the vector table is left as it is. */
  index?: Omit<IndexConfig, "embed"> & { embed?: IndexConfig["embed"] };
  /** Change a vector index whose dimensions, metric or type differ (else: `StoreIndexMismatchError`). */
  changeIndex?: boolean;
  /** See {@link StoreAdoptOption}. */
  adopt?: StoreAdoptOption;
  dryRun?: boolean;
  retry?: RetryOptions | false;
  /**
   * Hash partition the store's tables by their namespace key (`ns_key`) into
   * this many partitions each (2 to 1024), for a schema whose store tables this
   * call creates; see `migrate()`'s `partitions` and docs/scaling-out.md.
   */
  partitions?: number;
}

export interface MigrateStoreResult {
  schema: string;
  fromVersion: number;
  toVersion: number;
  applied: { version: number; name: string; sql: string }[];
  /** What was done (or, in a dry run, would be) to the vector table. */
  vector?: { action: "created" | "changed" | "unchanged"; dims: number; distanceMetric: string; indexType: string; sql: string[]; reembed: boolean };
  adoption?: StoreAdoptionSummary;
}

/**
 * Apply the store's pending migrations to `schema` (and make or check its
 * vector table, with `index`). Idempotent, safe from many processes at once.
 *
 * @example
 * ```ts
 * import { migrateStore } from "langgraph-checkpoint-pg/store";
 * const { applied } = await migrateStore({ pool, schema: "public" });
 * ```
 */
export async function migrateStore(options: MigrateStoreOptions = {}): Promise<MigrateStoreResult> {
  const schema = checkSchemaName(options.schema ?? "public");
  const index = options.index === undefined ? undefined : checkIndexConfig({ embed: () => Promise.resolve([]), ...options.index });
  const onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
  const settings = {
    index,
    changeIndex: options.changeIndex ?? false,
    dryRun: options.dryRun ?? false,
    adopt: checkStoreAdopt(options.adopt),
    onEvent,
    partitions: checkPartitions(options.partitions),
  };
  return withRetry({ operation: "migrate", schema, retry: options.retry, onEvent }, () =>
    withTarget(options, "migrate --store", (db) => migrateStoreOnce(db, schema, settings)),
  );
}

/** `setup()` of a store: the same, through the store's own Db. */
export function runStoreMigrations(
  db: Db,
  schema: string,
  options: { index?: VectorIndex; adopt?: StoreAdoptOption; retry?: RetryOptions | false; onEvent?: EventHandler; partitions?: number },
): Promise<MigrateStoreResult> {
  const settings = {
    index: options.index,
    changeIndex: false,
    dryRun: false,
    adopt: checkStoreAdopt(options.adopt),
    onEvent: options.onEvent,
    partitions: checkPartitions(options.partitions),
  };
  return withRetry({ operation: "setup", schema, retry: options.retry, onEvent: options.onEvent }, () => migrateStoreOnce(db, schema, settings));
}

interface Settings {
  index: VectorIndex | undefined;
  changeIndex: boolean;
  dryRun: boolean;
  adopt: StoreAdoptOption | undefined;
  onEvent: EventHandler | undefined;
  partitions: number | undefined;
}

async function migrateStoreOnce(db: Db, schema: string, settings: Settings): Promise<MigrateStoreResult> {
  const started = performance.now();
  const q = quoteIdent(schema);
  const { dryRun } = settings;
  const progress: TrackProgress = {};
  let elsewhere: string[] = [];
  try {
    const result = await db.transaction(
      async (tx) => {
        // As the checkpointer's migrate does (see src/db/migrate.ts): pg_catalog first, the same lock, bounded waits.
        await tx.query(`SET LOCAL search_path TO ${q}, pg_temp`);
        await tx.query(SCHEMA_LOCK_SQL, [schema]);
        await tx.query("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [MIGRATION_LOCK_TIMEOUT]);
        const trust = await inspectTrust(tx, schema);
        refuse(trust, schema, trust.always);
        const exists = await tx.query("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1", [schema]);
        if (exists.rows.length === 0 && !dryRun) await tx.query(`CREATE SCHEMA ${q}`);
        const present = await tablesIn(tx, schema, [STORE_MIGRATIONS_TABLE, ...STORE_TABLES]);
        const hasTable = present.has(STORE_MIGRATIONS_TABLE);
        if (!hasTable) {
          refuse(trust, schema, trust.whenApplying);
          const stray = STORE_TABLES.filter((t) => present.has(t));
          if (stray.length > 0) {
            throw new MigrationError(
              `Schema "${schema}" has no ${STORE_MIGRATIONS_TABLE} table but holds table(s) ${stray.join(", ")}, which the store would create. Nothing was changed.`,
              { migration: "0000_store_init" },
            );
          }
        }
        // A first setup decides about the official store's tables; later, only an explicit adopt copies again (what changed since).
        const adopting = !hasTable || (settings.adopt !== undefined && settings.adopt !== false);
        const decision = adopting ? await officialStoreDecision(tx, schema, settings.adopt) : undefined;
        const adoptFrom = decision?.adoptFrom;
        elsewhere = decision?.elsewhere ?? [];
        const { fromVersion, toVersion, pending, plan } = await applyTrack(tx, schema, STORE_TRACK, { trust, hasTable, dryRun, progress, partitions: settings.partitions });
        const out: MigrateStoreResult = { schema, fromVersion, toVersion, applied: pending };
        if (settings.index) {
          out.vector = await vectorStep(tx, db.driver, schema, settings.index, { trust, dryRun, changeIndex: settings.changeIndex, layout: plan.layout });
        }
        if (adoptFrom !== undefined) out.adoption = await adoptStore(tx, schema, adoptFrom, { dryRun, vectors: out.vector !== undefined });
        return out;
      },
      { rollback: dryRun },
    );
    if (elsewhere.length > 0) emit(settings.onEvent, officialStoresEvent(schema, elsewhere));
    emit(settings.onEvent, {
      type: "migrate",
      schema,
      applied: result.applied.map((m) => `store/${m.name}`),
      fromVersion: result.fromVersion,
      toVersion: result.toVersion,
      dryRun,
      durationMs: performance.now() - started,
    });
    return result;
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    throw new MigrationError(
      progress.current
        ? `store migration ${progress.current.name} failed on schema "${schema}" ${failureText(err)}; nothing was applied`
        : `migrating the store in schema "${schema}" failed ${failureText(err)}; nothing was applied`,
      { cause: err, migration: progress.current?.name },
    );
  }
}

/** Where pgvector is installed (its schema), installing it if the server has it; undefined when it cannot be had. */
async function vectorExtension(tx: Queryable, create: boolean): Promise<string | undefined> {
  const installed = await tx.query<{ schema: string }>(
    "SELECT n.nspname AS schema FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
  );
  if (installed.rows[0]) return installed.rows[0].schema;
  const available = await tx.query("SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'vector'");
  if (available.rows.length === 0 || !create) return available.rows.length === 0 ? undefined : "";
  // Where other code expects it (the type unqualified on the default search path: the official store, the
  // application's own queries): public, when the migrating role may create there; else the store's schema
  // (first on the migration's search path). This store names the extension's schema in every statement.
  const intoPublic = await tx.query("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'public' AND pg_catalog.has_schema_privilege('public', 'CREATE')");
  await tx.query(intoPublic.rows.length > 0 ? "CREATE EXTENSION vector WITH SCHEMA public" : "CREATE EXTENSION vector");
  return vectorExtension(tx, false);
}

/** The vector table as it is: dimensions, metric, index type (undefined: no table). */
export async function currentShape(tx: Queryable, schema: string): Promise<VectorIndexShape | undefined> {
  const { rows } = await tx.query<{ dims: number; method: string | null; opclass: string | null }>(
    `SELECT a.atttypmod AS dims, am.amname AS method, opc.opcname AS opclass
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = 'embedding' AND NOT a.attisdropped
       LEFT JOIN pg_catalog.pg_class ic ON ic.relnamespace = n.oid AND ic.relname = $3
       LEFT JOIN pg_catalog.pg_index ix ON ix.indexrelid = ic.oid
       LEFT JOIN pg_catalog.pg_am am ON am.oid = ic.relam
       LEFT JOIN pg_catalog.pg_opclass opc ON opc.oid = ix.indclass[0]
      WHERE n.nspname = $1 AND c.relname = $2`,
    [schema, VECTOR_TABLE, VECTOR_INDEX],
  );
  const row = rows[0];
  if (!row) return undefined;
  const indexType = row.method === "hnsw" || row.method === "ivfflat" ? row.method : ("none" as VectorIndexShape["indexType"]);
  return { dims: row.dims, distanceMetric: (row.opclass && metricOfOpclass(row.opclass)) || ("none" as VectorIndexShape["distanceMetric"]), indexType };
}

async function vectorStep(
  tx: Queryable,
  driver: Db["driver"],
  schema: string,
  index: VectorIndex,
  { trust, dryRun, changeIndex, layout }: { trust: TrustReport; dryRun: boolean; changeIndex: boolean; layout: Partitioning | undefined },
): Promise<NonNullable<MigrateStoreResult["vector"]>> {
  const shape = { dims: index.dims, distanceMetric: index.distanceMetric, indexType: index.indexType };
  const current = await currentShape(tx, schema);
  const same = current && current.dims === index.dims && current.distanceMetric === index.distanceMetric && current.indexType === index.indexType;
  if (same) return { action: "unchanged", ...shape, sql: [], reembed: false };
  if (current && !changeIndex) throw new StoreIndexMismatchError(schema, current, shape);
  refuse(trust, schema, trust.whenApplying);
  const ext = await vectorExtension(tx, !dryRun);
  if (ext === undefined) throw new VectorExtensionMissingError(schema, driver === "pglite" ? "pglite" : "server");
  // A dry run does not install the extension: name the schema it would be installed in.
  const extSchema = ext === "" ? schema : ext;
  const s = quoteIdent(schema);
  let sql: string[];
  let reembed = false;
  if (!current) sql = vectorTableDdl(schema, extSchema, index, layout);
  else if (current.dims !== index.dims) {
    // The old embeddings cannot serve the new dimensions: the texts stay, their embeddings are made again (store.reindex()).
    reembed = true;
    sql = [
      `ALTER TABLE ${s}.${VECTOR_TABLE} DROP COLUMN embedding`,
      `ALTER TABLE ${s}.${VECTOR_TABLE} ADD COLUMN embedding ${quoteIdent(extSchema)}.vector(${index.dims})`,
      vectorIndexDdl(schema, extSchema, index),
    ];
  } else sql = [`DROP INDEX IF EXISTS ${s}.${VECTOR_INDEX}`, vectorIndexDdl(schema, extSchema, index)];
  if (!dryRun) {
    if (current) await tx.query(`LOCK TABLE ${s}.store_items, ${s}.${VECTOR_TABLE} IN ACCESS EXCLUSIVE MODE`);
    for (const statement of sql) await tx.query(statement);
  }
  return { action: current ? "changed" : "created", ...shape, sql, reembed };
}
