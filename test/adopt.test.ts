/**
 * Issue 8: switching from the official LangGraph Postgres saver. Real graphs
 * run on `@langchain/langgraph-checkpoint-postgres` (and a schema laid out as
 * the Python saver leaves it, from test/fixtures/python-saver.json); then our
 * `migrate` adopts the tables in place and every thread goes on with our saver.
 */
import { readFileSync } from "node:fs";
import { HumanMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, MemorySaver, type StateSnapshot } from "@langchain/langgraph";
import { DeltaSnapshot, type BaseCheckpointSaver, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import { validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { encode, ExtData } from "@msgpack/msgpack";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { DeserializationError, latestVersion, loadMigrations, migrate, MigrationError, MsgpackSerializer, PostgresSaver } from "../src/index.js";
import { loadsPython } from "../src/pyserde.js";
import { withTestDatabase } from "./helpers/db.js";
import { approvalGraph, chatGraph, history, logGraph, mapReduceGraph, nestedGraph, shape, tid } from "./helpers/graphs.js";
import type { PythonFixture } from "./fixtures/python-saver.gen.js";

const db = withTestDatabase("adopt");

const cfg = (thread_id: string, extra: Record<string, unknown> = {}): RunnableConfig => ({ configurable: { thread_id, ...extra } });

async function tuples(saver: BaseCheckpointSaver, config: RunnableConfig): Promise<Map<string, CheckpointTuple>> {
  const out = new Map<string, CheckpointTuple>();
  for await (const t of saver.list(config)) out.set(`${t.config.configurable?.checkpoint_ns}|${t.checkpoint.id}`, t);
  return out;
}

/** Row count of each table in `schema`. */
async function countRows(schema: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ t: string }>("SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", [schema]);
  const out: Record<string, number> = {};
  for (const { t } of rows) {
    out[t] = (await db.pool.query(`SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(t)}`)).rows[0].n;
  }
  return out;
}

/** Everything a schema's DDL determines for our tables: columns (in order), constraints, indexes. */
async function schemaShape(schema: string) {
  const columns = await db.pool.query(
    `SELECT table_name, column_name, row_number() OVER (PARTITION BY table_name ORDER BY ordinal_position)::int AS position,
            data_type, collation_name, is_nullable, column_default
       FROM information_schema.columns
      WHERE table_schema = $1 AND table_name <> 'checkpoint_migrations'
      ORDER BY table_name, position`,
    [schema],
  );
  const constraints = await db.pool.query(
    `SELECT c.relname AS table_name, k.conname, k.contype::text, pg_get_constraintdef(k.oid) AS def
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname <> 'checkpoint_migrations' ORDER BY 1, 2`,
    [schema],
  );
  const indexes = await db.pool.query(
    `SELECT tablename, indexname, replace(indexdef, quote_ident($1) || '.', '') AS def
       FROM pg_indexes WHERE schemaname = $1 AND tablename <> 'checkpoint_migrations' ORDER BY 1, 2`,
    [schema],
  );
  const tables = await db.pool.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema]);
  return { tables: tables.rows.map((r) => r.table_name as string), columns: columns.rows, constraints: constraints.rows, indexes: indexes.rows };
}

