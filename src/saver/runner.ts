/**
 * Running the saver's statements: each as a named prepared statement (unless
 * turned off), after a check, once per saver, that the schema is migrated to
 * exactly what this code knows; a failure becomes a typed error that says
 * whether the schema is missing, older or newer than this code.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import type { Db } from "../db/db.js";
import { assertSchemaCurrent, latestVersion, schemaLevel } from "../db/migrate.js";
import { AdoptionRolledBackError, CheckpointerError, DatabaseOperationError, SchemaNotMigratedError, SchemaTooNewError, sqlStateOf } from "../errors.js";
import type { EventHandler } from "../events.js";
import { ADOPTION_SQLSTATE } from "../db/official.js";

export class Runner {
  readonly #db: Db;
  readonly #schema: string;
  readonly #prepared: boolean;
  readonly #onEvent: EventHandler | undefined;
  /** Statement text -> prepared statement name. */
  readonly #names = new Map<string, string>();
  #ready: Promise<void> | undefined;

  constructor(options: { db: Db; schema: string; prepared: boolean; onEvent: EventHandler | undefined }) {
    this.#db = options.db;
    this.#schema = options.schema;
    this.#prepared = options.prepared;
    this.#onEvent = options.onEvent;
  }

  /** Checks once per saver that the schema is migrated to exactly what this code knows. */
  ensureReady(): Promise<void> {
    if (!this.#ready) {
      this.#ready = assertSchemaCurrent(this.#db, this.#schema, "saver", this.#onEvent);
      // Do not cache a failure: the schema may be migrated a moment later.
      this.#ready.catch(() => {
        this.#ready = undefined;
      });
    }
    return this.#ready;
  }

  /** Check the schema again now (after a migration). */
  recheck(): Promise<void> {
    this.#ready = undefined;
    return this.ensureReady();
  }

  /** Run one statement; a prepared one, named after a hash of its text, unless turned off. */
  async run<R extends pg.QueryResultRow>(text: string, values: unknown[], what: string): Promise<{ rows: R[] }> {
    await this.ensureReady();
    let name: string | undefined;
    if (this.#prepared) {
      name = this.#names.get(text);
      if (name === undefined) {
        // Names are per connection: a hash of the text keeps savers on different schemas apart.
        name = `lgcp_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
        this.#names.set(text, name);
      }
    }
    try {
      return await this.#db.run<R>(text, values, name);
    } catch (err) {
      throw await this.failure(err, what);
    }
  }

  /** The typed error for a failed statement. */
  async failure(err: unknown, what: string): Promise<CheckpointerError> {
    if (err instanceof CheckpointerError) return err;
    const state = sqlStateOf(err);
    if (state === ADOPTION_SQLSTATE.rolledBack) return new AdoptionRolledBackError(this.#schema, { cause: err });
    if (state === "42P01" || state === "3F000" || state === "42703") {
      // A table or column gone: the schema changed under us (dropped, or a newer release's
      // migration ran since the check). Say which, and check again next time.
      this.#ready = undefined;
      const level = await schemaLevel(this.#db, this.#schema).catch(() => undefined);
      const known = latestVersion();
      if (level && level.version > known && level.compatibleFrom > known) {
        return new SchemaTooNewError(this.#schema, level.version, known, level.compatibleFrom, { cause: err });
      }
      if (state !== "42703") return new SchemaNotMigratedError(this.#schema, level?.version ?? 0, known, { cause: err });
    }
    return new DatabaseOperationError(what, err);
  }
}
