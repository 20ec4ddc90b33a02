/**
 * Issue 26, rows 2, 4 and 7: the adoption's triggers are nobody's way in.
 * Real roles, an adoption run by a role that is not a superuser (it owns the
 * official tables, as the role that ran the official saver's setup does):
 * - row 2: a role with USAGE on this package's schema and SELECT on its
 *   tables cannot attach the triggers' SECURITY DEFINER functions to a table
 *   of its own, nor use them when EXECUTE is granted after all;
 * - row 4: a role with DML on the official tables only cannot plant element
 *   rows (channel `__elements__`) or values for a thread this package
 *   continued;
 * - row 7: an application role that sets `langgraph_checkpoint_pg.bridge =
 *   off` (the switch the bridge once trusted) gets no write past the bridge
 *   or the guards.
 */
import { randomBytes } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { finishAdoption, grantStatements, migrate, MsgpackSerializer, PostgresSaver, rollbackAdoption } from "../../src/index.js";
import { elementCodec } from "../../src/saver/element-codec.js";
import { encodeList } from "../../src/saver/elements.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { logGraph } from "../helpers/graphs.js";

const db = withTestDatabase("adopt_security");
// Roles are cluster-wide: unique names, dropped at the end.
const suffix = randomBytes(4).toString("hex");
/** Ran the official saver's setup (owns its tables) and adopts them: no superuser. */
const OWNER = `lgcp_adopter_${suffix}`;
/** USAGE on our schema, SELECT on its tables (row 2). */
const READER = `lgcp_reader_${suffix}`;
/** DML on the official tables only (row 4). */
const OFFICIAL = `lgcp_official_${suffix}`;
/** The application's role during the rolling deploy: both savers' tables (row 7). */
const APP = `lgcp_app_${suffix}`;
const PASSWORD = `pw-${randomBytes(8).toString("hex")}`;
const FROM = "official";
const SCHEMA = "ours";
const ROLES = [OWNER, READER, OFFICIAL, APP];
const OURS = ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_heads"].map((t) => `${SCHEMA}.${t}`);
const THEIRS = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"].map((t) => `${FROM}.${t}`);

const pools: pg.Pool[] = [];
function poolAs(role: string, options: pg.PoolConfig = {}): pg.Pool {
  const u = new URL(db.url);
  u.username = role;
  u.password = PASSWORD;
  const pool = testPool({ connectionString: u.toString(), max: 2, ...options });
  pools.push(pool);
  return pool;
}
let owner: pg.Pool;
let official: pg.Pool;
let app: pg.Pool;

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "" } });
const ours = (pool = owner) => new PostgresSaver(pool, { schema: SCHEMA, elementStorage: true });
const theirs = (pool = owner) => new OfficialSaver(pool, undefined, { schema: FROM });

/** Each table's rows, as a count and a digest: what any forged or stray write changes. */
async function state(tables = [...OURS, ...THEIRS]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const t of tables) {
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n, md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) AS h FROM ${t} x`);
    out[t] = `${rows[0].n}:${rows[0].h}`;
  }
  return out;
}

/** The error `sql` fails with (undefined: it succeeded). */
async function failure(pool: pg.Pool | pg.Client, sql: string, values?: unknown[]): Promise<{ code?: string; message: string } | undefined> {
  return pool.query(sql, values).then(
    () => undefined,
    (e: { code?: string; message: string }) => e,
  );
}

beforeAll(async () => {
  for (const role of ROLES) await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PASSWORD}'`);
  await db.pool.query(`GRANT CREATE ON DATABASE ${pg.escapeIdentifier(new URL(db.url).pathname.slice(1))} TO ${OWNER}`);
  // Every function the adopting role creates from now on is granted to READER: an explicit grant, not PUBLIC's.
  await db.pool.query(`ALTER DEFAULT PRIVILEGES FOR ROLE ${OWNER} GRANT EXECUTE ON FUNCTIONS TO ${READER}`);
  owner = poolAs(OWNER);
  await theirs().setup();
  for (const thread of ["t-free", "t-moved", "t-plant", "t-stale", "t-copied", "t-deleted", "t-after", "t-forget"]) {
    await logGraph(theirs()).invoke({ word: "official" }, cfg(thread));
  }
  await migrate({ pool: owner, schema: SCHEMA, adopt: { from: FROM } });
  // Threads this package continued or wrote alone.
  for (const thread of ["t-moved", "t-plant", "t-stale"]) await logGraph(ours()).invoke({ word: "ours" }, cfg(thread));
  await logGraph(ours()).invoke({ word: "only ours" }, cfg("n-ours"));

  await owner.query(`GRANT USAGE ON SCHEMA ${SCHEMA} TO ${READER}; GRANT SELECT ON ALL TABLES IN SCHEMA ${SCHEMA} TO ${READER}`);
  for (const role of [OFFICIAL, APP]) {
    await owner.query(`GRANT USAGE ON SCHEMA ${FROM} TO ${role}; GRANT SELECT, INSERT, UPDATE, DELETE ON ${THEIRS.join(", ")} TO ${role}`);
  }
  for (const sql of grantStatements({ schema: SCHEMA, role: APP })) await owner.query(sql);
  official = poolAs(OFFICIAL);
  app = poolAs(APP);
});

