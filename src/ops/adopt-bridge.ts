/**
 * The adoption's triggers, as SQL: the bridge that copies the official
 * saver's writes into our schema while both run, the guards that replace it
 * when the adoption is finished, and what a rollback leaves (our tables
 * refusing writes). Statements only: adopt-plan.ts, adopt-steps.ts and
 * rollback.ts run them.
 */
import { PY_MSGPACK_TYPE } from "../serde/pyserde.js";
import { quoteIdent } from "../validate.js";
import { BRIDGE, BRIDGE_DELETE, FORGET, GUARD, lockOfficial, ROLLED_BACK } from "./adopt.js";
import { ADOPTION_SQLSTATE, ADOPTION_TABLE, PY_TASK_PATH, TABLES } from "../db/official.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_WRITES, CHECKPOINTS } from "../db/names.js";
import { KNOWS_ELEMENTS } from "../saver/element-codec.js";
import { ELEMENTS_CHANNEL } from "../saver/elements.js";
import { gateCall, lockForDelete, upsertTombstones } from "../saver/sql/gate.js";

// Our tables' columns come from names.ts (C, H, W, B); the official tables' (`${s}.…`, `NEW.…`, `gone`
// on their triggers) are the official saver's layout, written as its own names: the same words, not ours.
const C = CHECKPOINTS;
const H = CHECKPOINT_HEADS;
const W = CHECKPOINT_WRITES;
const B = CHECKPOINT_BLOBS;
/** Our table holding what an official table holds. */
const OURS = { checkpoints: C.table, checkpoint_blobs: B.table, checkpoint_writes: W.table } as const;
const cols = (...names: string[]) => names.join(", ");
const BLOB_COLS = cols(B.threadId, B.checkpointNs, B.channel, B.version, B.type, B.value);
const BLOB_KEY = cols(B.threadId, B.checkpointNs, B.channel, B.version);
const WRITE_COLS = cols(W.threadId, W.checkpointNs, W.checkpointId, W.taskId, W.idx, W.channel, W.type, W.value, W.taskPath);
const WRITE_KEY = cols(W.threadId, W.checkpointNs, W.checkpointId, W.taskId, W.idx);

const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** A dollar-quoted body whose tag does not occur in it (schema names may hold `$`). */
function dollar(body: string): string {
  let tag = "$body$";
  for (let i = 0; body.includes(tag); i++) tag = `$body${i}$`;
  return `${tag}${body}${tag}`;
}

/** Where a trigger function may run: the one trigger this package made for it (see {@link fn}). */
interface FiredBy {
  /** The table's schema and name(s); a guard serves each of the official tables. */
  schema: string;
  tables: readonly string[];
  trigger: string;
  when: "BEFORE" | "AFTER";
  level: "ROW" | "STATEMENT";
  ops: readonly ("INSERT" | "UPDATE" | "DELETE")[];
}

/**
 * A trigger function of this package: it runs as its owner (SECURITY DEFINER,
 * fixed search_path), so that neither application role needs a privilege on
 * the other side. Two locks keep that from being anyone else's way in
 * (issue 26, row 2):
 * - nobody but the owner may EXECUTE it, so nobody else can attach it to a
 *   table of their own (CREATE TRIGGER needs EXECUTE; firing does not). Not
 *   only PUBLIC's grant goes: default privileges (ALTER DEFAULT PRIVILEGES
 *   ... GRANT EXECUTE ON FUNCTIONS) give new functions explicit grants too;
 * - its body refuses to run unless fired by the trigger it was made for
 *   (table, trigger name, timing, level, event), should a grant come back.
 */