/** Official JS saver rows for a checkpoint written before format v4 (pending sends as writes of the parent). */
async function insertV1Checkpoints(schema: string, threadId: string): Promise<{ parent: string; child: string }> {
  const q = pg.escapeIdentifier(schema);
  const parent = "1ef00000-0000-6000-8000-000000000001";
  const child = "1ef00000-0000-6000-8001-000000000002";
  const json = (v: unknown) => Buffer.from(JSON.stringify(v));
  await db.pool.query(
    `INSERT INTO ${q}.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) VALUES
       ($1, '', $2, NULL, $4, '{"source":"input","step":-1,"parents":{}}'),
       ($1, '', $3, $2, $5, '{"source":"loop","step":0,"parents":{}}')`,
    [
      threadId,
      parent,
      child,
      { v: 1, id: parent, ts: "2024-07-01T10:00:00.000Z", channel_versions: { __start__: 1 }, versions_seen: {}, pending_sends: [] },
      { v: 1, id: child, ts: "2024-07-01T10:00:01.000Z", channel_versions: { __start__: 2, items: 2 }, versions_seen: { __input__: {} }, pending_sends: [] },
    ],
  );
  await db.pool.query(`INSERT INTO ${q}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES ($1, '', 'items', '2', 'json', $2)`, [
    threadId,
    json(["a", "b"]),
  ]);
  await db.pool.query(
    `INSERT INTO ${q}.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob) VALUES
       ($1, '', $2, 'task-1', 0, '__pregel_tasks', 'json', $3), ($1, '', $2, 'task-1', 1, '__pregel_tasks', 'json', $4)`,
    [threadId, parent, json({ lg_name: "Send", node: "work", args: { item: "a" } }), json({ lg_name: "Send", node: "work", args: { item: "b" } })],
  );
  return { parent, child };
}

async function officialSchema(schema: string): Promise<OfficialSaver> {
  const official = new OfficialSaver(db.pool, undefined, { schema });
  await official.setup();
  return official;
}