afterAll(async () => {
  for (const pool of pools) await pool.end();
  await db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA}, ${FROM}, scratch CASCADE`);
  await db.pool.query(`ALTER DEFAULT PRIVILEGES FOR ROLE ${OWNER} REVOKE EXECUTE ON FUNCTIONS FROM ${READER}`);
  await db.pool.query(`DROP OWNED BY ${ROLES.join(", ")}`);
  for (const role of ROLES) await db.pool.query(`DROP ROLE IF EXISTS ${role}`);
});

/** The SECURITY DEFINER functions in our schema, and the roles other than their owner that may execute each. */
async function definers(): Promise<{ name: string; others: string[] }[]> {
  const { rows } = await db.pool.query(
    `SELECT p.proname AS name,
            ARRAY(SELECT r.rolname::text FROM pg_roles r WHERE r.oid <> p.proowner AND has_function_privilege(r.oid, p.oid, 'EXECUTE') ORDER BY 1) AS others
       FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.prosecdef ORDER BY 1`,
    [SCHEMA],
  );
  // Superusers may execute anything; what matters is everyone else.
  const supers = new Set((await db.pool.query("SELECT rolname FROM pg_roles WHERE rolsuper")).rows.map((r) => r.rolname as string));
  return rows.map((r) => ({ name: r.name, others: (r.others as string[]).filter((x) => !supers.has(x)) }));
}

describe("row 2: the adoption's definer functions run only as their own triggers", () => {
  /**
   * What a role with only SELECT on our tables tried: a temporary table of its own whose trigger is one of
   * ours, fired with rows it chose. Each one did damage before: a forged checkpoint and head, a blob, a
   * write, deleted rows and threads here, and deleted an official thread in a schema it has no right on.
   */
  const attacks: { fn: string; table: string; trigger: string; fire: string[] }[] = [
    {
      fn: "checkpointer_bridge_checkpoint",
      table: "thread_id text, checkpoint_ns text, checkpoint_id text, parent_checkpoint_id text, checkpoint jsonb, metadata jsonb",
      trigger: "AFTER INSERT ON pg_temp.fake FOR EACH ROW",
      fire: [
        `INSERT INTO pg_temp.fake VALUES ('t-free', '', '1fffffff-0000-6000-8000-00000000f0f0', NULL,
           '{"v":4,"id":"1fffffff-0000-6000-8000-00000000f0f0","ts":"2024-01-01T00:00:00Z","channel_values":{},"channel_versions":{},"versions_seen":{}}', '{}')`,
      ],
    },
    {
      fn: "checkpointer_bridge_blob",
      table: "thread_id text, checkpoint_ns text, channel text, version text, type text, blob bytea",
      trigger: "AFTER INSERT ON pg_temp.fake FOR EACH ROW",
      fire: [`INSERT INTO pg_temp.fake VALUES ('t-free', '', 'word', '999', 'json', '"forged"')`],
    },
    {
      fn: "checkpointer_bridge_write",
      table: "thread_id text, checkpoint_ns text, checkpoint_id text, task_id text, idx int, channel text, type text, blob bytea",
      trigger: "AFTER INSERT ON pg_temp.fake FOR EACH ROW",
      fire: [`INSERT INTO pg_temp.fake SELECT thread_id, checkpoint_ns, checkpoint_id, 'forged', 0, 'word', 'json', '"forged"' FROM ${SCHEMA}.checkpoint_heads`],
    },
    ...[
      ["checkpoints", "thread_id, checkpoint_ns, checkpoint_id"],
      ["checkpoint_blobs", "thread_id, checkpoint_ns, channel, version"],
      ["checkpoint_writes", "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"],
    ].map(([table, key]) => ({
      fn: `checkpointer_bridge_delete_${table}`,
      table: `${key!.split(", ").map((c) => `${c} ${c === "idx" ? "int" : "text"}`).join(", ")}`,
      trigger: "AFTER DELETE ON pg_temp.fake REFERENCING OLD TABLE AS gone FOR EACH STATEMENT",
      fire: [`INSERT INTO pg_temp.fake SELECT ${key} FROM ${SCHEMA}.${table}`, "DELETE FROM pg_temp.fake"],
    })),
    {
      fn: "checkpointer_forget_official",
      table: "thread_id text, checkpoint_ns text",
      trigger: "AFTER DELETE ON pg_temp.fake REFERENCING OLD TABLE AS gone FOR EACH STATEMENT",
      fire: ["INSERT INTO pg_temp.fake VALUES ('t-free', '')", "DELETE FROM pg_temp.fake"],
    },
  ];

  /** One attack in a session of its own (its temporary table goes with it); the first error, if any. */
  async function attack(a: (typeof attacks)[number]): Promise<{ code?: string; message: string } | undefined> {
    const u = new URL(db.url);
    u.username = READER;
    u.password = PASSWORD;
    const client = new pg.Client({ connectionString: u.toString() });
    client.on("error", () => undefined);
    await client.connect();
    try {
      for (const sql of [`CREATE TEMP TABLE fake (${a.table})`, `CREATE TRIGGER lure ${a.trigger} EXECUTE FUNCTION ${SCHEMA}.${a.fn}()`, ...a.fire]) {
        const e = await failure(client, sql);
        if (e) return e;
      }
      return undefined;
    } finally {
      await client.end();
    }
  }

  it("the role may only read (its own INSERT is refused), and a function its owner creates is granted to it by default privileges", async () => {
    const reader = poolAs(READER);
    expect(await failure(reader, `INSERT INTO ${SCHEMA}.checkpoint_heads (thread_id, checkpoint_ns, checkpoint_id) VALUES ('x', '', 'y')`)).toMatchObject({ code: "42501" });
    expect((await reader.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.checkpoints`)).rows[0].n).toBeGreaterThan(0);
    // The explicit grant is real: REVOKE ... FROM PUBLIC alone would leave it.
    await owner.query("CREATE SCHEMA scratch; CREATE FUNCTION scratch.probe() RETURNS int LANGUAGE sql AS 'SELECT 1'");
    expect((await db.pool.query("SELECT has_function_privilege($1, 'scratch.probe()', 'EXECUTE') AS ok", [READER])).rows[0].ok).toBe(true);
  });

  it("nobody but their owner may execute them: PUBLIC's grant and the default privileges' are revoked", async () => {
    const fns = await definers();
    expect(fns.map((f) => f.name)).toEqual([...attacks.map((a) => a.fn)].sort());
    expect(fns.filter((f) => f.others.length > 0)).toEqual([]);
  });

  it("so the role cannot attach one to a table of its own (42501), and nothing changes", async () => {
    const before = await state();
    for (const a of attacks) expect(await attack(a), a.fn).toMatchObject({ code: "42501", message: expect.stringMatching(/permission denied for function/) });
    expect(await state()).toEqual(before);
  });

  it("granted EXECUTE after all, each refuses to run but as the trigger made for it, and nothing changes", async () => {
    for (const a of attacks) await db.pool.query(`GRANT EXECUTE ON FUNCTION ${SCHEMA}.${a.fn}() TO ${READER}`);
    try {
      const before = await state();
      for (const a of attacks) {
        const e = await attack(a);
        expect(e, a.fn).toMatchObject({ code: "42501" });
        expect(e!.message, a.fn).toMatch(new RegExp(`^langgraph-checkpoint-pg: "?${SCHEMA}"?\\.${a.fn}\\(\\) runs only as the trigger langgraph_checkpoint_pg_\\w+ that this package created on`));
      }
      expect(await state()).toEqual(before);
    } finally {
      for (const a of attacks) await db.pool.query(`REVOKE EXECUTE ON FUNCTION ${SCHEMA}.${a.fn}() FROM ${READER}`);
    }
  });
});