function fn(schema: string, name: string, firedBy: FiredBy, body: string, declare = ""): string[] {
  const f = `${quoteIdent(schema)}.${name}()`;
  const tables = firedBy.tables.map(lit).join(", ");
  const check = `IF TG_TABLE_SCHEMA <> ${lit(firedBy.schema)} OR TG_TABLE_NAME NOT IN (${tables}) OR TG_NAME <> ${lit(firedBy.trigger)}
     OR TG_WHEN <> '${firedBy.when}' OR TG_LEVEL <> '${firedBy.level}' OR TG_OP NOT IN (${firedBy.ops.map(lit).join(", ")}) THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
      MESSAGE = format('langgraph-checkpoint-pg: %s runs only as the trigger %s that this package created on %s; refused as trigger %s (%s %s %s) on %s.%s',
                       ${lit(f)}, ${lit(firedBy.trigger)}, ${lit(`${quoteIdent(firedBy.schema)}.${firedBy.tables.join("/")}`)},
                       quote_ident(TG_NAME), TG_WHEN, TG_LEVEL, TG_OP, quote_ident(TG_TABLE_SCHEMA), quote_ident(TG_TABLE_NAME));
  END IF;`;
  return [
    `CREATE OR REPLACE FUNCTION ${f} RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS ${dollar(`
${declare ? `DECLARE ${declare}\n` : ""}BEGIN
  ${check}
  ${body}
  RETURN NULL;
END`)}`,
    `REVOKE ALL ON FUNCTION ${f} FROM PUBLIC`,
    `DO ${dollar(`
DECLARE g text;
BEGIN
  FOR g IN SELECT DISTINCT a.grantee::regrole::text FROM pg_catalog.pg_proc p CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
            WHERE p.oid = ${lit(f)}::pg_catalog.regprocedure AND a.grantee <> 0 AND a.grantee <> p.proowner LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %s', ${lit(f)}, g);
  END LOOP;
END`)}`,
  ];
}

/** A statement-level trigger whose transition table `gone` is empty has nothing to do: what ends the two sides' deletes calling each other. */
const returnWhenNoneGone = "IF NOT EXISTS (SELECT 1 FROM gone) THEN RETURN NULL; END IF;";

