/**
 * The read commands that decode no value: threads and history (show and
 * export, which do, are in commands-show.ts: they load the serializer).
 */
import { history, listThreads, THREAD_SIZE_MEANS } from "../ops/inspect.js";
import { EXIT, NotFoundError } from "./exit.js";
import { formatBytes, formatTime, styleFor, table } from "./format.js";
import { renderLineage } from "./tree.js";
import { json, withConnection, type Common, type Io } from "./context.js";

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
      ) + `\n${st.dim(THREAD_SIZE_MEANS)}`,
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
