/**
 * What each CLI command does, once its arguments are parsed and checked
 * (src/cli/main.ts). Loaded lazily, so `--help` and usage errors stay instant.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type pg from "pg";
import { isPGlite, pgliteDb, poolDb } from "../db/db.js";
import { migrationNumber } from "../errors.js";
import { history, listThreads, migrationStatus, show, threadIds, type InspectOptions } from "../ops/inspect.js";
import { toJsonSafe } from "../ops/decode.js";
import { prune, type PruneResult } from "../ops/prune.js";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { SaverEvent } from "../events.js";
import { MIGRATIONS_TABLE, latestVersion, loadMigrations, runMigrations, type AdoptOption, type MigrateResult } from "../db/migrate.js";
import { finishAdoption } from "../ops/adopt-steps.js";
import { isEncryptedSerializer, reencrypt, type ReencryptResult } from "../ops/reencrypt.js";
import { rollbackAdoption } from "../ops/rollback.js";
import { PostgresSaver } from "../saver/saver.js";
import type { Upcaster } from "../serde/upcast.js";
import { quoteIdent } from "../validate.js";
import { BIN } from "./args.js";
import { connect, type Connection, type Target } from "./connect.js";
import { EXIT, NoEmbeddedDatabaseError, NotFoundError } from "./exit.js";
import { fields, formatBytes, formatTime, progress, styleFor, table, valueText } from "./format.js";
import { exportThreads, importThreads, type ImportSummary } from "./transfer.js";
import { renderLineage } from "./tree.js";

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/** What every command gets: where, which schema, JSON or text. */
export interface Common {
  command: string;
  target: Target;
  schema: string;
  json: boolean;
}

const json = (value: unknown) => JSON.stringify(value, null, 2);

/** Open the target, run `fn`, close what was opened. */
async function withConnection<T>(c: Common, create: boolean, fn: (conn: Connection) => Promise<T>): Promise<T> {
  const conn = await connect(c.target, { create, applicationName: `${BIN}:${c.command}` });
  try {
    return await fn(conn);
  } finally {
    await conn.close().catch(() => undefined);
  }
}

export async function migrateCommand(
  c: Common & { dryRun: boolean; adopt: AdoptOption | undefined; step: "finish" | "rollback" | undefined },
  io: Io,
): Promise<number> {
  const { schema, dryRun } = c;
  const flag = schema === "public" ? "" : ` --schema ${schema}`;
  if (c.step) return adoptionStepCommand(c, c.step, io);
  const print = (result: MigrateResult, label: string) => {
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
      if (adoption?.adopted) io.out(`\n-- then, in the same transaction:\n${adoption.sql}`);
      else if (adoption) io.out(`\n-- schema ${JSON.stringify(schema)} adopted ${JSON.stringify(adoption.from)} already: nothing to do for --adopt.`);
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
            `(checkpoint_migrations at version ${adoption.officialVersion}): every thread is copied, and what its instances still write is copied as they write it.\n` +
            `Next: run this package on schema ${JSON.stringify(schema)}; once no official instance runs any more: \`npx ${BIN} migrate${flag} --finish-adoption\`. ` +
            `To go back: \`npx ${BIN} migrate${flag} --rollback-adoption\`.`,
        );
      } else if (adoption) {
        io.out(`Schema ${JSON.stringify(schema)} adopted schema ${JSON.stringify(adoption.from)} already; nothing to do for --adopt.`);
      }
    }
    return EXIT.OK;
  };
  const onEvent = (e: SaverEvent) => {
    if (e.type === "retry") io.err(`${BIN}: attempt ${e.attempt} of ${e.attempts} failed (${e.code ?? "error"}); retrying in ${e.delayMs} ms`);
  };
  try {
    return await withConnection(c, !dryRun, async (conn) =>
      print(await runMigrations(isPGlite(conn.pool) ? pgliteDb(conn.pool) : poolDb(conn.pool as pg.Pool), schema, { dryRun, adopt: c.adopt, onEvent }), conn.label),
    );
  } catch (err) {
    // A dry run never creates the embedded folder: without one, everything is pending.
    if (!(dryRun && err instanceof NoEmbeddedDatabaseError)) throw err;
    const all = loadMigrations().map((m) => ({ version: m.version, name: m.name, sql: m.sql }));
    return print({ schema, fromVersion: 0, toVersion: 0, applied: all }, "a new embedded database");
  }
}