export function bridgeStatements(schema: string, from: string, source: "js" | "python", version: number): string[] {
  const t = quoteIdent(schema);
  const s = quoteIdent(from);
  const python = source === "python";
  const taskPath = version >= PY_TASK_PATH;
  /** Python's msgpack differs from ours (extension types): tagged apart, bytes untouched. */
  const retag = (col: string) => (python ? `CASE ${col} WHEN 'msgpack' THEN '${PY_MSGPACK_TYPE}' ELSE ${col} END` : col);
  // ISO 8601 as both official savers write `ts` (toISOString(), isoformat()); anything else: the adoption time.
  const isoTs = "'^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{1,9})?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'";
  const createdAt = (cp: string) => `CASE WHEN ${cp} ->> 'ts' ~ ${isoTs} THEN (${cp} ->> 'ts')::timestamptz ELSE now() END`;
  /** Python keeps None/str/int/float/bool channel values inline in the checkpoint: a blob makes them reachable by version. */
  const inlineBlobs = (rows: string, alias: string) => `INSERT INTO ${t}.${B.table} (${BLOB_COLS})
SELECT DISTINCT ON (${alias}.${C.threadId}, ${alias}.${C.checkpointNs}, v.key, ${alias}.${C.checkpoint} -> 'channel_versions' ->> v.key)
       ${alias}.${C.threadId}, ${alias}.${C.checkpointNs}, v.key, ${alias}.${C.checkpoint} -> 'channel_versions' ->> v.key, 'json', convert_to(v.value::text, 'UTF8')
  FROM ${rows}
 CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(${alias}.${C.checkpoint} -> 'channel_values') = 'object'
                                    THEN ${alias}.${C.checkpoint} -> 'channel_values' ELSE '{}'::jsonb END) AS v
 WHERE jsonb_typeof(v.value) IN ('string', 'number', 'boolean', 'null') AND ${alias}.${C.checkpoint} -> 'channel_versions' ->> v.key IS NOT NULL
ON CONFLICT (${BLOB_KEY}) DO NOTHING`;
  /** A trigger not consumed yet (`__start__`, `branch:to:*` with a value): the head still has tasks to run (linear mode). */
  const pending = (cp: string, thread: string, ns: string) => `EXISTS (
    SELECT 1 FROM jsonb_each_text(${cp} -> 'channel_versions') AS cv(channel, version)
      JOIN ${t}.${B.table} b ON b.${B.threadId} = ${thread} AND b.${B.checkpointNs} = ${ns} AND b.${B.channel} = cv.channel AND b.${B.version} = cv.version
     WHERE (cv.channel = '__start__' OR cv.channel LIKE 'branch:to:%') AND b.${B.type} <> 'empty')`;
  /**
   * Key equality across the two schemas' collations, in the one whose index
   * serves it (idx is an integer): `cols.a` are `a`'s columns, `cols.b` `b`'s
   * in the same order (one side ours, the other the official table).
   */
  const eq = (a: string, b: string, cols: { a: readonly string[]; b: readonly string[] }, collate: string) =>
    cols.a.map((c, i) => `${a}.${c} = ${b}.${cols.b[i]}${cols.b[i] === "idx" ? "" : ` COLLATE ${collate}`}`).join(" AND ");
  /** The official tables' keys (their layout), and ours in the same order. */
  const officialLineage = ["thread_id", "checkpoint_ns"];
  const officialKeys = {
    checkpoints: [...officialLineage, "checkpoint_id"],
    checkpoint_blobs: [...officialLineage, "channel", "version"],
    checkpoint_writes: [...officialLineage, "checkpoint_id", "task_id", "idx"],
  };
  const ourKeys = {
    checkpoints: [C.threadId, C.checkpointNs, C.checkpointId],
    checkpoint_blobs: [B.threadId, B.checkpointNs, B.channel, B.version],
    checkpoint_writes: [W.threadId, W.checkpointNs, W.checkpointId, W.taskId, W.idx],
  };
  // Our lineage columns: the same two in all four tables (names.ts checks it).
  const ourLineage = [C.threadId, C.checkpointNs];
  const sameCheckpoint = `c.${C.threadId} = h.${H.threadId} AND c.${C.checkpointNs} = h.${H.checkpointNs} AND c.${C.checkpointId} = h.${H.checkpointId}`;
  const movedOn = `format('langgraph-checkpoint-pg: thread %s (namespace %s) was continued by langgraph-checkpoint-pg in schema %s after the switch; ` +
    `this official-saver instance would fork it from an older checkpoint. Nothing was written. Retry the request on an upgraded instance.', ` +
    `to_json(NEW.thread_id), to_json(NEW.checkpoint_ns), ${lit(quoteIdent(schema))})`;
  /** After `head` was read: refused (LGB01) when our saver wrote the lineage's head (it is not an official row). */
  const refuseMovedOn = `IF head IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM ${s}.checkpoints o WHERE o.thread_id = NEW.thread_id AND o.checkpoint_ns = NEW.checkpoint_ns AND o.checkpoint_id = head) THEN
    RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.threadMovedOn}', MESSAGE = ${movedOn};
  END IF;`;
  /**
   * Element rows are content-addressed and reused by every later put that
   * names their hash: one copied from the official side would be read in
   * place of the value this package stored (issue 26, row 4). No LangGraph
   * channel has the reserved name, and this saver refuses it too.
   */
  const refuseReserved = (condition: string) => `IF ${condition} THEN
    RAISE EXCEPTION USING ERRCODE = 'reserved_name',
      MESSAGE = format('langgraph-checkpoint-pg: channel %s is reserved for the element rows of schema %s; this official write (thread %s, namespace %s) uses it. Nothing was written.',
                       to_json(${lit(ELEMENTS_CHANNEL)}::text), ${lit(quoteIdent(schema))}, to_json(NEW.thread_id), to_json(NEW.checkpoint_ns));
  END IF;`;

  /**
   * The tombstone gate (saver/tombstones.ts) for an official write, first: its
   * lock before any row's, as in this package's own writes. A write continuing
   * a thread deleted here (on either side) is refused (LGB04), so a rollback
   * cannot bring it back either. Blobs carry no checkpoint id: their gate only
   * waits for a deletion in progress; the put's checkpoint, in the same
   * transaction, is the one refused. Writes are refused only when they name
   * the deleted history (see the write trigger).
   */
  const gate = (ids: string, starts: string) => `refused := ${gateCall(schema, { thread: "NEW.thread_id", ns: "NEW.checkpoint_ns", ids, starts })};
  IF refused IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.threadDeleted}',
      MESSAGE = format('langgraph-checkpoint-pg: thread %s (namespace %s) was deleted; this official write continues its deleted history (%s). Nothing was written.',
                       to_json(NEW.thread_id), to_json(NEW.checkpoint_ns), refused);
  END IF;`;
  /** A deletion's lock on each thread it deleted rows of (saver/tombstones.ts), in thread order, before it touches ours. */
  const lockDeleted = `PERFORM ${lockForDelete(schema, "d.thread_id")} FROM (SELECT DISTINCT g.thread_id FROM gone g ORDER BY 1) AS d;`;

  return [
    `CREATE TABLE ${t}.${ADOPTION_TABLE} (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  source_schema text NOT NULL,
  source text NOT NULL,
  official_version integer NOT NULL,
  state text NOT NULL CHECK (state IN ('bridging', 'finished', 'rolled-back')),
  adopted_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  rolled_back_at timestamptz
)`,
    `INSERT INTO ${t}.${ADOPTION_TABLE} (source_schema, source, official_version, state) VALUES (${lit(from)}, ${lit(source)}, ${version}, 'bridging')`,
    // Official writers wait from here to the commit: every row is either copied below or by the triggers.
    lockOfficial(from, "SHARE ROW EXCLUSIVE"),
    `INSERT INTO ${t}.${C.table} (${cols(C.threadId, C.checkpointNs, C.checkpointId, C.parentCheckpointId, C.checkpoint, C.metadata, C.createdAt)})
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, ${createdAt("checkpoint")} FROM ${s}.checkpoints`,
    `INSERT INTO ${t}.${B.table} (${BLOB_COLS})
SELECT thread_id, checkpoint_ns, channel, version, ${retag("type")}, blob FROM ${s}.checkpoint_blobs`,
    ...(python ? [inlineBlobs(`${t}.${C.table} c`, "c")] : []),
    `INSERT INTO ${t}.${W.table} (${WRITE_COLS})
SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, ${retag("type")}, blob, ${taskPath ? "task_path" : "''"} FROM ${s}.checkpoint_writes`,
    // One head per lineage: the greatest checkpoint id in the official column's own collation (what the official saver returns as latest).
    `INSERT INTO ${t}.${H.table} (${cols(H.threadId, H.checkpointNs, H.checkpointId, H.movedAt)})
SELECT DISTINCT ON (thread_id, checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id, ${createdAt("checkpoint")}
  FROM ${s}.checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC`,
    `UPDATE ${t}.${H.table} h SET ${H.hasPendingTasks} = true
  FROM ${t}.${C.table} c
 WHERE ${sameCheckpoint}
   AND ${pending(`c.${C.checkpoint}`, `c.${C.threadId}`, `c.${C.checkpointNs}`)}`,
    `UPDATE ${t}.${C.table} c SET ${C.hasPendingTasks} = true
  FROM ${t}.${H.table} h
 WHERE ${sameCheckpoint} AND h.${H.hasPendingTasks}`,
    // What official instances write from now on, copied in their own transactions.
    ...fn(
      schema,
      "checkpointer_bridge_blob",
      { schema: from, tables: ["checkpoint_blobs"], trigger: BRIDGE, when: "AFTER", level: "ROW", ops: ["INSERT", "UPDATE"] },
      `${refuseReserved(`NEW.channel = ${lit(ELEMENTS_CHANNEL)}`)}
  ${gate("ARRAY[]::text[]", "true")}
  -- The lineage head next: the lock order of this package's put (gate, head, then blobs and row).
  SELECT h.${H.checkpointId} INTO head FROM ${t}.${H.table} h WHERE h.${H.threadId} = NEW.thread_id AND h.${H.checkpointNs} = NEW.checkpoint_ns FOR UPDATE;
  -- Values for a thread our saver continued would serve only a fork from an older state (its checkpoint is refused
  -- below): refused here already, so nothing of it reaches our tables.
  ${refuseMovedOn}
  INSERT INTO ${t}.${B.table} (${BLOB_COLS})
  VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.channel, NEW.version, ${retag("NEW.type")}, NEW.blob)
  ON CONFLICT (${BLOB_KEY}) DO NOTHING;`,
      "head text; refused text;",
    ),
    ...fn(
      schema,
      "checkpointer_bridge_checkpoint",
      { schema: from, tables: ["checkpoints"], trigger: BRIDGE, when: "AFTER", level: "ROW", ops: ["INSERT", "UPDATE"] },
      `${refuseReserved(`NEW.checkpoint -> 'channel_versions' ? ${lit(ELEMENTS_CHANNEL)}`)}
  ${gate(
    "ARRAY[NEW.checkpoint_id, NEW.parent_checkpoint_id]::text[]",
    "(NEW.parent_checkpoint_id IS NULL AND NOT coalesce(jsonb_typeof(NEW.metadata -> 'parents') = 'object' AND NEW.metadata -> 'parents' <> '{}'::jsonb, false))",
  )}
  SELECT h.${H.checkpointId} INTO head FROM ${t}.${H.table} h
   WHERE h.${H.threadId} = NEW.thread_id AND h.${H.checkpointNs} = NEW.checkpoint_ns FOR UPDATE;
  -- A re-put of the head itself is not a fork.
  IF head IS DISTINCT FROM NEW.checkpoint_id THEN
    ${refuseMovedOn}
  END IF;
  ${python ? `${inlineBlobs(`(SELECT NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint) AS n(${cols(C.threadId, C.checkpointNs, C.checkpoint)})`, "n")};` : ""}
  tasks := ${pending("NEW.checkpoint", "NEW.thread_id", "NEW.checkpoint_ns")};
  INSERT INTO ${t}.${C.table} AS c (${cols(C.threadId, C.checkpointNs, C.checkpointId, C.parentCheckpointId, C.checkpoint, C.metadata, C.createdAt, C.hasPendingTasks)})
  VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.parent_checkpoint_id, NEW.checkpoint, NEW.metadata, ${createdAt("NEW.checkpoint")}, tasks)
  ON CONFLICT (${cols(C.threadId, C.checkpointNs, C.checkpointId)}) DO UPDATE
     SET ${C.parentCheckpointId} = EXCLUDED.${C.parentCheckpointId}, ${C.checkpoint} = EXCLUDED.${C.checkpoint}, ${C.metadata} = EXCLUDED.${C.metadata},
         ${C.metadataRaw} = NULL, ${C.hasPendingTasks} = EXCLUDED.${C.hasPendingTasks}, ${C.rowVersion} = c.${C.rowVersion} + 1;
  -- Every official put becomes the head, with or without new blobs (as it becomes the official saver's latest).
  INSERT INTO ${t}.${H.table} AS h (${cols(H.threadId, H.checkpointNs, H.checkpointId, H.hasPendingTasks)})
  VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, tasks)
  ON CONFLICT (${cols(H.threadId, H.checkpointNs)}) DO UPDATE
     SET ${H.checkpointId} = EXCLUDED.${H.checkpointId}, ${H.hasPendingTasks} = EXCLUDED.${H.hasPendingTasks}, ${H.movedAt} = now(), ${H.rowVersion} = h.${H.rowVersion} + 1;`,
      "head text; tasks boolean; refused text;",
    ),
    ...fn(
      schema,
      "checkpointer_bridge_write",
      { schema: from, tables: ["checkpoint_writes"], trigger: BRIDGE, when: "AFTER", level: "ROW", ops: ["INSERT", "UPDATE"] },
      `-- The official saver sends a run's writes without waiting for the put of their checkpoint: those of a new
  -- conversation may come before the put that starts it, so only the deleted history is refused here.
  ${gate("ARRAY[NEW.checkpoint_id]::text[]", "true")}
  -- Writes on a thread our saver continued would be replayed from an older checkpoint: refused too.
  SELECT h.${H.checkpointId} INTO head FROM ${t}.${H.table} h WHERE h.${H.threadId} = NEW.thread_id AND h.${H.checkpointNs} = NEW.checkpoint_ns;
  ${refuseMovedOn}
  IF TG_OP = 'INSERT' THEN
    INSERT INTO ${t}.${W.table} (${WRITE_COLS})
    VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.task_id, NEW.idx, NEW.channel, ${retag("NEW.type")}, NEW.blob, ${taskPath ? "NEW.task_path" : "''"})
    ON CONFLICT (${WRITE_KEY}) DO NOTHING;
  ELSE
    INSERT INTO ${t}.${W.table} AS w (${WRITE_COLS})
    VALUES (NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id, NEW.task_id, NEW.idx, NEW.channel, ${retag("NEW.type")}, NEW.blob, ${taskPath ? "NEW.task_path" : "''"})
    ON CONFLICT (${WRITE_KEY}) DO UPDATE
       SET ${W.channel} = EXCLUDED.${W.channel}, ${W.type} = EXCLUDED.${W.type}, ${W.value} = EXCLUDED.${W.value}, ${W.taskPath} = EXCLUDED.${W.taskPath},
           ${W.rowVersion} = w.${W.rowVersion} + 1;
  END IF;`,
      "head text; refused text;",
    ),
    // Deletes go both ways with no switch to skip a trigger (any client could set one, issue 26 row 7): each side
    // deletes what the other deleted, and the echo stops at the first statement that found nothing left.
    ...TABLES.flatMap((table) =>
      fn(
        schema,
        `checkpointer_bridge_delete_${table}`,
        { schema: from, tables: [table], trigger: BRIDGE_DELETE, when: "AFTER", level: "STATEMENT", ops: ["DELETE"] },
        `${returnWhenNoneGone}
  ${lockDeleted}${
    table === "checkpoints"
      ? `
  -- Threads the official saver deleted whole (its deleteThread) leave a tombstone here, as this package's deleteThread does.
  ${upsertTombstones(
    schema,
    `SELECT d.thread_id, GREATEST(d.last, (SELECT max(x.${C.checkpointId}) FROM ${t}.${C.table} x WHERE x.${C.threadId} = d.thread_id COLLATE "C"),
                                  (SELECT max(x.${W.checkpointId}) FROM ${t}.${W.table} x WHERE x.${W.threadId} = d.thread_id COLLATE "C"))
    FROM (SELECT g.thread_id, max(g.checkpoint_id COLLATE "C") AS last FROM gone g
           WHERE NOT EXISTS (SELECT 1 FROM ${s}.checkpoints o WHERE o.thread_id = g.thread_id) GROUP BY g.thread_id) AS d`,
  )};`
      : ""
  }
  DELETE FROM ${t}.${OURS[table]} x USING gone g WHERE ${eq("x", "g", { a: ourKeys[table], b: officialKeys[table] }, '"C"')};${
    table === "checkpoints"
      ? `
  -- Lineages the official saver emptied (its deleteThread): this package's rows on them go too, element rows
  -- included (the one place where the bridge deletes those: it says it knows them, for these statements only,
  -- to migration 0008's guard; a function's own SET clause would need a superuser for this setting).
  known := pg_catalog.current_setting(${lit(KNOWS_ELEMENTS.setting)}, true);
  PERFORM pg_catalog.set_config(${lit(KNOWS_ELEMENTS.setting)}, ${lit(KNOWS_ELEMENTS.value)}, true);
  WITH emptied AS (SELECT DISTINCT g.thread_id, g.checkpoint_ns FROM gone g
                    WHERE NOT EXISTS (SELECT 1 FROM ${s}.checkpoints o WHERE o.thread_id = g.thread_id AND o.checkpoint_ns = g.checkpoint_ns)),
       h AS (DELETE FROM ${t}.${H.table} x USING emptied e WHERE ${eq("x", "e", { a: ourLineage, b: officialLineage }, '"C"')}),
       c AS (DELETE FROM ${t}.${C.table} x USING emptied e WHERE ${eq("x", "e", { a: ourLineage, b: officialLineage }, '"C"')}),
       w AS (DELETE FROM ${t}.${W.table} x USING emptied e WHERE ${eq("x", "e", { a: ourLineage, b: officialLineage }, '"C"')})
  DELETE FROM ${t}.${B.table} x USING emptied e WHERE ${eq("x", "e", { a: ourLineage, b: officialLineage }, '"C"')};
  PERFORM pg_catalog.set_config(${lit(KNOWS_ELEMENTS.setting)}, coalesce(known, ''), true);`
      : ""
  }`,
        table === "checkpoints" ? "known text;" : "",
      ),
    ),
    // A lineage this package deleted (deleteThread, prune of a whole thread): its official copy goes too, so a rollback
    // does not bring it back. While bridging, these deletes fire the bridge's delete triggers, which find our rows
    // gone already; once finished, the guard lets them through (the lineage has no head here any more).
    ...fn(
      schema,
      "checkpointer_forget_official",
      { schema, tables: [H.table], trigger: FORGET, when: "AFTER", level: "STATEMENT", ops: ["DELETE"] },
      `${returnWhenNoneGone}
  ${(["checkpoint_writes", "checkpoint_blobs", "checkpoints"] as const).map((table) => `DELETE FROM ${s}.${table} x USING gone g WHERE ${eq("x", "g", { a: officialLineage, b: [H.threadId, H.checkpointNs] }, '"default"')};`).join("\n  ")}`,
    ),
    ...TABLES.map((table) =>
      table === "checkpoint_writes"
        ? `CREATE TRIGGER ${BRIDGE} AFTER INSERT OR UPDATE ON ${s}.${table} FOR EACH ROW EXECUTE FUNCTION ${t}.checkpointer_bridge_write()`
        : `CREATE TRIGGER ${BRIDGE} AFTER INSERT OR UPDATE ON ${s}.${table} FOR EACH ROW EXECUTE FUNCTION ${t}.checkpointer_bridge_${table === "checkpoints" ? "checkpoint" : "blob"}()`,
    ),
    ...TABLES.map(
      (table) =>
        `CREATE TRIGGER ${BRIDGE_DELETE} AFTER DELETE ON ${s}.${table} REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_bridge_delete_${table}()`,
    ),
    `CREATE TRIGGER ${FORGET} AFTER DELETE ON ${t}.${H.table} REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_forget_official()`,
  ];
}