/** Lays out `schema` as the Python saver's migrations 0..`upTo` leave it, with the fixture's rows. */
async function pythonSchema(schema: string, fixture: PythonFixture, upTo = fixture.migrations.length - 1): Promise<void> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${pg.escapeIdentifier(schema)}`);
    await client.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
    // One statement at a time, outside a transaction: CREATE INDEX CONCURRENTLY, as the Python saver runs it.
    for (const [v, sql] of fixture.migrations.entries()) {
      if (v > upTo) break;
      await client.query(sql);
      await client.query("INSERT INTO checkpoint_migrations (v) VALUES ($1)", [v]);
    }
    for (const c of fixture.checkpoints) {
      await client.query(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) VALUES ($1, $2, $3, $4, $5, $6)",
        [c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata],
      );
    }
    for (const b of fixture.blobs) {
      await client.query("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES ($1, $2, $3, $4, $5, $6)", [
        b.thread_id,
        b.checkpoint_ns,
        b.channel,
        b.version,
        b.type,
        b.blob === null ? null : Buffer.from(b.blob, "hex"),
      ]);
    }
    for (const w of fixture.writes) {
      await client.query(
        `INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, ${upTo >= 9 ? "task_path, " : ""}idx, channel, type, blob)
         VALUES ($1, $2, $3, $4, ${upTo >= 9 ? "$9, " : ""}$5, $6, $7, $8)`,
        [w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.type, Buffer.from(w.blob, "hex"), ...(upTo >= 9 ? [w.task_path] : [])],
      );
    }
  } finally {
    await client.end();
  }
}

const fixture = JSON.parse(readFileSync(new URL("fixtures/python-saver.json", import.meta.url), "utf8")) as PythonFixture;

// ---------------------------------------------------------------------------
// A database written by the official JS saver
// ---------------------------------------------------------------------------

describe("adopting a schema written by @langchain/langgraph-checkpoint-postgres", () => {
  const schema = "agents-prod";
  const threads = { chat: tid("chat"), approval: tid("approval"), nested: tid("nested"), log: tid("log"), map: tid("map"), v1: tid("v1") };
  const before = new Map<string, { tuples: Map<string, CheckpointTuple>; state: StateSnapshot; history: StateSnapshot[] }>();
  let official: OfficialSaver;
  let saver: PostgresSaver;
  let result: Awaited<ReturnType<typeof migrate>>;
  let rowsBefore: Record<string, number>;
  const graphs = (s: BaseCheckpointSaver) => ({
    chat: chatGraph(s),
    approval: approvalGraph(s),
    nested: nestedGraph(s),
    log: logGraph(s),
    map: mapReduceGraph(s, new Map()),
    v1: logGraph(s),
  });

  beforeAll(async () => {
    official = await officialSchema(schema);
    const g = graphs(official);
    for (const text of ["hi", "how are you?", "bye"]) await g.chat.invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg(threads.chat));
    await g.approval.invoke({}, cfg(threads.approval)); // left at its interrupt
    await g.nested.invoke({ topic: "otters" }, cfg(threads.nested)); // the subgraph's interrupt is pending
    await g.log.invoke({ word: "one" }, cfg(threads.log));
    await g.log.invoke({ word: "two" }, cfg(threads.log));
    await g.map.invoke({ items: ["x", "y"] }, cfg(threads.map));
    await insertV1Checkpoints(schema, threads.v1);
    for (const [name, thread] of Object.entries(threads)) {
      const graph = g[name as keyof typeof g];
      before.set(name, {
        tuples: await tuples(official, cfg(thread)),
        state: await graph.getState(cfg(thread), { subgraphs: true }),
        history: await history(graph, cfg(thread)),
      });
    }
    rowsBefore = await countRows(schema);
    result = await migrate({ pool: db.pool, schema });
    saver = new PostgresSaver(db.pool, { schema });
  });

  it("records the adoption as our migrations and reports what it found", async () => {
    expect(result.adoption).toMatchObject({ source: "js", officialVersion: 4 });
    expect(result.fromVersion).toBe(0);
    expect(result.toVersion).toBe(latestVersion());
    expect(result.applied.map((m) => m.name)).toEqual(loadMigrations().map((m) => m.name));
    expect(result.applied[0]!.sql).toMatch(/Adopting the official LangGraph Postgres saver's tables/);
    const { rows } = await db.pool.query(`SELECT version, name, sha256 FROM "${schema}".checkpointer_migrations ORDER BY version`);
    expect(rows).toEqual(loadMigrations().map((m) => ({ version: m.version, name: m.name, sha256: m.sha256 })));
    // Nothing lost: the same rows are still there (no Python inline values here, so no new blobs).
    const { rows: lineages } = await db.pool.query(`SELECT DISTINCT thread_id, checkpoint_ns FROM "${schema}".checkpoints`);
    expect(await countRows(schema)).toEqual({ ...rowsBefore, checkpointer_migrations: latestVersion(), checkpoint_heads: lineages.length });
    // Backfills: one head per lineage, the greatest checkpoint id (the official saver's "latest");
    // created_at is each checkpoint's own timestamp, so retention rules see the real age of old threads.
    const { rows: wrong } = await db.pool.query(
      `SELECT thread_id, checkpoint_ns, max(checkpoint_id) AS checkpoint_id FROM "${schema}".checkpoints c GROUP BY 1, 2
       HAVING max(checkpoint_id) IS DISTINCT FROM (SELECT h.checkpoint_id FROM "${schema}".checkpoint_heads h
                                                    WHERE h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns)
       UNION ALL
       SELECT thread_id, checkpoint_ns, checkpoint_id FROM "${schema}".checkpoints WHERE created_at <> (checkpoint ->> 'ts')::timestamptz`,
    );
    expect(wrong).toEqual([]);
    // Migrating again is a no-op.
    expect((await migrate({ pool: db.pool, schema })).applied).toEqual([]);
  });

  it("reads every old checkpoint exactly as the official saver did (values, versions, metadata, writes, v1 pending sends)", async () => {
    for (const [name, thread] of Object.entries(threads)) {
      const ours = await tuples(saver, cfg(thread));
      const theirs = before.get(name)!.tuples;
      expect([...ours.keys()].sort(), name).toEqual([...theirs.keys()].sort());
      for (const [key, t] of theirs) {
        if (name === "v1") continue; // below
        expect(ours.get(key), `${name} ${key}`).toEqual(t);
      }
    }
    // The v1 child gets its pending sends from the parent's writes, versioned like the official saver does.
    // The official saver re-encodes them on the way (dropping their `lg_name`); ours returns them as stored.
    const ours = await tuples(saver, cfg(threads.v1));
    for (const [key, t] of before.get("v1")!.tuples) {
      const mine = ours.get(key)!;
      const { __pregel_tasks: sends, ...rest } = mine.checkpoint.channel_values;
      const { __pregel_tasks: officialSends, ...officialRest } = t.checkpoint.channel_values;
      expect({ ...mine, checkpoint: { ...mine.checkpoint, channel_values: rest } }).toEqual({ ...t, checkpoint: { ...t.checkpoint, channel_values: officialRest } });
      expect(sends === undefined).toBe(officialSends === undefined);
    }
    const child = [...ours.values()].find((t) => t.checkpoint.v === 1 && t.parentConfig)!;
    expect(child.checkpoint.channel_values.__pregel_tasks).toEqual([
      { lg_name: "Send", node: "work", args: { item: "a" } },
      { lg_name: "Send", node: "work", args: { item: "b" } },
    ]);
    expect(child.checkpoint.channel_versions.__pregel_tasks).toBe(2);
  });

  it("getState and getStateHistory are identical before and after", async () => {
    const g = graphs(saver);
    for (const [name, thread] of Object.entries(threads)) {
      if (name === "v1") continue; // hand-made rows, not a run of logGraph
      const graph = g[name as keyof typeof g];
      expect(await graph.getState(cfg(thread), { subgraphs: true }), name).toEqual(before.get(name)!.state);
      expect(await history(graph, cfg(thread)), name).toEqual(before.get(name)!.history);
    }
  });

  it("a chat thread continues: the next invoke appends, history keeps every old step, new versions sort after the old integers", async () => {
    const graph = chatGraph(saver);
    const config = cfg(threads.chat);
    await graph.invoke({ messages: [new HumanMessage({ id: "h-again", content: "again" })] }, config);
    const state = await graph.getState(config);
    expect(state.values.messages.map((m: { content: unknown }) => m.content)).toEqual([
      "hi",
      "echo: hi",
      "how are you?",
      "echo: how are you?",
      "bye",
      "echo: bye",
      "again",
      "echo: again",
    ]);
    // The same four turns on LangGraph's own MemorySaver: the same history shape.
    const reference = chatGraph(new MemorySaver());
    for (const text of ["hi", "how are you?", "bye", "again"]) {
      await reference.invoke({ messages: [new HumanMessage({ id: `h-${text}`, content: text })] }, cfg("ref"));
    }
    expect(shape(await history(graph, config))).toEqual(shape(await history(reference, cfg("ref"))));
    // Versions: LangGraph compares them with `>`; new ones must exceed every old integer.
    const [head, previous] = [...(await tuples(saver, config)).values()];
    const oldMax = Math.max(...[...before.get("chat")!.tuples.values()].flatMap((t) => Object.values(t.checkpoint.channel_versions) as number[]));
    const headMessages = head!.checkpoint.channel_versions.messages as number;
    expect(typeof headMessages).toBe("number");
    expect(headMessages > oldMax).toBe(true);
    expect(headMessages > (previous!.checkpoint.channel_versions.messages as number)).toBe(true);
    for (const v of Object.values(head!.checkpoint.channel_versions)) expect(typeof v).toBe("number");
  });

  it("an interrupted run resumes, in the root graph and in a subgraph", async () => {
    const approval = approvalGraph(saver);
    const done = await approval.invoke(new Command({ resume: "yes" }), cfg(threads.approval));
    expect(done).toMatchObject({ draft: "hello world", approved: "yes", published: true });

    const nested = nestedGraph(saver);
    const state = await nested.getState(cfg(threads.nested), { subgraphs: true });
    expect(state.next).toEqual(["sub"]);
    const out = await nested.invoke(new Command({ resume: "looks good" }), cfg(threads.nested));
    expect(out.summary).toContain("reviewer said looks good");
    // Exactly what the same run gives on LangGraph's MemorySaver, history included.
    const reference = nestedGraph(new MemorySaver());
    await reference.invoke({ topic: "otters" }, cfg("ref"));
    expect(out).toEqual(await reference.invoke(new Command({ resume: "looks good" }), cfg("ref")));
    expect(shape(await history(nested, cfg(threads.nested)))).toEqual(shape(await history(reference, cfg("ref"))));
  });

  it("time travel to an old checkpoint forks a branch that reads its own values, not the other branch's", async () => {
    const graph = logGraph(saver);
    const config = cfg(threads.log);
    const old = (await history(graph, config)).find((s) => s.metadata?.source === "loop" && s.metadata.step === 1)!;
    expect(old.values).toEqual({ word: "one", log: ["one"], turn: 1 });
    // Same step counter as the original branch's "two" turn: the fork's versions must not collide with its integers.
    await graph.invoke({ word: "fork" }, old.config);
    expect((await graph.getState(config)).values).toEqual({ word: "fork", log: ["one", "fork"], turn: 2 });
    // The original branch is intact.
    const originalHead = before.get("log")!.state;
    expect((await graph.getState(originalHead.config)).values).toEqual({ word: "two", log: ["one", "two"], turn: 2 });
    await graph.invoke({ word: "three" }, config);
    expect((await graph.getState(config)).values).toEqual({ word: "three", log: ["one", "fork", "three"], turn: 3 });
  });

  it("the official saver stops working on the adopted tables (it fails loudly, never writes behind our back)", async () => {
    await expect(official.getTuple(cfg(threads.chat))).rejects.toThrow(/blob/);
    await expect(chatGraph(official).invoke({ messages: [new HumanMessage("sneaky")] }, cfg(threads.chat))).rejects.toThrow();
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM "${schema}".checkpoint_heads WHERE thread_id = $1`, [threads.chat]);
    expect(rows[0].n).toBe(1);
  });
});

