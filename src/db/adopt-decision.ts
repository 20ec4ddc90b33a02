/**
 * What a migration does about the official LangGraph saver's tables (see
 * {@link AdoptOption}): adoption concerns the schema being migrated, and the
 * one the caller names; official tables elsewhere are said once and left alone.
 */
import type { Queryable } from "./db.js";
import { AdoptionRequiredError, InvalidOptionsError, MigrationError, type OfficialTables } from "../errors.js";
import type { SaverEvent } from "../events.js";
import { suggest, type SuggestedCommand } from "../hint.js";
import { readAdoption, type AdoptionRecord } from "./official.js";
import { findOfficialTables } from "./official.js";
import { checkSchemaName } from "../validate.js";
import { loadMigrations, MIGRATIONS_TABLE } from "./migrations.js";
import { OWN_TABLES } from "./names.js";


/**
 * What to do with the tables of the official LangGraph Postgres saver (JS or
 * Python) when this schema is migrated for the first time:
 * - not given (default): if this schema holds them, stop with
 *   `AdoptionRequiredError` and change nothing; if other schemas do, start
 *   empty beside them, said once (an `officialTablesFound` event);
 * - `{ from: "public" }`: adopt the official tables of that schema (see
 *   docs/adoption.md); `true`: the one schema that holds them;
 * - `false`: ignore them and start empty beside them.
 *
 * @example
 * ```ts
 * await migrate({ pool, schema: "langgraph", adopt: { from: "public" } });
 * ```
 */
export type AdoptOption = boolean | { from: string };

/** `adopt` checked (see {@link AdoptOption}); `open()` checks it before anything is opened. */
export function checkAdopt(adopt: unknown): AdoptOption | undefined {
  if (adopt === undefined || typeof adopt === "boolean") return adopt;
  if (adopt !== null && typeof adopt === "object" && Object.keys(adopt).every((k) => k === "from")) {
    return { from: checkSchemaName((adopt as { from?: unknown }).from, "adopt.from") };
  }
  throw new InvalidOptionsError("adopt", 'expected true, false, or { from: "<schema of the official tables>" }');
}

/**
 * `adopt` on a schema migrated before: the adoption it recorded (to report;
 * refused if it names another source or was rolled back), or the schema to
 * adopt now (refused later unless this schema is still empty).
 */
export async function adoptionDecision(
  tx: Queryable,
  schema: string,
  adopt: AdoptOption | undefined,
): Promise<{ adoptFrom: string | undefined; already: AdoptionRecord | undefined }> {
  if (adopt === undefined || adopt === false) return { adoptFrom: undefined, already: undefined };
  const already = await readAdoption(tx, schema);
  if (!already) return { adoptFrom: typeof adopt === "object" ? adopt.from : await onlyOfficialSchema(tx, schema), already: undefined };
  if (typeof adopt === "object" && adopt.from !== already.from) {
    throw new MigrationError(`Schema "${schema}" adopted schema "${already.from}" already, not "${adopt.from}". Nothing was changed.`, { migration: "adoption" });
  }
  if (already.state === "rolled-back") {
    throw new MigrationError(`Schema "${schema}" was rolled back to the official saver in schema "${already.from}"; adopt into a new schema instead. Nothing was changed.`, {
      migration: "adoption",
    });
  }
  return { adoptFrom: undefined, already };
}

/**
 * A first migration of `schema`: decide about the official saver's tables
 * (see {@link AdoptOption}). Returns the schema to adopt, if any, and, not
 * told anything, the official tables found in other schemas (to say once).
 */
export async function officialTablesDecision(
  tx: Queryable,
  schema: string,
  present: Set<string>,
  adopt: AdoptOption | undefined,
): Promise<{ adoptFrom: string | undefined; elsewhere: OfficialTables[] }> {
  if (present.has("checkpoint_migrations")) {
    // The official saver's own schema: our tables cannot be created beside them (same names).
    const found = (await findOfficialTables(tx)).filter((f) => f.schema === schema);
    throw new AdoptionRequiredError(schema, found.length > 0 ? found : [{ schema, source: "js", officialVersion: -1 }]);
  }
  const ours = OWN_TABLES.filter((t) => present.has(t));
  if (ours.length > 0) {
    throw new MigrationError(
      `Schema "${schema}" has no ${MIGRATIONS_TABLE} table but holds table(s) ${ours.join(", ")}, which this package would create. ` +
        "It is not a layout this package or the official LangGraph Postgres saver leaves. Nothing was changed.",
      { migration: loadMigrations()[0]!.name },
    );
  }
  if (adopt === false) return { adoptFrom: undefined, elsewhere: [] };
  // Official tables in other schemas belong to another application, or to a switch that names them
  // (adopt): they must not stop an unrelated schema's setup (issue 39). Said once, after the commit.
  if (adopt === undefined) return { adoptFrom: undefined, elsewhere: await findOfficialTables(tx) };
  return { adoptFrom: typeof adopt === "object" ? adopt.from : await onlyOfficialSchema(tx, schema), elsewhere: [] };
}

/**
 * What a first migration says about the official tables it found in other
 * schemas and left alone: once, as an event (the CLI prints its message).
 */
export function officialTablesEvent(schema: string, found: OfficialTables[]): Extract<SaverEvent, { type: "officialTablesFound" }> {
  const what = found
    .map((f) => `schema "${f.schema}" holds the tables of the official ${f.source === "js" ? "JS" : "Python"} saver (checkpoint_migrations at version ${f.officialVersion})`)
    .join("; ");
  const adopt: SuggestedCommand = { words: ["migrate", "--adopt", found[0]!.schema, "--dry-run"], schema };
  return {
    type: "officialTablesFound",
    schema,
    of: "saver",
    schemas: found.map((f) => f.schema),
    message:
      `${what}: schema "${schema}" was set up beside them, without their threads; they stay as they are. ` +
      `To carry their threads over while "${schema}" is still empty: ${suggest(adopt)} prints the plan.`,
    suggested: [adopt],
  };
}

/** `adopt: true`: the one schema holding official tables. */
async function onlyOfficialSchema(tx: Queryable, schema: string): Promise<string> {
  const found = (await findOfficialTables(tx)).filter((f) => f.schema !== schema);
  if (found.length === 1) return found[0]!.schema;
  throw new MigrationError(
    found.length === 0
      ? `adopt: no schema of this database holds the official LangGraph saver's tables. Nothing was changed.`
      : `adopt: several schemas hold the official LangGraph saver's tables (${found.map((f) => `"${f.schema}"`).join(", ")}); ` +
          'name one: adopt: { from: "<schema>" } (CLI: --adopt <schema>). Nothing was changed.',
    { migration: "adoption" },
  );
}
