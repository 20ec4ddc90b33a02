/**
 * Which releases keep working on which schema: the rule that makes upgrades
 * safe while instances of the previous release still run (a rolling deploy).
 *
 * A release's *code level* is the number of migrations it ships
 * (`latestVersion()`): it knows migrations 1..level. Each migration declares
 * here the oldest code level that keeps working on a schema once it is
 * applied (`compatibleFrom`); `migrate` records that number next to the
 * migration in `checkpointer_migrations.compatible_from`, so releases that
 * never heard of the migration can read it. Code at level L works on a schema
 * at version V > L when every migration L+1..V has `compatibleFrom <= L`;
 * otherwise it refuses to run (`SchemaTooNewError`, naming both levels) and
 * never writes rows the newer schema would drop or hide.
 *
 * Migrations follow expand/contract:
 * - expand (additive: new nullable or defaulted columns, new tables or
 *   indexes that older code does not need to maintain): `compatibleFrom: 0`,
 *   every older release keeps working;
 * - contract (dropping or moving what older code reads or writes): ship it
 *   one release after the code stopped using it, with `compatibleFrom` = that
 *   release's level, and make the migration itself fail the older code's
 *   statements (drop or rename what they write), so an instance that started
 *   before it and is still running fails loudly instead of writing unseen.
 *
 * `migrate` takes the saver's tables in ACCESS EXCLUSIVE mode before the
 * first pending migration (the mode its DDL needs anyway; taking a weaker one
 * first deadlocks with readers when the DDL upgrades it): statements of any
 * release run before the whole migration or after it, never in between
 * (migration 0005 copied the heads while older writers went on moving them,
 * and lost their checkpoints).
 * test/db/upgrade.test.ts runs the previous release's code (from git history)
 * writing while the newest migration runs.
 *
 * Adding a migration: add its entry below (a test fails without one).
 */

import { migrationNumber } from "../errors.js";

export interface MigrationCompatibility {
  /** The oldest code level that keeps working with this migration applied (0: any; additive). */
  compatibleFrom: number;
  /** Why, for the next person. */
  why: string;
}

/**
 * By migration version (1-based: `0000_init` is 1). Released entries never change.
 *
 * @example
 * ```ts
 * COMPATIBILITY[6]; // { compatibleFrom: 6, why: "0005_heads_table moves the lineage heads ..." }
 * ```
 */
export const COMPATIBILITY: Readonly<Record<number, MigrationCompatibility>> = {
  1: { compatibleFrom: 1, why: "0000_init creates the tables" },
  2: { compatibleFrom: 0, why: "0001_thread_ttl adds a nullable column; NULL means no TTL" },
  3: { compatibleFrom: 0, why: "0002_state_version adds a nullable column; NULL reads as state version 1" },
  4: { compatibleFrom: 0, why: "0003_prune_indexes adds an index" },
  5: { compatibleFrom: 0, why: "0004_pending_tasks adds a defaulted column (false: settled, as before)" },
  6: {
    compatibleFrom: 6,
    why: "0005_heads_table moves the lineage heads to checkpoint_heads and drops checkpoints.is_head, which older code writes",
  },
  7: { compatibleFrom: 0, why: "0006_unversioned_values adds nullable columns; older code keeps dropping unversioned values, as it always did" },
  8: {
    compatibleFrom: 0,
    why:
      "0007_tombstones_retention adds two tables and a function that only newer code uses; older code neither leaves nor checks tombstones, as before",
  },
  9: {
    compatibleFrom: 9,
    why:
      "0008_elements_guard refuses deletes of element rows by code that does not say it knows them (element storage is the default from 0.1.0); the release before element storage deleted them all in prune, so earlier code refuses the schema",
  },
  10: { compatibleFrom: 0, why: "0009_put_gate adds a function that only newer code calls; older code's puts keep the writes' gate of 0007, as before" },
};

/**
 * The declared compatibility of migration `version` (throws for a migration
 * without an entry: every migration must declare one).
 *
 * @example
 * ```ts
 * compatibleFrom(7); // 0: additive, older releases keep working
 * ```
 */
export function compatibleFrom(version: number): number {
  const entry = COMPATIBILITY[version];
  if (!entry) throw new Error(`migration ${migrationNumber(version)} declares no compatibility level in src/db/compat.ts (its entry is COMPATIBILITY[${version}])`);
  return entry.compatibleFrom;
}