// ---------------------------------------------------------------------------
// A database laid out by the Python saver
// ---------------------------------------------------------------------------

describe("adopting a schema laid out by the Python saver (migrations 0..9)", () => {
  const schema = "py_saver";
  let saver: PostgresSaver;
  let result: Awaited<ReturnType<typeof migrate>>;

  beforeAll(async () => {
    await pythonSchema(schema, fixture);
    result = await migrate({ pool: db.pool, schema });
    saver = new PostgresSaver(db.pool, { schema });
  });

  it("adopts it, drops Python's redundant thread_id indexes, retags its msgpack values", async () => {
    expect(result.adoption).toMatchObject({ source: "python", officialVersion: 9 });
    const { rows: idx } = await db.pool.query("SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY 1", [schema]);
    expect(idx.map((r) => r.indexname)).not.toContain("checkpoints_thread_id_idx");
    const { rows: types } = await db.pool.query(
      `SELECT DISTINCT type FROM ${schema}.checkpoint_blobs UNION SELECT DISTINCT type FROM ${schema}.checkpoint_writes ORDER BY 1`,
    );
    expect(types.map((r) => r.type)).toEqual(["json", "msgpack-py", "null"]);
    // The bytes are untouched.
    const { rows } = await db.pool.query(`SELECT encode(value, 'hex') AS hex FROM ${schema}.checkpoint_blobs WHERE type = 'msgpack-py' ORDER BY 1`);
    expect(rows.map((r) => r.hex)).toEqual(fixture.blobs.map((b) => b.blob).sort());
    // Inline primitives also became blobs (one per channel version); the checkpoint JSONB still has them.
    const { rows: inline } = await db.pool.query(
      `SELECT count(*)::int AS n FROM ${schema}.checkpoints WHERE checkpoint -> 'channel_values' <> '{}'::jsonb`,
    );
    expect(inline[0].n).toBe(fixture.checkpoints.filter((c) => Object.keys((c.checkpoint as { channel_values: object }).channel_values).length > 0).length);
  });

  it("reads Python checkpoints: inline primitives, msgpack blobs and writes, None writes", async () => {
    const ours = [...(await tuples(saver, cfg("py-log"))).values()];
    expect(ours.map((t) => ({ checkpoint_id: t.checkpoint.id, channel_values: t.checkpoint.channel_values, pending_writes: t.pendingWrites }))).toEqual(
      fixture.expected,
    );
    const state = await logGraph(saver).getState(cfg("py-log"));
    expect(state.values).toEqual({ word: "world", log: ["hello", "world"], turn: 2 });
    expect(state.next).toEqual([]);
    expect(await history(logGraph(saver), cfg("py-log"))).toHaveLength(6);
  });

  it("a Python thread continues with our saver, and time travel works on it", async () => {
    const graph = logGraph(saver);
    await graph.invoke({ word: "again" }, cfg("py-log"));
    expect((await graph.getState(cfg("py-log"))).values).toEqual({ word: "again", log: ["hello", "world", "again"], turn: 3 });
    const states = await history(graph, cfg("py-log"));
    expect(states).toHaveLength(9);
    const afterFirst = states.find((s) => s.metadata?.step === 1)!;
    await graph.invoke({ word: "fork" }, afterFirst.config);
    expect((await graph.getState(cfg("py-log"))).values).toEqual({ word: "fork", log: ["hello", "fork"], turn: 2 });
  });

  it("a Python object (pydantic model) is a typed error naming its class, never a wrong value", async () => {
    const err = await saver.getTuple(cfg("py-messages")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeserializationError);
    expect((err as Error).message).toMatch(/pydantic v2 model \(ext 5\) of class langchain_core\.messages\.human\.HumanMessage/);
  });
});

