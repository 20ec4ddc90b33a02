/**
 * The schema commands: migrate (with its adoption steps) and status. What
 * only an adoption needs (the serializer that stores what it copied, the
 * rollback's conversion: @langchain/*) is loaded when one runs, so a plain
 * migrate and status start without it.
 */
import type pg from "pg";
import { isPGlite, pgliteDb, poolDb } from "../db/db.js";
import type { EventHandler } from "../events.js";
import { migrationNumber } from "../errors.js";
import { migrationStatus } from "../ops/status.js";
import { CHECKPOINTER_TRACK, MIGRATIONS_TABLE, latestVersion, loadMigrations, runMigrations, statementsText, withBackoff, type AdoptOption } from "../db/migrate.js";
import type { SetupResult } from "../ops/postgres-saver.js";
import { partitionStatements } from "../db/partitions.js";
import { quoteIdent } from "../validate.js";
import { BIN } from "./args.js";
import { EXIT, NoEmbeddedDatabaseError } from "./exit.js";
import { fields, formatTime, styleFor, table } from "./format.js";
import { json, withConnection, type Common, type Io } from "./context.js";
import { resolveUrl, scrub } from "./mask.js";
import { contextOf, inContext, suggest } from "../hint.js";

export async function migrateCommand(
  c: Common & { dryRun: boolean; wait: { text: string; ms: number }; adopt: AdoptOption | undefined; step: "finish" | "rollback" | undefined; module?: string; partitions?: number | undefined },
  io: Io,
): Promise<number> {
  const { schema, dryRun } = c;
  // The commands suggested below act on this schema and database (src/hint.ts).
  const next = (...words: string[]) => suggest({ words, schema }, contextOf(c.target));
  if (c.step) return adoptionStepCommand(c, c.step, io);
  // The serializer that stores what an adoption copies by content: the saver's, when it is not the default (checked before anything runs).
  const serde = c.module === undefined ? undefined : await (await import("./commands-write.js")).serdeFrom(c.module);
  // What an adoption's report needs (the summary of what it stored by content): loaded when one was done.
  let compactSummary: typeof import("./commands-write.js").compactSummary | undefined;
  const print = (result: SetupResult, label: string) => {
    const adoption = result.adoption;
    if (c.json) {
      io.out(json({ database: label, dryRun, ...result, applied: result.applied.map((m) => (dryRun ? m : { version: m.version, name: m.name })) }));
    } else if (dryRun) {
      io.out(`-- ${BIN} migrate --dry-run: ${label}, schema ${JSON.stringify(schema)}`);
      io.out(`-- schema at ${migrationText(result.fromVersion)}, this code: ${migrationText(latestVersion())}; ${result.applied.length} migration(s) pending. Nothing was applied.`);
      if (result.applied.length > 0) {
        io.out(
          `-- Applied in ONE transaction, after: SET LOCAL search_path TO ${quoteIdent(schema)}, pg_temp (pg_catalog is searched first); ` +
            "SELECT pg_catalog.pg_advisory_xact_lock(...); a check that no other role may create in the schema or owns code it runs; " +
            "CREATE SCHEMA IF NOT EXISTS; LOCK TABLE <the saver's tables> IN ACCESS EXCLUSIVE MODE;",
        );
      }
      for (const m of result.applied) {
        io.out(`\n-- migration ${m.name} (recorded in ${quoteIdent(schema)}.${MIGRATIONS_TABLE})\n${m.sql.trim()}`);
      }
      if (adoption?.adopted) {
        io.out(`\n-- then, in the same transaction:\n${adoption.sql}`);
        io.out("\n-- then, once it committed: what it copied is stored by content, as `compact` does (batches of rows, one transaction each).");
      } else if (adoption) io.out(`\n-- schema ${JSON.stringify(schema)} adopted ${JSON.stringify(adoption.from)} already: nothing to do for --adopt.`);
    } else {
      io.out(
        result.applied.length === 0
          ? `Schema ${JSON.stringify(schema)} is up to date (${migrationText(result.toVersion)}) in ${label}; nothing to apply.`
          : `Migrated schema ${JSON.stringify(schema)} in ${label} from ${migrationText(result.fromVersion)}: applied ` +
              result.applied.map((m) => m.name).join(", "),
      );
      if (adoption?.adopted) {
        io.out(
          `Adopted the official ${adoption.source === "js" ? "JS" : "Python"} saver's tables in schema ${JSON.stringify(adoption.from)} ` +
            `(checkpoint_migrations at version ${adoption.officialVersion}): every thread is copied, and what its instances still write is copied as they write it.`,
        );
        if (adoption.compacted && compactSummary) io.out(`What it copied, stored by content as compact does: ${compactSummary(adoption.compacted, `schema ${JSON.stringify(schema)}`, styleFor(process.stdout))}`);
        io.out(
          `Next: run this package on schema ${JSON.stringify(schema)}; once no official instance runs any more: ${next("migrate", "--finish-adoption")}, ` +
            `then ${next("compact")} (what official instances write meanwhile is copied whole). ` +
            `To go back: ${next("migrate", "--rollback-adoption")}.`,
        );
      } else if (adoption) {
        io.out(`Schema ${JSON.stringify(schema)} adopted schema ${JSON.stringify(adoption.from)} already; nothing to do for --adopt.`);
      }
    }
    return EXIT.OK;
  };
  const dbOf = (conn: { pool: unknown }) => (isPGlite(conn.pool) ? pgliteDb(conn.pool) : poolDb(conn.pool as pg.Pool));
  // The adoption is loaded only to adopt: its bridge decodes the official values (@langchain/*, a second of start-up a plain migrate does without).
  const adoption = c.adopt === undefined || c.adopt === false ? undefined : (await import("../ops/adopt-plan.js")).ADOPTION;
  const once = () =>
    withConnection(c, !dryRun, async (conn) => ({
      result: (await runMigrations(dbOf(conn), schema, { dryRun, adopt: c.adopt, retry: false, partitions: c.partitions, onEvent: noteOfficialTables(c, io), adoption })) as SetupResult,
      label: conn.label,
    }));
  try {
    const { result, label } = await untilReachable(c, io, once);
    // After the adoption committed, and outside the retries: a migrate run again finds the adoption done.
    if (result.adoption?.adopted && !dryRun) {
      const [{ compactAdopted }, { MsgpackSerializer }, write] = await Promise.all([import("../ops/compact.js"), import("../serde/serde.js"), import("./commands-write.js")]);
      compactSummary = write.compactSummary;
      await withConnection(
        c,
        false,
        async (conn) => {
          const compacted = await compactAdopted(dbOf(conn), schema, serde ?? new MsgpackSerializer());
          if (compacted) result.adoption!.compacted = compacted;
        },
        { announced: true },
      );
    }
    return print(result, label);
  } catch (err) {
    // A dry run never creates the embedded folder: without one, everything is pending.
    if (!(dryRun && err instanceof NoEmbeddedDatabaseError)) throw err;
    const layout = c.partitions === undefined ? undefined : { key: CHECKPOINTER_TRACK.partitionKey, count: c.partitions };
    const partitioned = new Map<string, number>();
    const all = loadMigrations().map((m) => ({ version: m.version, name: m.name, sql: layout ? statementsText(partitionStatements(m.statements, layout, partitioned)) : m.sql }));
    return print({ schema, fromVersion: 0, toVersion: 0, applied: all }, "a new embedded database");
  }
}

