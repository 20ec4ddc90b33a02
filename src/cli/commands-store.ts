/**
 * `migrate --store` / `--store-only`: the store's migrations, and its vector
 * table when `--dims` says what it must be (a change of dimensions, metric
 * or index type is applied here, on purpose: `--dry-run` prints it first).
 */
import { BIN } from "./args.js";
import { noteOfficialTables, untilReachable } from "./commands-migrate.js";
import { json, withConnection, type Common, type Io } from "./context.js";
import { EXIT } from "./exit.js";
import { migrateStore } from "../store/migrate.js";
import type { StoreAdoptOption } from "../store/adopt.js";
import type { DistanceMetric, VectorIndexType } from "../store/vector.js";
import { quoteIdent } from "../validate.js";
import { STORE_MIGRATIONS_TABLE } from "../store/migrations.js";
import { migrationNumber } from "../errors.js";

export interface StoreFlags {
  dryRun: boolean;
  adopt: StoreAdoptOption | undefined;
  index: { dims: number; distanceMetric?: DistanceMetric; indexType?: VectorIndexType } | undefined;
  /** `--partitions N`: the store's tables hash partitioned by namespace key, when this creates them. */
  partitions?: number | undefined;
}

export async function storeMigrateCommand(c: Common & StoreFlags & { wait: { text: string; ms: number } }, io: Io, options: { announced?: boolean } = {}): Promise<number> {
  const { schema, dryRun } = c;
  // As the checkpointer's migrate: each attempt connects anew, until --wait runs out.
  const once = () =>
    withConnection(
      c,
      !dryRun,
      async (conn) => ({
        label: conn.label,
        result: await migrateStore({
          pool: conn.pool,
          schema,
          dryRun,
          adopt: c.adopt,
          index: c.index,
          changeIndex: true,
          retry: false,
          partitions: c.partitions,
          onEvent: noteOfficialTables(c, io),
        }),
      }),
      { vector: c.index !== undefined, announced: options.announced },
    );
  const { label, result } = await untilReachable(c, io, once);
  const at = (v: number) => (v === 0 ? "no store migration" : `store migration ${migrationNumber(v)}`);
  if (c.json) {
    io.out(json({ database: label, dryRun, store: true, ...result, applied: result.applied.map((m) => (dryRun ? m : { version: m.version, name: m.name })) }));
    return EXIT.OK;
  }
  if (dryRun) {
    io.out(`-- ${BIN} migrate --store --dry-run: ${label}, schema ${JSON.stringify(schema)}`);
    io.out(`-- the store is at ${at(result.fromVersion)}; ${result.applied.length} store migration(s) pending. Nothing was applied.`);
    for (const m of result.applied) io.out(`\n-- store migration ${m.name} (recorded in ${quoteIdent(schema)}.${STORE_MIGRATIONS_TABLE})\n${m.sql.trim()}`);
  } else {
    io.out(
      result.applied.length === 0
        ? `The store in schema ${JSON.stringify(schema)} is up to date (${at(result.toVersion)}) in ${label}.`
        : `Migrated the store in schema ${JSON.stringify(schema)} in ${label}: applied ${result.applied.map((m) => m.name).join(", ")}`,
    );
  }
  const v = result.vector;
  if (v) {
    const shape = `${v.dims} dimensions, ${v.distanceMetric}, ${v.indexType}`;
    if (v.action === "unchanged") io.out(`${dryRun ? "-- " : ""}The vector index has ${shape} already.`);
    else {
      if (dryRun) io.out(`\n-- the vector table (${v.action === "created" ? "new" : "changed"}: ${shape})\n${v.sql.map((s) => `${s.trim()};`).join("\n")}`);
      else io.out(`${v.action === "created" ? "Created" : "Changed"} the vector index: ${shape}.`);
      if (v.reembed) io.out(`${dryRun ? "-- " : ""}The stored embeddings had other dimensions: make them again with \`await store.reindex()\` (the store configured with the new embedder).`);
    }
  }
  const a = result.adoption;
  if (a) {
    if (dryRun) io.out(`\n-- then, copying the official store's items from schema ${JSON.stringify(a.from)} (${a.items} item(s)):\n${a.sql.map((s) => `${s.trim()};`).join("\n")}`);
    else io.out(`Copied ${a.items} item(s) and ${a.vectors} vector row(s) from the official store in schema ${JSON.stringify(a.from)} (its tables are unchanged).`);
  }
  return EXIT.OK;
}