// ---------------------------------------------------------------------------
// The adopted schema is exactly a migrated one
// ---------------------------------------------------------------------------

describe("schema after adoption", () => {
  it("is identical to a freshly migrated schema (columns in order, types, collations, defaults, constraints, indexes)", async () => {
    await migrate({ pool: db.pool, schema: "fresh" });
    const fresh = await schemaShape("fresh");
    expect(fresh.tables).toEqual(["checkpoint_blobs", "checkpoint_heads", "checkpoint_writes", "checkpointer_migrations", "checkpoints"]);

    await officialSchema("shape_js");
    await migrate({ pool: db.pool, schema: "shape_js" });
    await pythonSchema("shape_py", fixture);
    await migrate({ pool: db.pool, schema: "shape_py" });
    for (const adopted of ["shape_js", "shape_py"]) {
      const got = await schemaShape(adopted);
      // The official migrations table stays, for reference; everything else matches.
      expect(got.tables).toEqual(["checkpoint_blobs", "checkpoint_heads", "checkpoint_migrations", "checkpoint_writes", "checkpointer_migrations", "checkpoints"]);
      expect(got.columns, adopted).toEqual(fresh.columns);
      expect(got.constraints, adopted).toEqual(fresh.constraints);
      expect(got.indexes, adopted).toEqual(fresh.indexes);
    }
  });
});

