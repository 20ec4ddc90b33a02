/**
 * The commands that change rows: delete, copy, import, prune and compact.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { compact, type CompactResult } from "../ops/compact.js";
import { listThreads, THREAD_SIZE_MEANS } from "../ops/inspect.js";
import { prune, type PruneKept, type PruneResult } from "../ops/prune.js";
import { DEFAULT_GRACE } from "../ops/prune-options.js";
import { PostgresSaver } from "../saver/saver.js";
import { EXIT, NotFoundError } from "./exit.js";
import { formatBytes, progress, styleFor, table } from "./format.js";
import { loadModule } from "./module.js";
import { importThreads, type ImportSummary } from "./transfer.js";
import { json, withConnection, type Common, type Io } from "./context.js";

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
        `\n  ${st.dim(THREAD_SIZE_MEANS)}` +
        (dryRun ? "\nNothing was deleted; run it again without --dry-run to delete." : ""),
    );
    return EXIT.OK;
  });
}

export async function copyThreadCommand(
  c: Common & { from: string; to: string; upTo: string | undefined; overwrite: boolean; module: string | undefined; dryRun: boolean },
  io: Io,
): Promise<number> {
  const serde = c.module === undefined ? undefined : await serdeFrom(c.module);
  return withConnection(c, false, async (conn) => {
    const where = `schema ${JSON.stringify(c.schema)} of ${conn.label}`;
    const saver = new PostgresSaver(conn.pool, { schema: c.schema, ...(serde ? { serde } : {}) });
    const r = await saver.copyThread(c.from, c.to, { ...(c.upTo !== undefined ? { upTo: c.upTo } : {}), overwrite: c.overwrite, dryRun: c.dryRun });
    if (c.json) {
      io.out(json({ database: conn.label, schema: c.schema, dryRun: c.dryRun, from: c.from, to: c.to, upTo: c.upTo ?? null, ...r }));
      return EXIT.OK;
    }
    const st = styleFor(process.stdout);
    const what =
      `thread ${st.cyan(JSON.stringify(c.from))}${c.upTo ? ` up to checkpoint ${c.upTo}` : ""} to ${st.cyan(JSON.stringify(c.to))} in ${where}: ` +
      `${r.checkpoints} checkpoints, ${r.writes} writes, ${r.blobs} blobs` +
      (r.overwrote ? ` (replacing the thread ${JSON.stringify(c.to)} held)` : "");
    io.out(c.dryRun ? `${st.yellow("Dry run")}: would copy ${what}. Nothing was written; run it again without --dry-run to copy.` : `Copied ${what}.`);
    return EXIT.OK;
  });
}

export async function importCommand(
  c: Common & { file: string | undefined; skipExisting: boolean; keepWhole: boolean; module: string | undefined; maxLineBytes: number },
  io: Io,
): Promise<number> {
  const serde = c.module === undefined ? undefined : await serdeFrom(c.module);
  return withConnection(c, false, async (conn) => {
    const where = `schema ${JSON.stringify(c.schema)} of ${conn.label}`;
    const report = (s: ImportSummary) => {
      const sum = (k: "checkpoints" | "writes" | "blobs") => s.imported.reduce((n, r) => n + r[k], 0);
      const compacted = s.imported.filter((r) => (r.compacted?.values ?? 0) > 0);
      const values = compacted.reduce((n, r) => n + r.compacted!.values, 0);
      return (
        `Imported ${s.imported.length} thread(s) (${sum("checkpoints")} checkpoints, ${sum("writes")} writes, ${sum("blobs")} blobs) into ${where}` +
        (s.skipped.length ? `; skipped ${s.skipped.length} existing: ${s.skipped.map((t) => JSON.stringify(t)).join(", ")}` : "") +
        (compacted.length
          ? `; stored ${values} value(s) of ${compacted.length} thread(s) by content (` +
            `${formatBytes(compacted.reduce((n, r) => n + r.compacted!.bytesBefore, 0))} -> ${formatBytes(compacted.reduce((n, r) => n + r.compacted!.bytesAfter, 0))})`
          : "")
      );
    };
    const options = { ifExists: c.skipExisting ? ("skip" as const) : ("fail" as const), elementStorage: !c.keepWhole, maxLineBytes: c.maxLineBytes, ...(serde ? { serde } : {}) };
    const summary = await importThreads({ pool: conn.pool, schema: c.schema }, c.file, options, {
      onPartial: (partial) => {
        if (partial.imported.length > 0 || partial.skipped.length > 0) io.err(`${report(partial)} before the error.`);
      },
      // The thread is imported and reads as in the source; only storing its whole values by content failed.
      onThread: (r) => {
        if (r.compactError !== undefined) {
          io.err(
            `Thread ${JSON.stringify(r.threadId)}: imported as exported, but its values stored whole could not be stored by content: ${r.compactError}. ` +
              `Run \`compact --thread ${JSON.stringify(r.threadId)}\`${serde ? "" : " (with --module when your saver's serializer is not the default)"}.`,
          );
        }
      },
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
    keepTombstones: string | undefined;
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
        ...(c.keepTombstones !== undefined ? { keepTombstones: c.keepTombstones } : {}),
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
        (result.threadsExpired ? `, including ${result.threadsExpired} idle or expired thread(s)` : "") +
        (result.tombstones ? `, and ${result.tombstones} tombstone(s) of deleted threads` : "");
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
              `(${result.threadsScanned} thread(s) scanned, ${result.threads?.length ?? 0} with something to delete). Nothing was deleted; add --yes to delete.`
          : `Deleted ${what} from schema ${JSON.stringify(c.schema)} of ${conn.label} (${result.threadsScanned} thread(s) scanned).` +
              (result.bytes > 0 ? "\nThe space is reused by new rows after (auto)vacuum; VACUUM FULL or pg_repack returns it to the OS." : ""),
      );
      const kept = keptText(result.kept, c);
      if (kept) io.out(`${dryRun ? "Would keep" : "Kept"} ${kept}`);
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

/**
 * What prune kept, by rule, as the flags that asked for it: "22 checkpoint(s):
 * 20 by --keep-last 20, 2 by --grace 15m (...)". Undefined when it kept none
 * (no checkpoint rule, or nothing there).
 */
