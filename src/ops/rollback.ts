/**
 * Rolling an adoption back (see adopt.ts): what this package wrote since the
 * switch goes back into the official saver's tables, in the official format,
 * so the official saver reads every thread again, including the checkpoints
 * written after the switch. One transaction, under both schemas' migration
 * locks, with writers of both savers waiting:
 * - checkpoints (and their pending writes) that are not in the official
 *   tables, or differ there, are converted: values decoded with this saver's
 *   serializer and encoded with LangGraph's `JsonPlusSerializer` (the official
 *   JS saver's); versions made numeric for the JS saver, which refuses
 *   string versions (`counter + a fraction below 1/2` derived from the string,
 *   so versions keep their order and two branches keep distinct blobs), kept
 *   as strings for the Python saver, short ones (saver/version.ts) written long (its
 *   own format, whose counter it parses);
 * - every trigger of this package leaves the official tables; ours refuse
 *   writes from then on (SQLSTATE LGB03), so an instance of this package still
 *   running fails loudly instead of writing where nobody reads.
 * Lists stored by their elements (saver/elements.ts) go back as whole values;
 * element rows themselves are not copied (no checkpoint names them as a channel).
 * Values of channels without a version are not carried: the official savers
 * do not store them.
 */
import { JsonPlusSerializer, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { createHash } from "node:crypto";
import { lockOfficial } from "./adopt.js";
import { type AdoptionRecord } from "../db/official.js";
import { rollbackStatements } from "./adopt-bridge.js";
import type { Queryable } from "../db/db.js";
import { MigrationError } from "../errors.js";
import { adoptionStep } from "./adopt-steps.js";
import { loadElements } from "./decode.js";
import { withTarget, type TargetOptions } from "../db/migrate.js";
import { PY_MSGPACK_TYPE } from "../serde/pyserde.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_WRITES, CHECKPOINTS, OWN_TABLES } from "../db/names.js";
import { toLongVersion, versionCounter } from "../saver/version.js";
import { elementCodec } from "../saver/element-codec.js";
import { elementKey } from "../saver/elements.js";
import { decodeStoredValue, namesElements } from "../saver/stored.js";

// Our tables' names come from names.ts; the official tables' (`${s}.…`, alias `o`) are the official
// saver's layout, written as its own names.
const C = CHECKPOINTS;
const B = CHECKPOINT_BLOBS;
const W = CHECKPOINT_WRITES;

export interface RollbackAdoptionOptions extends TargetOptions {
  /** The serializer this package's saver used (needed to decode encrypted values). Default {@link MsgpackSerializer}. */
  serde?: SerializerProtocol;
  /** Convert and count, write nothing, take no table lock. */
  dryRun?: boolean;
}

export interface RollbackAdoptionResult {
  schema: string;
  /** The schema of the official tables, where the rows went. */
  from: string;
  /** Which official saver the rows were converted for. */
  target: "js" | "python";
  /** Rows written into the official tables (or that would be, in a dry run). */
  checkpoints: number;
  blobs: number;
  writes: number;
  /** False for a dry run. */
  rolledBack: boolean;
}

const PAGE = 200;

/**
 * Roll an adoption back to the official saver: afterwards the official saver
 * reads every thread, including what this package wrote since the switch,
 * and this package's tables refuse writes. Safe to run again. Then deploy
 * the official saver again.
 *
 * @example
 * ```ts
 * const r = await rollbackAdoption({ pool, schema: "langgraph" });
 * console.log(`${r.checkpoints} checkpoints converted back into schema ${r.from}`);
 * ```
 */
export async function rollbackAdoption(options: RollbackAdoptionOptions = {}): Promise<RollbackAdoptionResult> {
  const schema = checkSchemaName(options.schema ?? "public");
  const serde = options.serde ?? new MsgpackSerializer();
  const dryRun = options.dryRun ?? false;
  return withTarget(options, "rollback-adoption", (db) =>
    adoptionStep(db, {
      schema,
      what: "rolling the adoption back",
      dryRun,
      fn: async (tx, record) => {
        // Done before: this schema has refused every write since.
        if (record.state === "rolled-back") return { schema, from: record.from, target: record.source, checkpoints: 0, blobs: 0, writes: 0, rolledBack: true };
        if (!dryRun) {
          const t = quoteIdent(schema);
          // Both savers' writers wait until the commit: nothing is written on either side meanwhile.
          // ACCESS EXCLUSIVE: what the trigger changes below take (never upgraded from a weaker lock).
          // The official tables first: an official write locks them, then (its triggers) ours.
          await tx.query(lockOfficial(record.from, "ACCESS EXCLUSIVE"));
          await tx.query(`LOCK TABLE ${OWN_TABLES.map((x) => `${t}.${x}`).join(", ")} IN ACCESS EXCLUSIVE MODE`);
          // The triggers leave first: what the conversion writes into the official tables is neither copied back
          // nor refused (no switch to skip them, which any client could set as well: issue 26, row 7).
          for (const statement of rollbackStatements(schema, record.from)) await tx.query(statement);
        }
        const counts = await convert(tx, { schema, record, serde, write: !dryRun });
        return { schema, from: record.from, target: record.source, ...counts, rolledBack: !dryRun };
      },
    }),
  );
}

/**
 * A version the official saver can continue from: JS wants numbers (its
 * `getNextVersion` adds 1), Python the long string format.
 */
export function officialVersion(version: unknown, target: "js" | "python"): number | string {
  if (typeof version === "number") return version;
  // The Python saver reads the counter with int(v.split(".")[0]): short versions go long, the rest kept.
  if (target === "python") return toLongVersion(String(version));
  const text = String(version);
  const counter = versionCounter(text);
  // A fraction below 1/2 derived from the whole string: the same version maps the same way
  // everywhere (checkpoints, versions_seen, blob keys), and two branches stay apart.
  const fraction = Number.parseInt(createHash("sha256").update(text).digest("hex").slice(0, 12), 16) / 2 ** 48 / 2;
  return (Number.isFinite(counter) ? counter : 0) + fraction;
}

function mapVersions(versions: unknown, target: "js" | "python"): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries((versions ?? {}) as Record<string, unknown>)) out[k] = officialVersion(v, target);
  return out;
}

