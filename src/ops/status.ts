/**
 * A schema's migration status, for `status` and readiness checks: applied
 * and pending migrations, a schema newer than this code, edited migrations,
 * the adoption it records, row counts. Reads the catalog and the record
 * tables only (no stored value: nothing here loads a serializer).
 */
import type { Row } from "../db/db.js";
import { loadMigrations, MIGRATIONS_TABLE, schemaLevel } from "../db/migrate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_WRITES, CHECKPOINTS } from "../db/names.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { ADOPTION_TABLE, readAdoption, type AdoptionRecord } from "../db/official.js";
import { run, toDb, type InspectOptions } from "./inspect.js";

/** What {@link migrationStatus} reports. */
export interface MigrationStatus {
  schema: string;
  /** The migration version this code requires. */
  codeVersion: number;
  /** The version recorded in the schema (0: never migrated). */
  schemaVersion: number;
  /**
   * `up-to-date`; `pending` (run migrate); `newer-compatible` (a newer release
   * migrated it, and its newer migrations say this code keeps working);
   * `too-new` (a newer release migrated it and this code must not run on it: upgrade the package).
   */
  state: "up-to-date" | "pending" | "newer-compatible" | "too-new";
  /** For `too-new`: the oldest code level the schema works with. */
  compatibleFrom?: number;
  /** The adoption of the official saver's tables recorded in this schema, if any. */
  adoption?: AdoptionRecord;
  /** Applied migrations; `modified` when the shipped file differs from what was applied. */
  applied: { version: number; name: string; appliedAt: string; modified: boolean; known: boolean }[];
  pending: { version: number; name: string }[];
  /** Row counts per table (absent for tables that do not exist yet). */
  rows: Partial<Record<"checkpoints" | "checkpoint_writes" | "checkpoint_blobs" | "checkpoint_heads", number>>;
}

/**
 * Applied and pending migrations of a schema, and row counts per table.
 * Read-only; works on a schema in any state (never migrated, behind, ahead).
 *
 * @example
 * ```ts
 * const s = await migrationStatus({ pool, schema: "agents" });
 * if (s.state !== "up-to-date") console.log(`${s.pending.length} pending`);
 * ```
 */
export async function migrationStatus(options: Omit<InspectOptions, "serde">): Promise<MigrationStatus> {
  const db = toDb(options.pool);
  const schema = checkSchemaName(options.schema ?? "public");
  const s = quoteIdent(schema);
  const migrations = loadMigrations();
  const present = await run<{ name: string; ok: boolean }>(
    db,
    "reading the schema status",
    `SELECT n AS name, pg_catalog.to_regclass($1 || '.' || pg_catalog.quote_ident(n)) IS NOT NULL AS ok FROM pg_catalog.unnest($2::text[]) AS n`,
    [s, [MIGRATIONS_TABLE, CHECKPOINTS.table, CHECKPOINT_WRITES.table, CHECKPOINT_BLOBS.table, CHECKPOINT_HEADS.table, ADOPTION_TABLE]],
  );
  const has = new Set(present.filter((r) => r.ok).map((r) => r.name));
  const appliedRows = has.has(MIGRATIONS_TABLE)
    ? await run<{ version: number; name: string; sha256: string; applied_at: string }>(
        db,
        "reading applied migrations",
        `SELECT version, name, sha256, pg_catalog.to_json(applied_at) #>> '{}' AS applied_at FROM ${s}.${MIGRATIONS_TABLE} ORDER BY version`,
      )
    : [];
  const applied = appliedRows.map((r) => {
    const known = migrations[r.version - 1];
    return { version: r.version, name: r.name, appliedAt: r.applied_at, known: known !== undefined, modified: known !== undefined && known.sha256 !== r.sha256 };
  });
  const version = applied.reduce((m, r) => Math.max(m, r.version), 0);
  // Both read through `run`, so a failure is a typed error.
  const reader = { query: <R extends Row>(text: string, values?: unknown[]) => run<R>(db, "reading the schema status", text, values).then((rows) => ({ rows })) };
  const level = version > migrations.length ? await schemaLevel(reader, schema) : undefined;
  const adoption = has.has(ADOPTION_TABLE) ? await readAdoption(reader, schema) : undefined;
  const rows: MigrationStatus["rows"] = {};
  for (const table of [CHECKPOINTS.table, CHECKPOINT_WRITES.table, CHECKPOINT_BLOBS.table, CHECKPOINT_HEADS.table] as const) {
    if (!has.has(table)) continue;
    const [r] = await run<{ n: string }>(db, "counting rows", `SELECT pg_catalog.count(*)::text AS n FROM ${s}.${table}`);
    rows[table] = Number(r!.n);
  }
  return {
    schema,
    codeVersion: migrations.length,
    schemaVersion: version,
    state: level ? (level.compatibleFrom > migrations.length ? "too-new" : "newer-compatible") : version < migrations.length ? "pending" : "up-to-date",
    ...(level && level.compatibleFrom > migrations.length ? { compatibleFrom: level.compatibleFrom } : {}),
    ...(adoption ? { adoption } : {}),
    applied,
    pending: migrations.slice(version).map((m) => ({ version: m.version, name: m.name })),
    rows,
  };
}