function keptText(kept: PruneKept, c: { keepLast?: number; olderThan?: string; grace?: string }): string | undefined {
  const total = kept.keepLast + kept.head + kept.olderThan + kept.grace + kept.delta;
  if (total === 0) return undefined;
  const grace = c.grace ?? DEFAULT_GRACE;
  const parts = [
    kept.keepLast > 0 ? `${kept.keepLast} by --keep-last ${c.keepLast}` : "",
    kept.head > 0 ? `${kept.head} as the latest of their thread (always kept)` : "",
    kept.olderThan > 0 ? `${kept.olderThan} by --older-than ${c.olderThan}` : "",
    kept.grace > 0 ? `${kept.grace} by --grace ${grace} (written within it, or the parent of one that was: a graph may still run on them; --grace 0 turns it off)` : "",
    kept.delta > 0 ? `${kept.delta} that delta channels of kept checkpoints are rebuilt from` : "",
  ].filter((p) => p !== "");
  return `${total} checkpoint(s): ${parts.join(", ")}.`;
}

/** Convert values stored whole into the forms element storage gives them (see src/ops/compact.ts); a custom serializer comes from a module. */
export async function compactCommand(
  c: Common & { threadIds: string[] | undefined; dryRun: boolean; batchSize: number; module: string | undefined },
  io: Io,
): Promise<number> {
  const serde = c.module === undefined ? undefined : await serdeFrom(c.module);
  return withConnection(c, false, async (conn) => {
    const bar = progress();
    let result: CompactResult;
    try {
      result = await compact({
        pool: conn.pool,
        schema: c.schema,
        batchSize: c.batchSize,
        dryRun: c.dryRun,
        ...(serde ? { serde } : {}),
        ...(c.threadIds ? { threadIds: c.threadIds } : {}),
        onProgress: (p) =>
          bar.update(`${c.dryRun ? "dry run" : "compact"}: ${p.threads} threads, ${p.values} values, ${p.elementRows} element rows (${formatBytes(p.bytesBefore)} -> ${formatBytes(p.bytesAfter)})`),
      });
    } finally {
      bar.done();
    }
    if (c.json) {
      io.out(json({ database: conn.label, schema: c.schema, ...result }));
      return EXIT.OK;
    }
    const st = styleFor(process.stdout);
    io.out(compactSummary(result, `schema ${JSON.stringify(c.schema)} of ${conn.label}`, st));
    return EXIT.OK;
  });
}

/** What compact did (or would do) in words: also what `migrate --adopt` prints after converting what it copied. */
export function compactSummary(result: CompactResult, where: string, st: ReturnType<typeof styleFor>): string {
  const what =
    `${result.values} value(s) (${result.writes} of them pending writes) in ${result.threadsCompacted} of ${result.threads} thread(s), ` +
    `adding ${result.elementRows} element row(s): ${formatBytes(result.bytesBefore)} of whole values become ${formatBytes(result.bytesAfter)}`;
  const lines = [
    result.dryRun
      ? `${st.yellow("Dry run")}: would rewrite ${what} in ${where}. Nothing was changed; run it again without --dry-run to convert.`
      : `Rewrote ${what} in ${where}.` + (result.values > 0 ? "\nA release before element storage cannot read these threads any more (see docs/element-storage.md)." : ""),
  ];
  if (result.valuesSkipped > 0) {
    lines.push(`${st.yellow(`Left ${result.valuesSkipped} value(s) whole`)}: their rows changed while compact ran (the next run converts them).`);
  }
  if (result.undecodable > 0) {
    lines.push(
      `${st.yellow(`Left ${result.undecodable} value(s) whole`)}: the serializer cannot decode them (a Python object, or encrypted: pass --module exporting your saver's serde); reads fail on them as before.`,
    );
  }
  return lines.join("\n");
}

/** The serializer a `--module` exports as `serde`. */
export async function serdeFrom(module: string): Promise<SerializerProtocol> {
  const spec = await loadModule(module, "serializer", "serde");
  const s = spec.serde as Partial<SerializerProtocol> | undefined;
  if (typeof s?.dumpsTyped !== "function" || typeof s.loadsTyped !== "function") {
    throw new NotFoundError(`the module ${JSON.stringify(module)} does not export serde, a serializer (with dumpsTyped and loadsTyped)`);
  }
  return s as SerializerProtocol;
}
