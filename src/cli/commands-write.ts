/**
 * The commands that change rows: delete, copy, import, prune and compact.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { compact, type CompactResult } from "../ops/compact.js";
import { listThreads, THREAD_SIZE_MEANS } from "../ops/inspect.js";
import { PostgresSaver } from "../ops/postgres-saver.js";
import { EXIT, NotFoundError } from "./exit.js";
import { formatBytes, progress, styleFor, table } from "./format.js";
import { loadModule } from "./module.js";
import { importThreads, type ImportSummary } from "./transfer.js";
import { json, withConnection, type Common, type Io } from "./context.js";
import { contextOf, suggest } from "../hint.js";

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
              `Run ${suggest({ words: ["compact", "--thread", r.threadId], schema: c.schema }, contextOf(c.target))}${serde ? "" : " (with --module when your saver's serializer is not the default)"}.`,
          );
        }
      },
    });
    if (c.json) io.out(json({ database: conn.label, schema: c.schema, ...summary }));
    else io.out(report(summary));
    return EXIT.OK;
  });
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