/**
 * The statements that finish an adoption: the official tables stop being
 * copied and refuse every write from then on (official instances still
 * running fail with SQLSTATE LGB02 and a message saying so). The one write
 * let through: deleting the rows of a lineage that has no head in our schema
 * (deleted here; what `checkpointer_forget_official` does), which loses
 * nothing and needs no switch a client could set as well.
 */
export function finishStatements(schema: string, from: string): string[] {
  const t = quoteIdent(schema);
  const s = quoteIdent(from);
  const message =
    `format('langgraph-checkpoint-pg: schema %s was adopted into schema %s and the switch is finished: the official saver must not write here any more ` +
    `(this instance was not replaced). Nothing was written. Replace it, or roll back with: npx langgraph-checkpoint-pg migrate --schema %s --rollback-adoption', ` +
    `${lit(quoteIdent(from))}, ${lit(quoteIdent(schema))}, ${lit(schema)})`;
  return [
    lockOfficial(from, "ACCESS EXCLUSIVE"),
    ...fn(
      schema,
      "checkpointer_guard_official",
      { schema: from, tables: TABLES, trigger: GUARD, when: "BEFORE", level: "ROW", ops: ["INSERT", "UPDATE", "DELETE"] },
      `IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM ${t}.${H.table} h WHERE h.${H.threadId} = OLD.thread_id AND h.${H.checkpointNs} = OLD.checkpoint_ns) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.finished}', MESSAGE = ${message};`,
    ),
    ...TABLES.flatMap((table) => [
      `DROP TRIGGER IF EXISTS ${BRIDGE} ON ${s}.${table}`,
      `DROP TRIGGER IF EXISTS ${BRIDGE_DELETE} ON ${s}.${table}`,
      `CREATE TRIGGER ${GUARD} BEFORE INSERT OR UPDATE OR DELETE ON ${s}.${table} FOR EACH ROW EXECUTE FUNCTION ${t}.checkpointer_guard_official()`,
    ]),
    `UPDATE ${t}.${ADOPTION_TABLE} SET state = 'finished', finished_at = now()`,
  ];
}

