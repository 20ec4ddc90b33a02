/**
 * `prune`: retention from the command line (src/ops/prune.ts). Its own
 * module: it needs no serializer, so the command loads no @langchain/*.
 */
import { prune, type PruneKept, type PruneResult } from "../ops/prune.js";
import { DEFAULT_GRACE } from "../ops/prune-options.js";
import { EXIT } from "./exit.js";
import { formatBytes, progress, styleFor, table } from "./format.js";
import { json, withConnection, type Common, type Io } from "./context.js";

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
