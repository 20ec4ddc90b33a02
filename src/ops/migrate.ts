/**
 * `migrate()`, the migrator's public face: the core's (src/db/migrate.ts)
 * with the adoption the wing holds (src/ops/adopt-plan.ts), so that
 * `migrate({ adopt })` switches from the official saver.
 */
import { migrateTarget, type MigrateOptions, type MigrateResult } from "../db/migrate.js";
import { ADOPTION } from "./adopt-plan.js";

/**
 * Apply pending migrations to `schema`. Idempotent and safe to run from many
 * processes at once (CI, deploy hooks, app start-up): each migration is
 * applied exactly once.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { migrate } from "langgraph-checkpoint-pg";
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const { applied } = await migrate({ pool, schema: "agents" });
 * console.log(`applied ${applied.length} migration(s)`);
 * await pool.end();
 * ```
 */
export function migrate(options: MigrateOptions = {}): Promise<MigrateResult> {
  return migrateTarget(options, ADOPTION);
}
