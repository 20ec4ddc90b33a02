/**
 * Planning an adoption (`migrate({ adopt })`): recognise the official tables,
 * then the statements that copy their rows into our schema and install the
 * bridge, as a plan a DBA can read. migrate.ts runs the plan in its
 * migration transaction.
 */
import type { Queryable } from "../db/db.js";
import { MigrationError } from "../errors.js";
import { quoteIdent } from "../validate.js";
import { lockOfficial } from "./adopt.js";
import { OFFICIAL_MIGRATIONS_TABLE, TABLES, TRIGGER_PREFIX, type AdoptionPlan, type AdoptionStep } from "../db/official.js";
import { bridgeStatements } from "./adopt-bridge.js";
import { inspectOfficial, inspectOfficialRows } from "./adopt-official.js";
import { OWN_TABLES } from "../db/names.js";

/**
 * Plan the adoption of the official tables in `from` into `schema` (whose
 * tables `migrate` has just created, inside the same transaction): the
 * statements that copy the rows, install the triggers and record the
 * adoption. Throws a {@link MigrationError} for a layout it does not know,
 * or rows it would not carry over. Reads only; with `lock` (an adoption
 * about to run the plan), it first takes the lock the plan takes against
 * official writers, so the rows it checks are the rows the plan copies.
 *
 * @example
 * ```ts
 * const plan = await planAdoption(tx, "langgraph", "public", { lock: true });
 * for (const statement of plan.statements) await tx.query(statement);
 * ```
 */
export async function planAdoption(tx: Queryable, schema: string, from: string, options: { lock?: boolean } = {}): Promise<AdoptionPlan> {
  if (from === schema) {
    throw new MigrationError(
      `Cannot adopt schema "${from}" into itself: the official tables and this package's have the same names. Choose another schema for this saver. Nothing was changed.`,
      { migration: "adoption" },
    );
  }
  const { source, version } = await inspectOfficial(tx, from);
  const { rows: triggers } = await tx.query<{ name: string; table: string }>(
    `SELECT t.tgname AS name, c.relname AS "table" FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND t.tgname LIKE '${TRIGGER_PREFIX}%'`,
    [from, TABLES],
  );
  if (triggers.length > 0) {
    throw new MigrationError(
      `Cannot adopt schema "${from}": another schema adopted it already (its tables carry trigger ${triggers[0]!.name}). Nothing was changed.`,
      { migration: "adoption" },
    );
  }
  if (options.lock) await tx.query(lockOfficial(from, "SHARE ROW EXCLUSIVE"));
  await inspectOfficialRows(tx, from);
  const statements = bridgeStatements(schema, from, source, version);
  const sql = [
    `-- Adopting the official LangGraph Postgres saver's tables in schema ${quoteIdent(from)} (${OFFICIAL_MIGRATIONS_TABLE} at version ${version}: ` +
      `${source === "python" ? "Python saver" : "JS saver, or a Python saver before its version 5"}) into schema ${quoteIdent(schema)}.`,
    "-- The official tables keep their columns, indexes and rows; they get triggers that copy what official instances",
    "-- still write (until `migrate --finish-adoption`). Runs in the migration transaction; official writers wait meanwhile.",
    ...statements.map((s) => `${s};`),
  ].join("\n");
  return { from, source, officialVersion: version, statements, sql };
}

/** Our schema is empty (nothing to mix the official rows with). */
export async function isEmpty(tx: Queryable, schema: string): Promise<boolean> {
  const q = quoteIdent(schema);
  const { rows } = await tx.query<{ used: boolean }>(
    `SELECT ${OWN_TABLES.map((table) => `EXISTS (SELECT 1 FROM ${q}.${table})`).join(" OR ")} AS used`,
  );
  return !rows[0]!.used;
}

/** The adoption the migrator runs when told to adopt (`migrate({ adopt })`, `setup({ adopt })`, `migrate --adopt`). */
export const ADOPTION: AdoptionStep = { isEmpty, plan: planAdoption };