/**
 * What a rollback leaves: the official tables carry none of our triggers
 * any more (rollback.ts runs these before writing into them, so nothing of
 * that is copied back or refused), and ours refuse every write (SQLSTATE
 * LGB03), so an instance of this package still running cannot write where
 * the official saver does not look.
 */
export function rollbackStatements(schema: string, from: string): string[] {
  const t = quoteIdent(schema);
  const s = quoteIdent(from);
  const ours = [H.table, ...TABLES.map((table) => OURS[table])];
  const message =
    `format('langgraph-checkpoint-pg: schema %s was rolled back to the official saver in schema %s: it refuses writes. Nothing was written.', ` +
    `${lit(quoteIdent(schema))}, ${lit(quoteIdent(from))})`;
  return [
    ...fn(
      schema,
      "checkpointer_guard_rolled_back",
      { schema, tables: ours, trigger: ROLLED_BACK, when: "BEFORE", level: "STATEMENT", ops: ["INSERT", "UPDATE", "DELETE"] },
      `RAISE EXCEPTION USING ERRCODE = '${ADOPTION_SQLSTATE.rolledBack}', MESSAGE = ${message};`,
    ),
    ...TABLES.flatMap((table) => [
      `DROP TRIGGER IF EXISTS ${BRIDGE} ON ${s}.${table}`,
      `DROP TRIGGER IF EXISTS ${BRIDGE_DELETE} ON ${s}.${table}`,
      `DROP TRIGGER IF EXISTS ${GUARD} ON ${s}.${table}`,
    ]),
    `DROP TRIGGER IF EXISTS ${FORGET} ON ${t}.${H.table}`,
    ...ours.flatMap((table) => [
      `DROP TRIGGER IF EXISTS ${ROLLED_BACK} ON ${t}.${table}`,
      `CREATE TRIGGER ${ROLLED_BACK} BEFORE INSERT OR UPDATE OR DELETE ON ${t}.${table} FOR EACH STATEMENT EXECUTE FUNCTION ${t}.checkpointer_guard_rolled_back()`,
    ]),
    `UPDATE ${t}.${ADOPTION_TABLE} SET state = 'rolled-back', rolled_back_at = now()`,
  ];
}