describe("row 4: no element row, and no value for a continued thread, comes in through the official tables", () => {
  /** The element row our saver would store for `value` (its hash is predictable: no secret goes into it). */
  const elementOf = async (value: unknown) => (await encodeList(elementCodec(new MsgpackSerializer())!, [value], { table: "checkpoint_blobs", threadId: "t-plant", checkpointNs: "", channel: "items", version: "v" }, undefined, new Set()))!.rows[0]!;
  const plant = (thread: string, channel: string, version: string) =>
    failure(official, `INSERT INTO ${FROM}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES ($1, '', $2, $3, 'json', $4)`, [
      thread,
      channel,
      version,
      Buffer.from(JSON.stringify("planted")),
    ]);

  it("an element row planted on a thread this package continued is refused; a later list reads its own value", async () => {
    const before = await state();
    const planted = await plant("t-plant", "__elements__", (await elementOf("next")).hash);
    const after = await state();
    // The list this package stores next names that element: it must read back what was stored, not what was planted.
    await logGraph(ours()).invoke({ word: "next" }, cfg("t-plant"));
    expect((await logGraph(ours()).getState(cfg("t-plant"))).values.log).toEqual(["official", "ours", "next"]);
    expect(planted).toMatchObject({ code: "42939", message: expect.stringMatching(/channel "__elements__" is reserved .*Nothing was written/) });
    expect(after).toEqual(before);
  });

  it("likewise on a thread the official saver still holds, and a checkpoint naming the channel", async () => {
    const before = await state();
    expect(await plant("t-free", "__elements__", (await elementOf("next")).hash)).toMatchObject({ code: "42939" });
    const head = (await theirs(official).getTuple(cfg("t-free")))!;
    const checkpoint = { ...head.checkpoint, id: "1fffffff-0000-6000-8000-0000000000e1", channel_versions: { ...head.checkpoint.channel_versions, __elements__: 99 } };
    await expect(theirs(official).put(head.config, checkpoint, head.metadata!, {})).rejects.toMatchObject({ code: "42939" });
    expect(await state()).toEqual(before);
  });

  it("an official value for a thread this package continued is refused as its checkpoint is (LGB01), and is not copied", async () => {
    const before = await state();
    expect(await plant("t-moved", "log", "999")).toMatchObject({ code: "LGB01", message: expect.stringMatching(/thread "t-moved" \(namespace ""\) was continued by langgraph-checkpoint-pg/) });
    expect(await state()).toEqual(before);
    // On a thread it still holds, the official saver goes on as before.
    await logGraph(theirs(official)).invoke({ word: "again" }, cfg("t-free"));
    expect((await logGraph(ours()).getState(cfg("t-free"))).values.log).toEqual(["official", "again"]);
  });
});