/** `migrate --finish-adoption` and `--rollback-adoption`. */
async function adoptionStepCommand(c: Common & { dryRun: boolean }, step: "finish" | "rollback", io: Io): Promise<number> {
  const { schema, dryRun } = c;
  const flag = schema === "public" ? "" : ` --schema ${schema}`;
  return withConnection(c, false, async (conn) => {
    if (step === "finish") {
      const r = await finishAdoption({ pool: conn.pool, schema, dryRun });
      if (c.json) io.out(json({ database: conn.label, dryRun, ...r }));
      else if (!r.finished) io.out(`The adoption of schema ${JSON.stringify(r.from)} by ${JSON.stringify(schema)} is finished already; nothing to do.`);
      else if (dryRun) io.out(`-- ${BIN} migrate --finish-adoption --dry-run: ${conn.label}. Nothing was changed.\n${r.sql}`);
      else {
        io.out(
          `Finished: the official tables in schema ${JSON.stringify(r.from)} are no longer copied and refuse writes from now on ` +
            `(an official instance still running fails with SQLSTATE LGB02). Going back stays possible: \`npx ${BIN} migrate${flag} --rollback-adoption\`.`,
        );
      }
      return EXIT.OK;
    }
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
          ? st.yellow(`${s.pending.length} migration(s) pending: run \`npx ${BIN} migrate${schema === "public" ? "" : ` --schema ${schema}`}\``)
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

export async function threadsCommand(c: Common & { limit: number }, io: Io): Promise<number> {
  return withConnection(c, false, async (conn) => {
    const list = await listThreads({ pool: conn.pool, schema: c.schema, limit: c.limit });
    if (c.json) {
      io.out(json(list));
      return EXIT.OK;
    }
    if (list.length === 0) {
      io.out(`No threads in schema ${JSON.stringify(c.schema)} of ${conn.label}.`);
      return EXIT.OK;
    }
    const st = styleFor(process.stdout);
    const right = (header: string) => ({ header, align: "right" as const });
    io.out(
      table(
        ["THREAD", right("CHECKPOINTS"), right("NAMESPACES"), right("WRITES"), right("BLOBS"), right("SIZE"), "LAST UPDATE (UTC)"],
        list.map((t) => [
          st.cyan(t.threadId),
          String(t.checkpoints),
          String(t.namespaces),
          String(t.writes),
          String(t.blobs),
          formatBytes(t.bytes),
          formatTime(t.lastUpdate),
        ]),
        st,
      ),
    );
    return EXIT.OK;
  });
}

export async function deleteThreadsCommand(c: Common & { threadIds: string[]; dryRun: boolean }, io: Io): Promise<number> {
  const { schema, threadIds, dryRun } = c;
  return withConnection(c, false, async (conn) => {
    const where = `schema ${JSON.stringify(schema)} of ${conn.label}`;
    const found = await listThreads({ pool: conn.pool, schema, threadIds });
    const byId = new Map(found.map((t) => [t.threadId, t]));
    const missing = threadIds.filter((id) => !byId.has(id));
    if (missing.length > 0) {
      throw new NotFoundError(`${missing.length === 1 ? "Thread" : "Threads"} ${missing.map((t) => JSON.stringify(t)).join(", ")} not found in ${where}; nothing was deleted`);
    }
    const threads = threadIds.map((id) => byId.get(id)!);
    if (!dryRun) {
      const saver = new PostgresSaver(conn.pool, { schema });
      for (const id of threadIds) await saver.deleteThread(id);
    }
    if (c.json) {
      io.out(json({ database: conn.label, schema, dryRun, threads }));
      return EXIT.OK;
    }
    const st = styleFor(process.stdout);
    const right = (header: string) => ({ header, align: "right" as const });
    io.out(
      (dryRun ? `${st.yellow("Dry run")}: would delete from ${where}:` : `Deleted from ${where}:`) +
        "\n" +
        table(
          ["THREAD", right("CHECKPOINTS"), right("NAMESPACES"), right("WRITES"), right("BLOBS"), right("SIZE")],
          threads.map((t) => [st.cyan(t.threadId), String(t.checkpoints), String(t.namespaces), String(t.writes), String(t.blobs), formatBytes(t.bytes)]),
          st,
          "  ",
        ) +
        (dryRun ? "\nNothing was deleted; run it again without --dry-run to delete." : ""),
    );
    return EXIT.OK;
  });
}

export async function historyCommand(c: Common & { threadId: string; ns: string | undefined }, io: Io): Promise<number> {
  const { threadId, ns, schema } = c;
  return withConnection(c, false, async (conn) => {
    const lineages = await history({ pool: conn.pool, schema, threadId, ...(ns === undefined ? {} : { checkpointNs: ns }) });
    if (lineages.length === 0) {
      throw new NotFoundError(
        `Thread ${JSON.stringify(threadId)} not found in schema ${JSON.stringify(schema)} of ${conn.label}${ns === undefined ? "" : ` (namespace ${JSON.stringify(ns)})`}`,
      );
    }
    if (c.json) {
      io.out(json({ threadId, lineages }));
      return EXIT.OK;
    }
    const st = styleFor(process.stdout);
    const blocks = lineages.map((l) => {
      const forks = l.checkpoints.filter((x) => x.children.length > 1).length;
      const title =
        `${st.bold(`thread ${JSON.stringify(threadId)}, namespace ${JSON.stringify(l.checkpointNs)}`)}: ` +
        `${l.checkpoints.length} checkpoint(s)${forks ? `, ${forks} branch point(s)` : ""}`;
      return [title, ...renderLineage(l, st).map((line) => `  ${line}`)].join("\n");
    });
    io.out(blocks.join("\n\n"));
    return EXIT.OK;
  });
}

export async function showCommand(c: Common & { threadId: string; checkpointId: string | undefined; ns: string }, io: Io): Promise<number> {
  const { threadId, checkpointId, ns, schema } = c;
  return withConnection(c, false, async (conn) => {
    const cp = await show({ pool: conn.pool, schema, threadId, checkpointNs: ns, ...(checkpointId ? { checkpointId } : {}) });
    if (!cp) {
      const what = checkpointId ? `Checkpoint ${checkpointId} of thread ${JSON.stringify(threadId)}` : `Thread ${JSON.stringify(threadId)}`;
      throw new NotFoundError(`${what} not found in namespace ${JSON.stringify(ns)} of schema ${JSON.stringify(schema)} (${conn.label})`);
    }
    if (c.json) {
      io.out(
        json({
          ...cp,
          metadata: toJsonSafe(cp.metadata),
          channels: cp.channels.map((x) => ({ ...x, value: x.type === "empty" || x.type === "missing" ? undefined : toJsonSafe(x.value) })),
          unversioned: cp.unversioned.map((x) => ({ ...x, value: toJsonSafe(x.value) })),
          pendingWrites: cp.pendingWrites.map((w) => ({ ...w, value: toJsonSafe(w.value) })),
        }),
      );
      return EXIT.OK;
    }
    const st = styleFor(process.stdout);
    const meta = (cp.metadata ?? {}) as { source?: unknown; step?: unknown };
    const max = 100;
    const updated = cp.checkpoint.updated_channels;
    io.out(
      `${st.bold(`checkpoint ${cp.checkpointId}`)}${cp.isHead ? `  ${st.green("← head")}` : ""}\n` +
        fields(
          [
            ["thread", JSON.stringify(cp.threadId)],
            ["namespace", JSON.stringify(cp.checkpointNs)],
            ["parent", cp.parentCheckpointId ?? "(none: first checkpoint)"],
            ["source", `${String(meta.source ?? "?")}, step ${String(meta.step ?? "?")}`],
            ["stored", `${formatTime(cp.createdAt)} UTC${cp.ttlSeconds ? `, ttl ${cp.ttlSeconds}s` : ""}`],
            // Python's LangGraph stores updated_channels; LangGraph.js does not.
            ...(Array.isArray(updated) ? [["updated", updated.join(", ") || "(none)"] as [string, string]] : []),
            ["metadata", valueText(cp.metadata, max)],
          ],
          st,
        ),
    );
    io.out(
      `\n${st.bold("Channel values")} (channel_versions → blobs)\n` +
        (cp.channels.length === 0
          ? "  (none)"
          : table(
              ["CHANNEL", "VERSION", "TYPE", "VALUE"],
              cp.channels.map((x) => [
                x.channel,
                x.version,
                x.type === "missing" ? st.red("missing") : x.type,
                x.type === "empty" || x.type === "missing" ? "" : valueText(x.value, max),
              ]),
              st,
              "  ",
            )),
    );
    if (cp.unversioned.length > 0) {
      io.out(
        `\n${st.bold("Channel values without a version")} (stored with the checkpoint)\n` +
          table(
            ["CHANNEL", "VALUE"],
            cp.unversioned.map((x) => [x.channel, valueText(x.value, max)]),
            st,
            "  ",
          ),
      );
    }
    io.out(
      `\n${st.bold("Pending writes")} (stored under this checkpoint by the tasks that ran from it)\n` +
        (cp.pendingWrites.length === 0
          ? "  (none)"
          : table(
              ["TASK", { header: "IDX", align: "right" }, "CHANNEL", "VALUE", "TASK PATH"],
              cp.pendingWrites.map((w) => [w.taskId, String(w.idx), w.channel, valueText(w.value, max), w.taskPath]),
              st,
              "  ",
            )),
    );
    return EXIT.OK;
  });
}

export async function exportCommand(c: Common & { threads: string[]; all: boolean; output: string | undefined }, io: Io): Promise<number> {
  return withConnection(c, false, async (conn) => {
    const target: Omit<InspectOptions, "serde"> = { pool: conn.pool, schema: c.schema };
    const done = await exportThreads(target, c.all ? () => threadIds(target) : c.threads, c.output, `schema ${JSON.stringify(c.schema)} of ${conn.label}`);
    if (c.output !== undefined) io.err(`Exported ${done.threads} thread(s), ${done.records} records, to ${c.output}`);
    return EXIT.OK;
  });
}

export async function importCommand(c: Common & { file: string | undefined; skipExisting: boolean }, io: Io): Promise<number> {
  return withConnection(c, false, async (conn) => {
    const where = `schema ${JSON.stringify(c.schema)} of ${conn.label}`;
    const report = (s: ImportSummary) => {
      const sum = (k: "checkpoints" | "writes" | "blobs") => s.imported.reduce((n, r) => n + r[k], 0);
      return (
        `Imported ${s.imported.length} thread(s) (${sum("checkpoints")} checkpoints, ${sum("writes")} writes, ${sum("blobs")} blobs) into ${where}` +
        (s.skipped.length ? `; skipped ${s.skipped.length} existing: ${s.skipped.map((t) => JSON.stringify(t)).join(", ")}` : "")
      );
    };
    const summary = await importThreads({ pool: conn.pool, schema: c.schema }, c.file, c.skipExisting ? "skip" : "fail", (partial) => {
      if (partial.imported.length > 0 || partial.skipped.length > 0) io.err(`${report(partial)} before the error.`);
    });
    if (c.json) io.out(json({ database: conn.label, schema: c.schema, ...summary }));
    else io.out(report(summary));
    return EXIT.OK;
  });
}

/** A dry run's per-thread lines on a terminal; `--json` has them all. */
const PRUNE_ROWS_SHOWN = 50;

export async function pruneCommand(
  c: Common & {
    keepLast: number | undefined;
    olderThan: string | undefined;
    idleFor: string | undefined;
    threadTtl: boolean | undefined;
    threadIds: string[] | undefined;
    grace: string | undefined;
    yes: boolean;
  },
  io: Io,
): Promise<number> {
  return withConnection(c, false, async (conn) => {
    const dryRun = !c.yes;
    const bar = progress();
    // Ctrl-C: finish the current batch (its transactions are short), then report.
    const stop = new AbortController();
    const onSigint = () => stop.abort();
    process.once("SIGINT", onSigint);
    let result: PruneResult;
    try {
      result = await prune({
        pool: conn.pool,
        schema: c.schema,
        dryRun,
        signal: stop.signal,
        ...(c.keepLast !== undefined ? { keepLast: c.keepLast } : {}),
        ...(c.olderThan !== undefined ? { olderThan: c.olderThan } : {}),
        ...(c.idleFor !== undefined ? { idleFor: c.idleFor } : {}),
        ...(c.threadTtl !== undefined ? { threadTtl: c.threadTtl } : {}),
        ...(c.threadIds !== undefined ? { threadIds: c.threadIds } : {}),
        ...(c.grace !== undefined ? { grace: c.grace } : {}),
        onProgress: (p) =>
          bar.update(
            `${dryRun ? "dry run" : "pruning"}: ${p.threadsScanned} threads, ${p.totals.checkpoints} checkpoints, ` +
              `${p.totals.writes} writes, ${p.totals.blobs} blobs (${formatBytes(p.totals.checkpointBytes + p.totals.writeBytes + p.totals.blobBytes)})`,
          ),
      });
    } finally {
      bar.done();
      process.off("SIGINT", onSigint);
    }
    if (c.json) {
      io.out(json({ database: conn.label, schema: c.schema, ...result }));
    } else {
      const st = styleFor(process.stdout);
      const what =
        `${result.checkpoints} checkpoints, ${result.writes} writes, ${result.blobs} blobs (${formatBytes(result.bytes)})` +
        (result.threadsExpired ? `, including ${result.threadsExpired} idle or expired thread(s)` : "");
      if (dryRun && result.threads && result.threads.length > 0) {
        const right = (header: string) => ({ header, align: "right" as const });
        const shown = result.threads.slice(0, PRUNE_ROWS_SHOWN);
        io.out(
          table(
            ["THREAD", right("CHECKPOINTS"), right("WRITES"), right("BLOBS"), right("SIZE"), ""],
            shown.map((t) => [
              st.cyan(t.threadId),
              String(t.checkpoints),
              String(t.writes),
              String(t.blobs),
              formatBytes(t.bytes),
              t.expired ? "whole thread (idle or past its ttl)" : "",
            ]),
            st,
          ) + (result.threads.length > shown.length ? `\n… and ${result.threads.length - shown.length} more thread(s) (--json lists them all)` : ""),
        );
      }
      io.out(
        dryRun
          ? `${st.yellow("Dry run")}: would delete ${what} in schema ${JSON.stringify(c.schema)} of ${conn.label} ` +
              `(${result.threads?.length ?? 0} of ${result.threadsScanned} thread(s) scanned). Nothing was deleted; add --yes to delete.`
          : `Deleted ${what} from schema ${JSON.stringify(c.schema)} of ${conn.label} (${result.threadsScanned} thread(s) scanned).` +
              (result.bytes > 0 ? "\nThe space is reused by new rows after (auto)vacuum; VACUUM FULL or pg_repack returns it to the OS." : ""),
      );
      if (result.threadsSkipped > 0) {
        io.out(
          `${st.yellow(`Skipped ${result.threadsSkipped} busy thread(s)`)} (a graph or another prune was writing them; the next run picks them up): ` +
            result.skippedThreadIds.map((t) => JSON.stringify(t)).join(", "),
        );
      }
    }
    if (result.aborted) {
      io.err(`Interrupted after batch ${result.batches}: the counts above cover what was done until then.`);
      return EXIT.FAILED;
    }
    return EXIT.OK;
  });
}

/** Load a user module (upcasters, serializer) by path; its exports may also sit under `default` (found by `marker`). */
async function loadModule(path: string, what: string, marker: string): Promise<Record<string, unknown>> {
  let mod: Record<string, unknown>;
  try {
    mod = (await importModule(path)) as Record<string, unknown>;
  } catch (err) {
    throw new NotFoundError(`cannot load the ${what} module ${JSON.stringify(path)}: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
  }
  return mod[marker] !== undefined ? mod : ((mod.default ?? {}) as Record<string, unknown>);
}

/**
 * The user's module. A TypeScript one loads as it is where Node strips types
 * (22.6 and later, or a loader such as `node --import tsx`); on Node 20 it is
 * loaded through tsx when the user's project has it.
 */
async function importModule(file: string): Promise<unknown> {
  const url = pathToFileURL(resolve(file)).href;
  try {
    return await import(url);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ERR_UNKNOWN_FILE_EXTENSION" || !/\.[cm]?tsx?$/.test(file)) throw err;
  }
  // tsx from the module's project, else from the working directory's: its ES module API (require
  // would resolve the CommonJS one), found through its package.json's exports.
  for (const from of [dirname(resolve(file)), process.cwd()]) {
    let manifest: string;
    try {
      manifest = createRequire(resolve(from, "noop.js")).resolve("tsx/package.json");
    } catch {
      continue;
    }
    const spec = (JSON.parse(readFileSync(manifest, "utf8")) as { exports?: Record<string, { import?: string | { default?: string } }> }).exports?.["./esm/api"]?.import;
    const entry = typeof spec === "string" ? spec : spec?.default;
    if (!entry) continue;
    const tsx = (await import(pathToFileURL(resolve(dirname(manifest), entry)).href)) as { tsImport?: TsImport };
    if (tsx.tsImport) return tsx.tsImport(url, import.meta.url);
  }
  throw new Error(
    `Node.js ${process.version} cannot load TypeScript by itself: install tsx in your project (npm install -D tsx) and run this again, or pass the compiled .js module`,
  );
}

type TsImport = (specifier: string, parent: string) => Promise<unknown>;

/**
 * Rewrite checkpoints older than the state version into the current shape.
 * The upcasters are code: they come from a module the user names, which
 * exports `stateVersion` and `upcasters` (the same values the app's saver
 * uses), and `serde` when the saver has its own serializer.
 */
export async function upgradeStateCommand(c: Common & { module: string; batchSize: number }, io: Io): Promise<number> {
  const spec = await loadModule(c.module, "upcasters", "stateVersion");
  return withConnection(c, false, async (conn) => {
    const saver = new PostgresSaver(conn.pool, {
      schema: c.schema,
      stateVersion: spec.stateVersion as number,
      upcasters: spec.upcasters as Record<number, Upcaster>,
      ...(spec.serde === undefined ? {} : { serde: spec.serde as SerializerProtocol }),
    });
    const bar = progress();
    let result: { rewritten: number };
    try {
      result = await saver.upgradeState({ batchSize: c.batchSize, onProgress: (p) => bar.update(`upgrade-state: ${p.rewritten} checkpoints rewritten`) });
    } finally {
      bar.done();
    }
    if (c.json) io.out(json({ database: conn.label, schema: c.schema, stateVersion: spec.stateVersion, ...result }));
    else io.out(`Rewrote ${result.rewritten} checkpoint(s) to state version ${String(spec.stateVersion)} in schema ${JSON.stringify(c.schema)} of ${conn.label}.`);
    return EXIT.OK;
  });
}

/** Rewrite encrypted values into the serializer's current form (see src/ops/reencrypt.ts); the serializer comes from a module. */
export async function reencryptCommand(c: Common & { module: string; batchSize: number; dryRun: boolean }, io: Io): Promise<number> {
  const spec = await loadModule(c.module, "serializer", "serde");
  if (!isEncryptedSerializer(spec.serde)) throw new NotFoundError(`the module ${JSON.stringify(c.module)} does not export serde, an EncryptedSerializer`);
  const serde = spec.serde;
  return withConnection(c, false, async (conn) => {
    const bar = progress();
    let result: ReencryptResult;
    try {
      result = await reencrypt({
        pool: conn.pool,
        schema: c.schema,
        serde,
        batchSize: c.batchSize,
        dryRun: c.dryRun,
        onProgress: (p) => bar.update(`reencrypt: ${p.blobs} blobs, ${p.writes} writes, ${p.checkpoints} checkpoints`),
      });
    } finally {
      bar.done();
    }
    if (c.json) io.out(json({ database: conn.label, schema: c.schema, ...result }));
    else {
      const counts = `${result.blobs} blob(s), ${result.writes} write(s) and the values of ${result.checkpoints} checkpoint(s)`;
      io.out(c.dryRun ? `Would rewrite ${counts} in schema ${JSON.stringify(c.schema)} of ${conn.label}.` : `Rewrote ${counts} in schema ${JSON.stringify(c.schema)} of ${conn.label}.`);
    }
    return EXIT.OK;
  });
}