// ---------------------------------------------------------------------------
// Refusals, dry run, concurrency
// ---------------------------------------------------------------------------

describe("what adoption refuses, and how it runs", () => {
  async function snapshot(schema: string) {
    return { shape: await schemaShape(schema), rows: await countRows(schema) };
  }
  async function refused(schema: string, pattern: RegExp): Promise<void> {
    const before = await snapshot(schema);
    const err = await migrate({ pool: db.pool, schema }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as Error).message).toMatch(pattern);
    expect((err as Error).message).toMatch(/Nothing was changed/);
    expect(await snapshot(schema)).toEqual(before);
  }

  it("a partly migrated official schema: says which versions it found", async () => {
    await pythonSchema("partial", fixture, 3); // blobs.blob still NOT NULL, no task_path
    await refused("partial", /partly migrated official saver schema \(checkpoint_migrations has versions 0, 1, 2, 3/);
  });

  it("an official schema newer than we know", async () => {
    await pythonSchema("newer", fixture);
    await db.pool.query("INSERT INTO newer.checkpoint_migrations (v) VALUES (10)");
    await refused("newer", /version 10, newer than the versions this package can adopt/);
  });

  it("unknown columns, constraints and dependent views", async () => {
    await officialSchema("changed");
    await db.pool.query(`ALTER TABLE changed.checkpoints ADD COLUMN tenant text; ALTER TABLE changed.checkpoint_writes ALTER COLUMN idx TYPE bigint`);
    await refused("changed", /checkpoints\.tenant is not an official column; checkpoint_writes\.idx is bigint NOT NULL, expected integer NOT NULL/);

    await officialSchema("viewed");
    await db.pool.query(`CREATE VIEW viewed.heads AS SELECT thread_id FROM viewed.checkpoints`);
    await db.pool.query(`CREATE TABLE viewed.owners (thread_id text, checkpoint_ns text, checkpoint_id text,
      FOREIGN KEY (thread_id, checkpoint_ns, checkpoint_id) REFERENCES viewed.checkpoints)`);
    await refused("viewed", /foreign key owners_thread_id_checkpoint_ns_checkpoint_id_fkey on table owners references them; view viewed\.heads depends on them/);
  });

  it("same-named tables without the official migrations table", async () => {
    await db.pool.query(`CREATE SCHEMA lookalike; CREATE TABLE lookalike.checkpoints (id int)`);
    await refused("lookalike", /holds table\(s\) checkpoints but no checkpoint_migrations table/);
  });

  it("data the adoption would have to drop or could not keep", async () => {
    const official = await officialSchema("typed");
    await chatGraph(official).invoke({ messages: [new HumanMessage("hi")] }, cfg("t"));
    await db.pool.query(`UPDATE typed.checkpoints SET type = 'custom' WHERE checkpoint_id = (SELECT min(checkpoint_id) FROM typed.checkpoints)`);
    await refused("typed", /checkpoints whose "type" column is set/);
  });

  it("--dry-run prints the plan and changes nothing", async () => {
    const official = await officialSchema("dry");
    await logGraph(official).invoke({ word: "w" }, cfg("t"));
    const before = await snapshot("dry");
    const plan = await migrate({ pool: db.pool, schema: "dry", dryRun: true });
    expect(plan.adoption).toMatchObject({ source: "js", officialVersion: 4 });
    expect(plan.toVersion).toBe(0);
    expect(plan.applied.map((m) => m.name)).toEqual(loadMigrations().map((m) => m.name));
    for (const fragment of [
      "ADD COLUMN is_head boolean DEFAULT false NOT NULL",
      "ALTER COLUMN thread_id TYPE text COLLATE \"C\"",
      "RENAME COLUMN blob TO value",
      "CREATE UNIQUE INDEX checkpoints_one_head_per_lineage",
    ]) {
      expect(plan.applied[0]!.sql).toContain(fragment);
    }
    expect(await snapshot("dry")).toEqual(before);
    const { rowCount } = await db.pool.query("SELECT 1 FROM information_schema.tables WHERE table_schema = 'dry' AND table_name = 'checkpointer_migrations'");
    expect(rowCount).toBe(0);
  });

  it("concurrent migrate from several processes adopts once", async () => {
    const official = await officialSchema("racing_adopt");
    for (const word of ["a", "b", "c"]) await logGraph(official).invoke({ word }, cfg("t"));
    const pools = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      const results = await Promise.all(pools.map((pool) => migrate({ pool, schema: "racing_adopt" })));
      expect(results.filter((r) => r.adoption !== undefined)).toHaveLength(1);
      expect(results.filter((r) => r.applied.length === 0)).toHaveLength(7);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    const saver = new PostgresSaver(db.pool, { schema: "racing_adopt" });
    expect((await logGraph(saver).getState(cfg("t"))).values).toEqual({ word: "c", log: ["a", "b", "c"], turn: 3 });
  });
});