describe("row 7: no client setting switches the bridge or the guards off", () => {
  // An official instance whose every session sets the switch the bridge once trusted.
  const stale = () => theirs(poolAs(APP, { options: "-c langgraph_checkpoint_pg.bridge=off" }));

  it("while bridging: a stale write on a continued thread is refused (LGB01); other writes and deletes are copied", async () => {
    const saver = stale();
    const before = await state();
    await expect(logGraph(saver).invoke({ word: "stale" }, cfg("t-stale"))).rejects.toMatchObject({ code: "LGB01" });
    expect(await state()).toEqual(before);
    await logGraph(saver).invoke({ word: "copied" }, cfg("t-copied"));
    expect((await logGraph(ours(app)).getState(cfg("t-copied"))).values).toEqual((await logGraph(saver).getState(cfg("t-copied"))).values);
    await saver.deleteThread("t-deleted");
    expect(await ours(app).getTuple(cfg("t-deleted"))).toBeUndefined();
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.checkpoint_blobs WHERE thread_id = 't-deleted'`)).rows[0].n).toBe(0);
  });

  it("after finishing (as the adopting role): every official write is refused (LGB02); a thread deleted here still leaves the official tables", async () => {
    await finishAdoption({ pool: owner, schema: SCHEMA });
    const saver = stale();
    const before = await state();
    await expect(logGraph(saver).invoke({ word: "late" }, cfg("t-after"))).rejects.toMatchObject({ code: "LGB02" });
    await expect(saver.deleteThread("t-after")).rejects.toMatchObject({ code: "LGB02" });
    expect(await failure(app, `UPDATE ${FROM}.checkpoints SET metadata = '{}' WHERE thread_id = 't-after'`)).toMatchObject({ code: "LGB02" });
    expect(await state()).toEqual(before);

    await ours(app).deleteThread("t-forget");
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${FROM}.checkpoints WHERE thread_id = 't-forget'`)).rows[0].n).toBe(0);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${FROM}.checkpoint_writes WHERE thread_id = 't-forget'`)).rows[0].n).toBe(0);
    // Deleting what is gone here already loses nothing: let through.
    await saver.deleteThread("t-forget");
    // The guard's function is nobody else's either.
    expect((await definers()).filter((f) => f.others.length > 0)).toEqual([]);
  });

  it("rolling back (as the adopting role) writes into the official tables with no switch, and the official saver reads on", async () => {
    await rollbackAdoption({ pool: owner, schema: SCHEMA });
    expect((await logGraph(theirs(app)).getState(cfg("t-plant"))).values.log).toEqual(["official", "ours", "next"]);
    await logGraph(theirs(app)).invoke({ word: "back" }, cfg("t-stale"));
    expect((await logGraph(theirs(app)).getState(cfg("t-stale"))).values.log).toEqual(["official", "ours", "back"]);
    expect((await definers()).filter((f) => f.others.length > 0)).toEqual([]);
  });
});
