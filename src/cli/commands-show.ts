/**
 * `show` and `export`: what they print decodes stored values, so this module
 * loads the serializer (and with it @langchain/*); `threads` and `history`
 * (commands-read.ts) do without.
 */
import { threadIds, type InspectOptions } from "../ops/inspect.js";
import { show } from "../ops/show.js";
import { toJsonSafe } from "../ops/json-safe.js";
import { EXIT, NotFoundError } from "./exit.js";
import { fields, formatTime, styleFor, table, valueText } from "./format.js";
import { exportThreads } from "./transfer.js";
import { json, withConnection, type Common, type Io } from "./context.js";

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
          channels: cp.channels.map((x) => ({ ...x, value: x.type === "empty" ? undefined : toJsonSafe(x.value) })),
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
                x.type,
                x.type === "empty" ? "" : valueText(x.value, max),
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

export async function exportCommand(c: Common & { threads: string[]; all: boolean; output: string | undefined; decoded: boolean }, io: Io): Promise<number> {
  return withConnection(c, false, async (conn) => {
    const target: Omit<InspectOptions, "serde"> = { pool: conn.pool, schema: c.schema };
    const where = `schema ${JSON.stringify(c.schema)} of ${conn.label}`;
    const done = await exportThreads(target, c.all ? () => threadIds(target) : c.threads, c.output, where, { decoded: c.decoded });
    if (c.output !== undefined) io.err(`Exported ${done.threads} thread(s), ${done.records} records, to ${c.output}`);
    return EXIT.OK;
  });
}