/** The official tables a first migration found in other schemas and left alone: one line on stderr (the store's migrate says its own). */
export function noteOfficialTables(c: Common, io: Io): EventHandler {
  return (e) => {
    if (e.type === "officialTablesFound") io.err(`${BIN} migrate: ${inContext(e.message, e.suggested, contextOf(c.target))}`);
  };
}

/**
 * Run `once` (which connects anew each time) until it succeeds or `--wait` runs out: a server may
 * still be starting (a CI service container). The embedded database is there or not: nothing to
 * wait for (and a locked folder exits 4 at once). The store's migrate waits the same way.
 */
export function untilReachable<T>(c: Common & { wait: { text: string; ms: number } }, io: Io, once: () => Promise<T>): Promise<T> {
  const url = resolveUrl(c.target);
  return withBackoff(url !== undefined && c.wait.ms > 0 ? { attempts: Infinity, maxElapsedMs: c.wait.ms } : false, once, (n) =>
    io.err(
      `${BIN} migrate: attempt ${n.attempt} failed: ${scrub(n.error.message, url)}; trying again in ${(n.delayMs / 1000).toFixed(1)} s ` +
        `(waiting up to ${c.wait.text} in all: --wait)`,
    ),
  );
}

/** `migrate --finish-adoption` and `--rollback-adoption`. */
async function adoptionStepCommand(c: Common & { dryRun: boolean }, step: "finish" | "rollback", io: Io): Promise<number> {
  const { schema, dryRun } = c;
  return withConnection(c, false, async (conn) => {
    if (step === "finish") {
      const { finishAdoption } = await import("../ops/adopt-steps.js");
      const r = await finishAdoption({ pool: conn.pool, schema, dryRun });
      if (c.json) io.out(json({ database: conn.label, dryRun, ...r }));
      else if (!r.finished) io.out(`The adoption of schema ${JSON.stringify(r.from)} by ${JSON.stringify(schema)} is finished already; nothing to do.`);
      else if (dryRun) io.out(`-- ${BIN} migrate --finish-adoption --dry-run: ${conn.label}. Nothing was changed.\n${r.sql}`);
      else {
        io.out(
          `Finished: the official tables in schema ${JSON.stringify(r.from)} are no longer copied and refuse writes from now on ` +
            `(an official instance still running fails with SQLSTATE LGB02). Going back stays possible: ${suggest({ words: ["migrate", "--rollback-adoption"], schema }, contextOf(c.target))}.`,
        );
      }
      return EXIT.OK;
    }
    // Converting back decodes and re-encodes in the official format (@langchain/*): loaded for it alone.
    const { rollbackAdoption } = await import("../ops/rollback.js");
    const r = await rollbackAdoption({ pool: conn.pool, schema, dryRun });
    if (c.json) io.out(json({ database: conn.label, dryRun, ...r }));
    else {
      const what = `${r.checkpoints} checkpoint(s), ${r.blobs} blob(s) and ${r.writes} pending write(s)`;
      io.out(
        dryRun
          ? `Would convert ${what} into the official ${r.target === "js" ? "JS" : "Python"} saver's tables in schema ${JSON.stringify(r.from)}. Nothing was changed.`
          : `Rolled back: ${what} converted into the official ${r.target === "js" ? "JS" : "Python"} saver's tables in schema ${JSON.stringify(r.from)}; ` +
              `they carry no trigger of this package any more. Schema ${JSON.stringify(schema)} refuses writes from now on: deploy the official saver on ${JSON.stringify(r.from)}.`,
      );
    }
    return EXIT.OK;
  });
}