interface CheckpointRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  checkpoint: Record<string, unknown>;
  metadata: unknown;
}

async function convert(
  tx: Queryable,
  { schema, record, serde, write }: { schema: string; record: AdoptionRecord; serde: SerializerProtocol; write: boolean },
): Promise<{ checkpoints: number; blobs: number; writes: number }> {
  const t = quoteIdent(schema);
  const s = quoteIdent(record.from);
  const target = record.source;
  const json = new JsonPlusSerializer();
  const encode = async (
    what: string,
    type: string,
    value: Buffer | null,
    load = () => serde.loadsTyped(type, value ?? new Uint8Array()) as Promise<unknown>,
  ): Promise<[string, Uint8Array | null]> => {
    if (type === "empty") return ["empty", null];
    try {
      const [jsonType, bytes] = await json.dumpsTyped(await load());
      return [jsonType, bytes];
    } catch (cause) {
      throw new MigrationError(`Rolling back: ${what} could not be converted to the official format. Nothing was changed.`, { cause, migration: "adoption" });
    }
  };
  /** Keys compared in the official columns' own collation, so their indexes serve the lookups: `o`'s columns, ours in the same order. */
  const same = (o: string, ours: string, officialCols: string[], ourCols: string[]) =>
    officialCols.map((c, i) => `${o}.${c} = ${ours}.${ourCols[i]} COLLATE "default"`).join(" AND ");
  const counts = { checkpoints: 0, blobs: 0, writes: 0 };
  const stored = { serde, codec: elementCodec(serde) };

  // Checkpoints this package wrote (or changed) since the switch, with the blobs they name.
  for (let cursor = ["", "", ""]; ; ) {
    const { rows } = await tx.query<CheckpointRow>(
      `SELECT c.${C.threadId} AS thread_id, c.${C.checkpointNs} AS checkpoint_ns, c.${C.checkpointId} AS checkpoint_id,
              c.${C.parentCheckpointId} AS parent_checkpoint_id, c.${C.checkpoint} AS checkpoint, c.${C.metadata} AS metadata
         FROM ${t}.${C.table} c
        WHERE (c.${C.threadId}, c.${C.checkpointNs}, c.${C.checkpointId}) > ($1, $2, $3)
          AND NOT EXISTS (SELECT 1 FROM ${s}.checkpoints o WHERE ${same("o", "c", ["thread_id", "checkpoint_ns", "checkpoint_id"], [C.threadId, C.checkpointNs, C.checkpointId])}
                             AND o.checkpoint = c.${C.checkpoint} AND o.metadata = c.${C.metadata})
        ORDER BY c.${C.threadId}, c.${C.checkpointNs}, c.${C.checkpointId} LIMIT ${PAGE}`,
      cursor,
    );
    if (rows.length === 0) break;
    const last = rows[rows.length - 1]!;
    cursor = [last.thread_id, last.checkpoint_ns, last.checkpoint_id];
    // Blobs: every (channel, version) the checkpoints name, that the official table lacks under the official version.
    const refs = new Map<string, [string, string, string, string, string]>();
    for (const r of rows) {
      for (const [channel, version] of Object.entries((r.checkpoint.channel_versions ?? {}) as Record<string, unknown>)) {
        const ref: [string, string, string, string, string] = [r.thread_id, r.checkpoint_ns, channel, String(version), String(officialVersion(version, target))];
        refs.set(ref.join("\u0000"), ref);
      }
    }
    const list = [...refs.values()];
    const { rows: blobs } = await tx.query<{ t: string; ns: string; ch: string; v: string; sv: string; type: string; value: Buffer | null }>(
      `SELECT k.t, k.ns, k.ch, k.v, k.sv, b.${B.type} AS type, b.${B.value} AS value
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS k(t, ns, ch, v, sv)
         JOIN ${t}.${B.table} b ON b.${B.threadId} = k.t AND b.${B.checkpointNs} = k.ns AND b.${B.channel} = k.ch AND b.${B.version} = k.v
        WHERE NOT EXISTS (SELECT 1 FROM ${s}.checkpoint_blobs o WHERE o.thread_id = k.t AND o.checkpoint_ns = k.ns AND o.channel = k.ch AND o.version = k.sv)`,
      [0, 1, 2, 3, 4].map((i) => list.map((ref) => ref[i])),
    );
    // Lists stored by their elements: put back together, stored whole.
    const elements = await loadElements(
      (text, values) => tx.query(text, values).then((r) => r.rows),
      `${t}.${B.table}`,
      blobs.map((b) => ({ threadId: b.t, checkpointNs: b.ns, type: b.type, value: b.value })),
    );
    const encoded = await Promise.all(
      blobs.map((b) =>
        encode(
          `the value of channel ${JSON.stringify(b.ch)} on thread ${JSON.stringify(b.t)}`,
          b.type,
          b.value,
          namesElements(b.type)
            ? () => decodeStoredValue(stored, b.type, b.value, { table: "checkpoint_blobs", threadId: b.t, checkpointNs: b.ns, channel: b.ch, version: b.v }, (h) => elements.get(elementKey(b.t, b.ns, h)))
            : undefined,
        ),
      ),
    );
    if (write && blobs.length > 0) {
      await tx.query(
        `INSERT INTO ${s}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[])
         ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`,
        [blobs.map((b) => b.t), blobs.map((b) => b.ns), blobs.map((b) => b.ch), blobs.map((b) => b.sv), encoded.map((e) => e[0]), encoded.map((e) => (e[1] ? Buffer.from(e[1]) : null))],
      );
    }
    counts.blobs += blobs.length;
    const checkpoints = rows.map((r) => {
      const { channel_versions: versions, versions_seen: seen, ...rest } = r.checkpoint;
      const cp: Record<string, unknown> = {
        ...rest,
        // The official savers keep the id in the JSON too; this package, in its column only.
        id: r.checkpoint_id,
        channel_versions: mapVersions(versions, target),
        versions_seen: Object.fromEntries(Object.entries((seen ?? {}) as Record<string, unknown>).map(([node, v]) => [node, mapVersions(v, target)])),
      };
      // The Python saver keeps primitive values inline; none here (they are all in blobs).
      if (target === "python" && cp.channel_values === undefined) cp.channel_values = {};
      return JSON.stringify(cp);
    });
    if (write) {
      await tx.query(
        `INSERT INTO ${s}.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[])
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
            SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`,
        [
          rows.map((r) => r.thread_id),
          rows.map((r) => r.checkpoint_ns),
          rows.map((r) => r.checkpoint_id),
          rows.map((r) => r.parent_checkpoint_id),
          checkpoints,
          rows.map((r) => JSON.stringify(r.metadata ?? {})),
        ],
      );
    }
    counts.checkpoints += rows.length;
  }

  // Pending writes this package stored (or changed) since the switch, on any checkpoint.
  const retag = target === "python" ? `CASE o.type WHEN 'msgpack' THEN '${PY_MSGPACK_TYPE}' ELSE o.type END` : "o.type";
  const withPath = target === "python" && (await hasTaskPath(tx, record.from));
  const officialKeys = ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id"];
  const ourKeys = [W.threadId, W.checkpointNs, W.checkpointId, W.taskId];
  for (let cursor: [string, string, string, string, number] = ["", "", "", "", -(2 ** 31)]; ; ) {
    const { rows } = await tx.query<{
      thread_id: string;
      checkpoint_ns: string;
      checkpoint_id: string;
      task_id: string;
      idx: number;
      channel: string;
      type: string;
      value: Buffer | null;
      task_path: string;
    }>(
      `SELECT w.${W.threadId} AS thread_id, w.${W.checkpointNs} AS checkpoint_ns, w.${W.checkpointId} AS checkpoint_id, w.${W.taskId} AS task_id,
              w.${W.idx} AS idx, w.${W.channel} AS channel, w.${W.type} AS type, w.${W.value} AS value, w.${W.taskPath} AS task_path
         FROM ${t}.${W.table} w
        WHERE (w.${W.threadId}, w.${W.checkpointNs}, w.${W.checkpointId}, w.${W.taskId}, w.${W.idx}) > ($1, $2, $3, $4, $5)
          AND NOT EXISTS (SELECT 1 FROM ${s}.checkpoint_writes o WHERE ${same("o", "w", officialKeys, ourKeys)} AND o.idx = w.${W.idx}
                             AND o.channel = w.${W.channel} AND ${retag} = w.${W.type} AND o.blob IS NOT DISTINCT FROM w.${W.value})
        ORDER BY w.${W.threadId}, w.${W.checkpointNs}, w.${W.checkpointId}, w.${W.taskId}, w.${W.idx} LIMIT ${PAGE}`,
      cursor,
    );
    if (rows.length === 0) break;
    const last = rows[rows.length - 1]!;
    cursor = [last.thread_id, last.checkpoint_ns, last.checkpoint_id, last.task_id, last.idx];
    // Writes stored by content: put back together, stored whole.
    const writeElements = await loadElements(
      (text, values) => tx.query(text, values).then((r) => r.rows),
      `${t}.${B.table}`,
      rows.map((w) => ({ threadId: w.thread_id, checkpointNs: w.checkpoint_ns, type: w.type, value: w.value })),
    );
    const encoded = await Promise.all(
      rows.map((w) =>
        encode(
          `a pending write to channel ${JSON.stringify(w.channel)} on thread ${JSON.stringify(w.thread_id)}`,
          w.type,
          w.value,
          namesElements(w.type)
            ? () =>
                decodeStoredValue(
                  stored,
                  w.type,
                  w.value,
                  { table: "checkpoint_writes", threadId: w.thread_id, checkpointNs: w.checkpoint_ns, checkpointId: w.checkpoint_id, taskId: w.task_id, idx: w.idx },
                  (h) => writeElements.get(elementKey(w.thread_id, w.checkpoint_ns, h)),
                )
            : undefined,
        ),
      ),
    );
    if (write) {
      await tx.query(
        `INSERT INTO ${s}.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob${withPath ? ", task_path" : ""})
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::bytea[]${withPath ? ", $9::text[]" : ""})
         ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
            SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob${withPath ? ", task_path = EXCLUDED.task_path" : ""}`,
        [
          rows.map((w) => w.thread_id),
          rows.map((w) => w.checkpoint_ns),
          rows.map((w) => w.checkpoint_id),
          rows.map((w) => w.task_id),
          rows.map((w) => w.idx),
          rows.map((w) => w.channel),
          encoded.map((e) => e[0]),
          encoded.map((e) => Buffer.from(e[1] ?? new Uint8Array())),
          ...(withPath ? [rows.map((w) => w.task_path)] : []),
        ],
      );
    }
    counts.writes += rows.length;
  }
  return counts;
}

async function hasTaskPath(tx: Queryable, from: string): Promise<boolean> {
  const { rows } = await tx.query(
    "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'task_path' AND NOT attisdropped",
    [`${quoteIdent(from)}.checkpoint_writes`],
  );
  return rows.length > 0;
}
