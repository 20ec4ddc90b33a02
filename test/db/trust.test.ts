/**
 * Issue #15, row 1: nothing another role owns or can create runs with the
 * rights of the role that migrates or uses the saver. Real roles, real
 * shadow functions: each shadow bumps a sequence (which no rollback undoes)
 * and raises, so a test sees any that ran, even inside a failed statement.
 */
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  exportThread,
  history,
  importThread,
  listThreads,
  migrate,
  migrationStatus,
  PostgresSaver,
  prune,
  show,
  threadIds,
  UnsafeSchemaError,
} from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { ROOT } from "../helpers/cli.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("trust");
const suffix = randomBytes(4).toString("hex");
const ATTACKER = `lgcp_attacker_${suffix}`;
const PASSWORD = `pw-${randomBytes(8).toString("hex")}`;
let attacker: pg.Pool;

beforeAll(async () => {
  await db.pool.query(`CREATE ROLE ${ATTACKER} LOGIN PASSWORD '${PASSWORD}'`);
  const u = new URL(db.url);
  u.username = ATTACKER;
  u.password = PASSWORD;
  // Its connections are still closing when the database is dropped WITH (FORCE) after the file.
  attacker = testPool({ connectionString: u.toString(), max: 1 });
});

afterAll(async () => {
  await attacker?.end();
  await db.pool.query(`DROP OWNED BY ${ATTACKER} CASCADE`);
  await db.pool.query(`DROP ROLE IF EXISTS ${ATTACKER}`);
});

// ---------------------------------------------------------------------------
// Which built-ins the SQL calls: read from the source, so new SQL is covered.
// ---------------------------------------------------------------------------