export async function statusCommand(c: Common, io: Io): Promise<number> {
  const { schema } = c;
  return withConnection(c, false, async (conn) => {
    const s = await migrationStatus({ pool: conn.pool, schema });
    const modified = s.applied.some((m) => m.modified);
    const code = (s.state === "up-to-date" || s.state === "newer-compatible") && !modified ? EXIT.OK : EXIT.SCHEMA;
    if (c.json) {
      io.out(json({ database: conn.label, ...s }));
      return code;
    }
    const st = styleFor(process.stdout);
    const state =
      s.state === "up-to-date"
        ? st.green("up to date")
        : s.state === "pending"
          ? st.yellow(`${s.pending.length} migration(s) pending: run ${suggest({ words: ["migrate"], schema }, contextOf(c.target))}`)
          : s.state === "newer-compatible"
            ? st.green(`newer than this code, and its newer migrations keep this code working`)
            : st.red(`NEWER than this code (works with code that knows migration ${migrationNumber(s.compatibleFrom ?? s.schemaVersion)} or later): upgrade the package before using this schema`);
    io.out(
      fields(
        [
          ["database", conn.label],
          ["schema", schema],
          ["migration", `${migrationText(s.schemaVersion, s.applied)} (this code: ${migrationText(s.codeVersion)}), ${state}`],
          ...(s.adoption
            ? ([
                [
                  "adoption",
                  `of schema ${JSON.stringify(s.adoption.from)} (official ${s.adoption.source === "js" ? "JS" : "Python"} saver): ${
                    s.adoption.state === "bridging"
                      ? "bridging (official writes are copied here); finish with --finish-adoption"
                      : s.adoption.state === "finished"
                        ? `finished ${formatTime(s.adoption.finishedAt!)} (the official tables refuse writes)`
                        : `rolled back ${formatTime(s.adoption.rolledBackAt!)} (this schema refuses writes)`
                  }`,
                ],
              ] as [string, string][])
            : []),
        ],
        st,
      ),
    );
    const rows = [
      ...s.applied.map((m) => [
        m.modified ? st.red("✗") : m.known ? st.green("✓") : st.red("?"),
        m.name,
        m.modified
          ? st.red("applied, but the shipped file differs: released migrations must never be edited")
          : m.known
            ? `applied ${formatTime(m.appliedAt)}`
            : st.red("unknown to this code"),
      ]),
      ...s.pending.map((m) => [st.yellow("·"), m.name, st.yellow("pending")]),
    ];
    io.out(`\nMigrations\n${rows.length ? table(["", "MIGRATION", "STATE"], rows, st, "  ") : "  (none)"}`);
    const counts = Object.entries(s.rows);
    io.out(
      counts.length === 0
        ? "\nTables: none yet"
        : `\nRows\n${table(["TABLE", { header: "ROWS", align: "right" }], counts.map(([t, n]) => [t, String(n)]), st, "  ")}`,
    );
    return code;
  });
}

/**
 * The last migration of a schema or of this code, as people know it: its file
 * name (`0006_unversioned_values`), or its number when this code does not ship it.
 */
function migrationText(version: number, applied?: readonly { version: number; name: string }[]): string {
  if (version === 0) return "no migration";
  const name = applied?.find((m) => m.version === version)?.name ?? loadMigrations()[version - 1]?.name;
  return `migration ${name ?? migrationNumber(version)}`;
}