// ---------------------------------------------------------------------------
// Python msgpack values (the decoder behind "msgpack-py")
// ---------------------------------------------------------------------------

describe("Python msgpack plain values", () => {
  const serde = new MsgpackSerializer();
  const py = (bytes: number[] | Uint8Array) => serde.loadsTyped("msgpack-py", bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));

  it("decodes plain values exactly", async () => {
    const value = { s: "héllo", n: -5, f: 1.5, big: 2 ** 40, list: [1, [true, false, null]], bin: new Uint8Array([1, 2, 3]), empty: {} };
    expect(await py(encode(value))).toEqual(value);
    expect(await py([0xcf, 0x00, 0x20, 0, 0, 0, 0, 0, 1])).toBe(2n ** 53n + 1n); // beyond 2^53: a bigint, never rounded
    expect(await py([0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe])).toBe(-2);
    expect(await py([0x82, 0x01, 0xa1, 0x61, 0xc3, 0xa1, 0x62])).toEqual(new Map<unknown, unknown>([[1, "a"], [true, "b"]])); // non-str keys
    const proto = (await py([0x81, 0xa9, ...Buffer.from("__proto__"), 0x01])) as Record<string, unknown>;
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    expect(Object.keys(proto)).toEqual(["__proto__"]);
    expect(await serde.loadsTyped("null", new Uint8Array())).toBeNull();
    expect(await serde.loadsTyped("bytearray", new Uint8Array([9]))).toEqual(new Uint8Array([9]));
  });

  it("rebuilds DeltaSnapshot and sets; refuses every other Python object with its class name", async () => {
    expect(await py(encode(new ExtData(7, encode([1, 2]))))).toEqual(new DeltaSnapshot([1, 2]));
    expect(await py(encode(new ExtData(0, encode(["builtins", "set", [1, 2]]))))).toEqual(new Set([1, 2]));
    const cases: [Uint8Array, RegExp][] = [
      [encode(new ExtData(0, encode(["uuid", "UUID", "0f"]))), /constructor with one argument \(ext 0\) of class uuid\.UUID/],
      [encode(new ExtData(2, encode(["langgraph.types", "Interrupt", { value: 1 }]))), /\(ext 2\) of class langgraph\.types\.Interrupt/],
      [encode(new ExtData(3, encode(["datetime", "datetime", "2024-01-01T00:00:00", "fromisoformat"]))), /class datetime\.datetime/],
      [encode(new ExtData(6, encode(["<f8", [2], "C", new Uint8Array(16)]))), /numpy array \(ext 6\)/],
      [encode(new ExtData(42, new Uint8Array([0]))), /extension type 42/],
      [encode(new ExtData(-1, new Uint8Array(4))), /extension type -1/],
    ];
    for (const [bytes, pattern] of cases) {
      const err = await py(bytes).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DeserializationError);
      expect((err as Error).message).toMatch(pattern);
    }
  });

  it("corrupt data is a typed error", async () => {
    for (const bytes of [[0x92, 0x01], [0xc1], [0x01, 0x02], [0xa2, 0xff, 0xfe], [0xdd, 0xff, 0xff, 0xff, 0xff], [], new Uint8Array(600).fill(0x91)]) {
      await expect(py(bytes)).rejects.toBeInstanceOf(DeserializationError);
    }
    expect(() => loadsPython("pickle", new Uint8Array())).toThrow(DeserializationError);
    // Random bytes: a value or a DeserializationError, never another failure.
    let seed = 42;
    const next = () => (seed = (seed * 48271) % 2147483647);
    for (let i = 0; i < 5000; i++) {
      const bytes = Uint8Array.from({ length: next() % 48 }, () => next() % 256);
      const out = await py(bytes).catch((e: unknown) => e);
      if (out instanceof Error) expect(out, Buffer.from(bytes).toString("hex")).toBeInstanceOf(DeserializationError);
    }
  });
});

// ---------------------------------------------------------------------------
// The official conformance suite on an adopted database
// ---------------------------------------------------------------------------

const conformanceSchema = "conformance_adopted";
const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
  checkpointerName: "langgraph-checkpoint-pg",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    const official = await officialSchema(conformanceSchema);
    await logGraph(official).invoke({ word: "before the switch" }, cfg("old-thread"));
    const adopted = await migrate({ pool: db.pool, schema: conformanceSchema });
    if (!adopted.adoption) throw new Error("expected an adoption");
  },
  async createCheckpointer() {
    await db.pool.query(`TRUNCATE ${conformanceSchema}.checkpoints, ${conformanceSchema}.checkpoint_writes, ${conformanceSchema}.checkpoint_blobs, ${conformanceSchema}.checkpoint_heads`);
    return new PostgresSaver(db.pool, { schema: conformanceSchema });
  },
};
validate(initializer);
