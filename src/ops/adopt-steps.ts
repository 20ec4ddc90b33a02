/**
 * The steps of an adoption after `migrate({ adopt })` started it: its status,
 * finishing it ({@link finishAdoption}) and the transaction every step runs in
 * ({@link adoptionStep}, also rollback.ts's). The plan and the bridge's SQL
 * are in adopt.ts.
 */
import { ADOPTION_TABLE, SCHEMA_LOCK_SQL, readAdoption, type AdoptionRecord } from "../db/official.js";
import { finishStatements } from "./adopt-bridge.js";
import type { Db, Queryable } from "../db/db.js";
import { MIGRATION_LOCK_TIMEOUT, withTarget, type TargetOptions } from "../db/migrate.js";
import { inspectAdoptionSource, inspectTrust, refuse } from "../db/trust.js";
import { CheckpointerError, DatabaseOperationError, MigrationError, failureText } from "../errors.js";
import { checkSchemaName, quoteIdent } from "../validate.js";

export interface FinishAdoptionOptions extends TargetOptions {
  /** Print the statements, change nothing. */
  dryRun?: boolean;
}

export interface FinishAdoptionResult {
  schema: string;
  /** The schema of the official tables. */
  from: string;
  /** False when it was finished already. */
  finished: boolean;
  sql: string;
}

/**
 * Finish an adoption once no instance of the official saver runs any more:
 * its tables stop being copied, and from now on refuse every write (an
 * instance that was missed fails with SQLSTATE LGB02 and a message saying
 * so, instead of writing where nobody reads). A rollback stays possible.
 *
 * @example
 * ```ts
 * await finishAdoption({ pool, schema: "langgraph" });
 * ```
 */
export async function finishAdoption(options: FinishAdoptionOptions = {}): Promise<FinishAdoptionResult> {
  const schema = checkSchemaName(options.schema ?? "public");
  return withTarget(options, "finish-adoption", (db) =>
    adoptionStep(db, {
      schema,
      what: "finishing the adoption",
      dryRun: options.dryRun ?? false,
      fn: async (tx, record) => {
        if (record.state === "rolled-back") {
          throw new MigrationError(`Schema "${schema}" was rolled back to the official saver; there is no adoption to finish. Nothing was changed.`);
        }
        if (record.state === "finished") return { schema, from: record.from, finished: false, sql: "" };
        const statements = finishStatements(schema, record.from);
        if (!options.dryRun) for (const s of statements) await tx.query(s);
        return { schema, from: record.from, finished: true, sql: statements.map((s) => `${s};`).join("\n") };
      },
    }),
  );
}

export interface AdoptionStep<T> {
  schema: string;
  /** What the step does, for the error message ("finishing the adoption"). */
  what: string;
  /** The step itself, inside the transaction, given the adoption record. */
  fn: (tx: Queryable, record: AdoptionRecord) => Promise<T>;
  /** Roll the transaction back at the end (a dry run). */
  dryRun: boolean;
}

/**
 * One adoption step (finish, rollback) on `schema`: one transaction, under the
 * migration locks of both schemas, with the adoption record read first.
 */
export async function adoptionStep<T>(db: Db, step: AdoptionStep<T>): Promise<T> {
  const { schema, what, fn, dryRun } = step;
  try {
    return await db.transaction(
      async (tx) => {
        // As for a migration: built-ins first, and no other role's code in what this step runs or changes.
        await tx.query(`SET LOCAL search_path TO ${quoteIdent(schema)}, pg_temp`);
        await tx.query(SCHEMA_LOCK_SQL, [schema]);
        await tx.query("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [MIGRATION_LOCK_TIMEOUT]);
        const trust = await inspectTrust(tx, schema);
        refuse(trust, schema, [...trust.always, ...trust.whenApplying]);
        const record = await readAdoption(tx, schema);
        if (!record) {
          throw new MigrationError(`Schema "${schema}" has no ${ADOPTION_TABLE} record: it never adopted the official saver's tables. Nothing was changed.`, {
            migration: "adoption",
          });
        }
        await tx.query(SCHEMA_LOCK_SQL, [record.from]);
        refuse(trust, schema, await inspectAdoptionSource(tx, record.from));
        return fn(tx, record);
      },
      { rollback: dryRun },
    );
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    throw new MigrationError(`${what} on schema "${schema}" failed ${failureText(err)}; nothing was changed`, { cause: err, migration: "adoption" });
  }
}

/**
 * The adoption recorded in `schema` (undefined: none). Read-only.
 *
 * @example
 * ```ts
 * const a = await adoptionStatus({ pool, schema: "langgraph" });
 * console.log(a?.state); // "bridging" | "finished" | "rolled-back"
 * ```
 */
export async function adoptionStatus(options: TargetOptions = {}): Promise<AdoptionRecord | undefined> {
  const schema = checkSchemaName(options.schema ?? "public");
  return withTarget(options, "status", async (db) => {
    try {
      return await readAdoption(db, schema);
    } catch (err) {
      throw new DatabaseOperationError("reading the adoption record", err);
    }
  });
}