/** The text of every string and template literal in a source file. */
function literals(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
      out.push((node as ts.LiteralLikeNode).text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The .ts files of a folder whose names match (a module split in parts: every part). */
function sourcesOf(dir: string, name: RegExp): string[] {
  const files = readdirSync(join(ROOT, dir)).filter((f) => f.endsWith(".ts") && name.test(f));
  if (files.length === 0) throw new Error(`no ${name} in ${dir}`);
  return files.map((f) => `${dir}/${f}`);
}

/** Files whose SQL runs at run time, through the caller's search_path. */
const RUNTIME_SQL = [
  ...sourcesOf("src/saver", /\.ts$/),
  ...sourcesOf("src/saver/sql", /\.ts$/),
  ...sourcesOf("src/ops", /^(prune|inspect|status|show|transfer|grants|adopt-steps|copy|retention)[.-]/),
  ...sourcesOf("src/db", /^(migrate|migrations|trust)\./),
];
/** SQL that runs only inside `migrate`, with pg_catalog searched first and after the ownership checks. */
const MIGRATION_SQL = [
  ...sourcesOf("src/ops", /^adopt[.-]/),
  ...sourcesOf("src/db", /^(official|adopt-decision)\./),
  ...readdirSync(join(ROOT, "migrations")).filter((f) => f.endsWith(".sql")).map((f) => `migrations/${f}`),
];

const CALL = /(?<![\w$"])((?:pg_catalog\.)?)([a-z_][a-z0-9_]*)\(/g;

async function catalogFunctions(): Promise<Set<string>> {
  const { rows } = await db.pool.query("SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace");
  return new Set(rows.map((r) => r.proname as string));
}

/** Built-in function calls in `files`: name, and whether it was qualified. */
function calls(files: string[], builtins: Set<string>): { file: string; name: string; qualified: boolean }[] {
  const found: { file: string; name: string; qualified: boolean }[] = [];
  for (const file of files) {
    const texts = file.endsWith(".sql") ? [readFileSync(join(ROOT, file), "utf8")] : literals(join(ROOT, file));
    for (const text of texts) {
      for (const m of text.matchAll(CALL)) if (builtins.has(m[2]!)) found.push({ file, name: m[2]!, qualified: m[1] !== "" });
    }
  }
  return found;
}

// ---------------------------------------------------------------------------
// Shadow functions
// ---------------------------------------------------------------------------

const POLYMORPHIC: [RegExp, (family: string) => string][] = [
  [/VARIADIC "any"/g, () => "VARIADIC text[]"],
  [/"any"/g, () => "text"],
  [/\b(anycompatiblearray|anyarray)\b/g, (f) => `${f}[]`],
  [/\b(anycompatiblenonarray|anycompatible|anynonarray|anyelement)\b/g, (f) => f],
];

/**
 * In `schema`, as `as`, a function for every pg_catalog overload of `names`,
 * with the same signature (`exact`), or with polymorphic types made concrete,
 * which makes it a closer match than the built-in for those types. Each one
 * bumps `<schema>.hits` and raises. Returns how many were created.
 */
async function plantShadows(as: pg.Pool, schema: string, names: string[], mode: "exact" | "closer"): Promise<number> {
  const s = pg.escapeIdentifier(schema);
  const { rows } = await db.pool.query<{ name: string; args: string; result: string }>(
    `SELECT p.proname AS name, pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result
       FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY ($1) AND p.prokind = 'f'`,
    [names],
  );
  const client = await as.connect();
  let created = 0;
  try {
    await client.query(`CREATE SEQUENCE IF NOT EXISTS ${s}.hits`);
    await client.query(`GRANT USAGE ON SCHEMA ${s} TO PUBLIC; GRANT USAGE, UPDATE ON SEQUENCE ${s}.hits TO PUBLIC`);
    for (const row of rows) {
      const variants = mode === "exact" ? [[row.args, row.result]] : ["text", "integer", "jsonb", "bytea"].map((f) => POLYMORPHIC.reduce((acc, [re, to]) => acc.map((x) => x.replace(re, to(f))), [row.args, row.result]));
      for (const [args, result] of variants) {
        if (mode === "closer" && args === row.args) continue; // no polymorphic argument: it would only tie with the built-in
        try {
          await client.query(
            `CREATE FUNCTION ${s}.${pg.escapeIdentifier(row.name)}(${args}) RETURNS ${result} LANGUAGE plpgsql AS $shadow$
             BEGIN PERFORM pg_catalog.nextval('${s}.hits'); RAISE EXCEPTION 'shadow % ran', ${pg.escapeLiteral(row.name)}; END $shadow$`,
          );
          created++;
        } catch {
          // A signature plpgsql cannot take (internal, cstring, "any"...), or one already planted.
        }
      }
    }
  } finally {
    client.release();
  }
  return created;
}

async function hits(schema: string): Promise<number> {
  const { rows } = await db.pool.query(`SELECT last_value::int AS n, is_called FROM ${pg.escapeIdentifier(schema)}.hits`);
  return rows[0].is_called ? rows[0].n : 0;
}

const isSuperuser = async (role: string) => (await db.pool.query("SELECT rolsuper FROM pg_roles WHERE rolname = $1", [role])).rows[0].rolsuper as boolean;

// ---------------------------------------------------------------------------

describe("built-ins in run-time SQL are schema-qualified", () => {
  it("every function call in the run-time SQL is pg_catalog.<name>", async () => {
    const found = calls(RUNTIME_SQL, await catalogFunctions());
    expect(found.length).toBeGreaterThan(50);
    expect(found.filter((c) => !c.qualified).map((c) => `${c.file}: ${c.name}(`)).toEqual([]);
  });

  it("shadows of every one of them, closer overloads in a schema on the caller's search_path, never run", async () => {
    const builtins = await catalogFunctions();
    const names = [...new Set(calls(RUNTIME_SQL, builtins).map((c) => c.name))];
    await db.pool.query(`CREATE SCHEMA trap AUTHORIZATION ${ATTACKER}`);
    const planted = await plantShadows(attacker, "trap", names, "closer");
    expect(planted).toBeGreaterThan(10);
    // The application's connections search the attacker's schema (pg_catalog still comes first, implicitly).
    const u = new URL(db.url);
    const app = testPool({ connectionString: u.toString(), options: "-c search_path=trap", max: 2 });
    try {
      const saver = new PostgresSaver(app, { schema: "rt", lineage: "linear" });
      await saver.setup();
      const thread = `rt-${uuid6(-3)}`;
      let config: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: "" } };
      for (let step = -1; step < 3; step++) {
        const cp = makeCheckpoint({ log: [`s${step}`], x: step }, { log: `${String(step + 2).padStart(32, "0")}.5`, x: `${String(step + 2).padStart(32, "0")}.5` });
        config = await saver.put(config, cp, meta(step, { tag: "a\u0000b" }), cp.channel_versions);
        await saver.putWrites(config, [["log", `w${step}`]], `task-${step}`, "");
      }
      expect((await saver.getTuple({ configurable: { thread_id: thread } }))?.pendingWrites).toHaveLength(1);
      const listed = [];
      for await (const t of saver.list({ configurable: { thread_id: thread } }, { filter: { tag: "a\u0000b" } })) listed.push(t);
      expect(listed).toHaveLength(4);
      await saver.getDeltaChannelHistory({ config, channels: ["log"] });
      expect((await migrationStatus({ pool: app, schema: "rt" })).state).toBe("up-to-date");
      expect(await listThreads({ pool: app, schema: "rt" })).toHaveLength(1);
      expect(await threadIds({ pool: app, schema: "rt" })).toEqual([thread]);
      expect(await history({ pool: app, schema: "rt", threadId: thread })).toHaveLength(1);
      expect((await show({ pool: app, schema: "rt", threadId: thread }))?.channels).toHaveLength(2);
      const records = await exportThread({ pool: app, schema: "rt", threadId: thread });
      await saver.deleteThread(thread);
      await importThread({ pool: app, schema: "rt", records });
      await prune({ pool: app, schema: "rt", keepLast: 1, grace: 0, dryRun: true });
      const pruned = await prune({ pool: app, schema: "rt", keepLast: 1, grace: 0 });
      expect(pruned.checkpoints).toBe(3);
    } finally {
      await app.end();
    }
    expect(await hits("trap")).toBe(0);
  });
});

describe("migrate refuses what another role owns or may create in the schema", () => {
  const migrationNames = async () => {
    const builtins = await catalogFunctions();
    return [...new Set(calls([...MIGRATION_SQL, "src/db/migrate.ts", "src/db/trust.ts"], builtins).map((c) => c.name))];
  };

  it("a role that may CREATE in the schema planted shadows of every built-in and a pre-created migrations table with a trigger: none runs, the error is typed", async () => {
    await db.pool.query(`CREATE SCHEMA shared; GRANT USAGE, CREATE ON SCHEMA shared TO ${ATTACKER}`);
    const names = await migrationNames();
    expect(names).toEqual(expect.arrayContaining(["format", "aclexplode", "now", "hashtext", "pg_advisory_xact_lock", "to_regclass"]));
    expect(await plantShadows(attacker, "shared", names, "exact")).toBeGreaterThan(10);
    expect(await plantShadows(attacker, "shared", names, "closer")).toBeGreaterThan(5);
    // A migrations table in the shape migrate expects, whose trigger would make the attacker a superuser.
    await attacker.query(`
      CREATE TABLE shared.checkpointer_migrations (version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT pg_catalog.now());
      CREATE FUNCTION shared.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_catalog.nextval('shared.hits'); EXECUTE 'ALTER ROLE ${ATTACKER} SUPERUSER'; RETURN NEW; END $$;
      CREATE TRIGGER escalate BEFORE INSERT ON shared.checkpointer_migrations FOR EACH ROW EXECUTE FUNCTION shared.escalate()`);

    for (const run of [() => migrate({ pool: db.pool, schema: "shared" }), () => new PostgresSaver(db.pool, { schema: "shared" }).setup(), () => migrate({ pool: db.pool, schema: "shared", dryRun: true })]) {
      const error = await run().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnsafeSchemaError);
      const unsafe = error as UnsafeSchemaError;
      expect(unsafe).toMatchObject({ code: "UNSAFE_SCHEMA", schema: "shared", roles: [ATTACKER], retryable: false });
      expect(unsafe.findings).toContain(`role "${ATTACKER}" may CREATE in it`);
      expect(unsafe.message).toContain('"shared"');
      expect(unsafe.message).toContain(ATTACKER);
    }

    // Without CREATE, what it already owns is still refused (the schema needs migrations).
    await db.pool.query(`REVOKE CREATE ON SCHEMA shared FROM ${ATTACKER}`);
    const owned = (await migrate({ pool: db.pool, schema: "shared" }).catch((e: unknown) => e)) as UnsafeSchemaError;
    expect(owned).toBeInstanceOf(UnsafeSchemaError);
    expect(owned.findings).toEqual(
      expect.arrayContaining([
        `role "${ATTACKER}" owns table checkpointer_migrations`,
        `role "${ATTACKER}" owns shared.escalate(), the function of trigger escalate on checkpointer_migrations`,
        expect.stringMatching(new RegExp(`^role "${ATTACKER}" owns function shared\\.format\\(`)),
      ]),
    );
    expect(await hits("shared")).toBe(0);
    expect(await isSuperuser(ATTACKER)).toBe(false);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM shared.checkpointer_migrations")).rows[0].n).toBe(0);
  });

  it("a trigger added through a TRIGGER grant on a table the migrating role owns", async () => {
    await db.pool.query(`CREATE SCHEMA granted; GRANT USAGE ON SCHEMA granted TO ${ATTACKER};
      CREATE TABLE granted.checkpointer_migrations (version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT pg_catalog.now());
      GRANT TRIGGER ON granted.checkpointer_migrations TO ${ATTACKER};
      CREATE SCHEMA lair AUTHORIZATION ${ATTACKER}`);
    await attacker.query(`
      CREATE SEQUENCE lair.hits; GRANT USAGE ON SCHEMA lair TO PUBLIC; GRANT USAGE, UPDATE ON SEQUENCE lair.hits TO PUBLIC;
      CREATE FUNCTION lair.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_catalog.nextval('lair.hits'); EXECUTE 'ALTER ROLE ${ATTACKER} SUPERUSER'; RETURN NEW; END $$;
      CREATE TRIGGER escalate BEFORE INSERT ON granted.checkpointer_migrations FOR EACH ROW EXECUTE FUNCTION lair.escalate()`);
    const error = (await migrate({ pool: db.pool, schema: "granted" }).catch((e: unknown) => e)) as UnsafeSchemaError;
    expect(error).toBeInstanceOf(UnsafeSchemaError);
    expect(error.findings).toEqual([`role "${ATTACKER}" owns lair.escalate(), the function of trigger escalate on checkpointer_migrations`]);
    expect(await hits("lair")).toBe(0);
    expect(await isSuperuser(ATTACKER)).toBe(false);
  });

  it("a migrations table that is a view, even with nothing left to apply", async () => {
    await migrate({ pool: db.pool, schema: "viewed" });
    await db.pool.query(`ALTER TABLE viewed.checkpointer_migrations RENAME TO real_migrations; GRANT USAGE, CREATE ON SCHEMA viewed TO ${ATTACKER};
      GRANT SELECT ON viewed.real_migrations TO ${ATTACKER}`);
    await attacker.query(`
      CREATE SEQUENCE viewed.hits; GRANT USAGE, UPDATE ON SEQUENCE viewed.hits TO PUBLIC;
      CREATE FUNCTION viewed.spy(v integer) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_catalog.nextval('viewed.hits'); RETURN v; END $$;
      CREATE VIEW viewed.checkpointer_migrations AS SELECT viewed.spy(version) AS version, name, sha256, applied_at FROM viewed.real_migrations`);
    await db.pool.query(`REVOKE CREATE ON SCHEMA viewed FROM ${ATTACKER}`);
    const error = (await migrate({ pool: db.pool, schema: "viewed" }).catch((e: unknown) => e)) as UnsafeSchemaError;
    expect(error).toBeInstanceOf(UnsafeSchemaError);
    expect(error.findings).toEqual([`role "${ATTACKER}" owns checkpointer_migrations, which is not a plain table (relkind v)`]);
    expect(await hits("viewed")).toBe(0);
  });

  it("PUBLIC may CREATE (the public schema before Postgres 15): refused even when up to date, naming PUBLIC", async () => {
    await migrate({ pool: db.pool, schema: "open" });
    await db.pool.query("GRANT CREATE ON SCHEMA open TO PUBLIC");
    const error = (await migrate({ pool: db.pool, schema: "open" }).catch((e: unknown) => e)) as UnsafeSchemaError;
    expect(error).toBeInstanceOf(UnsafeSchemaError);
    expect(error).toMatchObject({ roles: ["PUBLIC"], findings: ['role "PUBLIC" may CREATE in it'] });
    expect(error.message).toContain('REVOKE CREATE ON SCHEMA "open" FROM PUBLIC');
    await db.pool.query("REVOKE CREATE ON SCHEMA open FROM PUBLIC");
    expect((await migrate({ pool: db.pool, schema: "open" })).applied).toEqual([]);
  });

  it("same-named functions of the migrating role itself never shadow a built-in; column defaults bind to pg_catalog.now()", async () => {
    await db.pool.query("CREATE SCHEMA selfowned");
    const planted = await plantShadows(db.pool, "selfowned", await migrationNames(), "exact");
    expect(planted).toBeGreaterThan(10);
    const result = await migrate({ pool: db.pool, schema: "selfowned" });
    expect(result.toVersion).toBeGreaterThan(0);
    expect(await hits("selfowned")).toBe(0);
    const { rows } = await db.pool.query(
      `SELECT DISTINCT p.oid::regprocedure::text AS fn, n.nspname AS schema
         FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
         JOIN pg_depend dep ON dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid AND dep.refclassid = 'pg_proc'::regclass
         JOIN pg_proc p ON p.oid = dep.refobjid JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE c.relnamespace = 'selfowned'::regnamespace AND n.nspname <> 'pg_catalog'`,
    );
    // (Postgres records no dependency on built-ins: a default bound to selfowned.now() would show here.)
    expect(rows).toEqual([]);
    // And the saver works there: its first put inserts rows whose created_at and moved_at are defaults.
    const saver = new PostgresSaver(db.pool, { schema: "selfowned" });
    const cp = makeCheckpoint({ x: 1 }, { x: "1.5" });
    await saver.put({ configurable: { thread_id: "t", checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
    expect((await saver.getTuple({ configurable: { thread_id: "t" } }))?.checkpoint.channel_values).toEqual({ x: 1 });
    expect(await hits("selfowned")).toBe(0);
  });
});
