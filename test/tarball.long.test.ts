/**
 * Part of `npm run test:long` (README "Tests"): packing, an offline install and a type check take
 * minutes, and test the package, not the code `npm test` tests.
 *
 * The package as users get it. `npm pack` (from a copy of the sources, so the
 * working tree's dist/ is never touched), installed into an empty project
 * offline: from the npm cache that `npm ci` filled, at the versions of
 * package-lock.json. Then, against Postgres: `import` and `require`, a strict
 * TypeScript file (skipLibCheck false, ESM and CommonJS), the README's quick
 * start as written (and the drizzle and store examples of docs/), the CLI
 * through `npx --no-install`, and every command block of README.md and
 * docs/*.md (test/helpers/readme.ts: which blocks are commands, and which are
 * not run, and why).
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, collect, type Run } from "./helpers/cli.js";
import { withTestDatabase } from "./helpers/db.js";
import { addressGraph } from "./helpers/graphs.js";
import { commandsOf, docBlocks, docText, kindOf, quickStart, readmeBlocks, type DocBlock } from "./helpers/readme.js";
import { bareImports, isDeclared, pkg, psqlDirs, writeProject, type LockEntry } from "./helpers/package.js";

const exec = promisify(execFile);
/** Installed next to the package: what the README's Install section names, the peers they bring, and pg, which the pages' programs import. */
const PEERS = ["pg", "@langchain/langgraph-checkpoint", "@langchain/core", "@langchain/langgraph"];
/** Installed too: to run the pages' TypeScript and to load a .ts upcasters module; drizzle for the Data model's example, @opentelemetry/api for the otel entry (optional peers). */
const TOOLS = ["tsx", "drizzle-orm", "@opentelemetry/api"];

const db = withTestDatabase("tarball"); // DATABASE_URL of the README's commands
const other = withTestDatabase("tarball_other"); // postgres://other/db
const official = withTestDatabase("tarball_official"); // docs/adoption.md: the official saver's tables in public

const work = mkdtempSync(join(tmpdir(), "lgpg-tarball-"));
const app = join(work, "app");
let tarball: string;
let packed: string[];
const role = `agents_app_${randomBytes(4).toString("hex")}`;

beforeAll(async () => {
  // npm pack in a copy: its prepack builds dist/ there.
  const stage = join(work, "stage");
  mkdirSync(join(stage, "scripts"), { recursive: true });
  for (const f of ["package.json", "README.md", "LICENSE", "tsconfig.json", "bin", "src", "migrations", "embedded", "scripts/build.mjs"]) cpSync(join(ROOT, f), join(stage, f), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(stage, "node_modules"), "dir");
  const { stdout } = await exec("npm", ["pack", "--json", "--pack-destination", work], { cwd: stage, maxBuffer: 16 << 20 });
  const info = (JSON.parse(stdout) as { filename: string; files: { path: string }[] }[])[0]!;
  tarball = join(work, info.filename);
  packed = info.files.map((f) => f.path);

  mkdirSync(app);
  writeProject(app, tarball, [...PEERS, ...TOOLS]);
  await exec("npm", ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: app, maxBuffer: 16 << 20 });
}, 600_000);

afterAll(async () => {
  // Before the databases go: the role holds privileges in one of them.
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  try {
    if ((await admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [role])).rowCount) {
      await admin.query(`DROP OWNED BY ${pg.escapeIdentifier(role)}`);
      await admin.query(`DROP ROLE ${pg.escapeIdentifier(role)}`);
    }
  } finally {
    await admin.end();
  }
  rmSync(work, { recursive: true, force: true });
});

/** A shell command in the test project; never fetches from the npm registry. */
function sh(command: string, env: Record<string, string> = {}, cwd = app): Promise<Run> {
  const child = spawn("bash", ["-eo", "pipefail", "-c", command], {
    cwd,
    env: { ...process.env, DATABASE_URL: db.url, npm_config_offline: "true", npm_config_update_notifier: "false", ...env },
    stdio: "pipe",
  });
  child.stdin.end();
  return collect(child);
}

const ok = (r: Run) => {
  if (r.code !== 0) throw new Error(`exit ${r.code}\n${r.stderr}\n${r.stdout}`);
  return r.stdout;
};

describe("the packed package, installed in an empty project", () => {
  it("ships the builds, their types and the migrations, and nothing else", async () => {
    for (const f of [
      "package.json",
      "README.md",
      "LICENSE",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/cjs/index.js",
      "dist/cjs/index.d.ts",
      "dist/cjs/package.json",
      "dist/cjs/schema.js",
      "dist/cjs/otel.js",
      "dist/otel/index.js",
      "dist/otel/index.d.ts",
      "dist/cjs/otel/index.d.ts",
      "dist/db/schema.js",
      "dist/db/schema.d.ts",
      "dist/cjs/db/schema.d.ts",
      "dist/cli/main.js",
      "bin/langgraph-checkpoint-pg.js",
      "migrations/0000_init.sql",
      "migrations/meta/_journal.json",
      "embedded/initdb.tar.br",
      "embedded/initdb.json",
    ]) {
      expect(packed).toContain(f);
    }
    // The bin is in the repository itself: npm checks it before prepack builds dist/, and warns
    // ("No bin file found") on a fresh clone's `npm pack` or `npm publish` when it is missing.
    for (const bin of Object.values(pkg.bin)) {
      expect(execFileSync("git", ["ls-files", "--error-unmatch", bin], { cwd: ROOT, encoding: "utf8" }).trim()).toBe(bin);
    }
    const unwanted = packed.filter((f) => /^(src|test|bench|scripts)\//.test(f) || /\.map$/.test(f) || /^dist\/(cjs\/)?demo\./.test(f) || /_snapshot\.json$/.test(f));
    expect(unwanted).toEqual([]);
    // Every migration the journals name (the checkpointer's, the store's), and no other SQL.
    const tags = (dir: string) => (JSON.parse(readFileSync(join(ROOT, dir, "meta/_journal.json"), "utf8")) as { entries: { tag: string }[] }).entries.map((e) => `${dir}/${e.tag}.sql`);
    expect(packed.filter((f) => f.endsWith(".sql")).sort()).toEqual([...tags("migrations"), ...tags("migrations/store")].sort());
    expect(packed).toContain("migrations/store/meta/_journal.json");
    // Shipped declarations name only what a dependency or a peer brings.
    const installed = join(app, "node_modules", pkg.name);
    for (const file of packed.filter((f) => f.endsWith(".d.ts"))) {
      for (const spec of bareImports(readFileSync(join(installed, file), "utf8"))) {
        expect(isDeclared(spec) || isDeclared(`@types/${spec}`), `${file} imports ${spec}`).toBe(true);
      }
    }
  });

  it("every package the built code imports (ESM and the CommonJS bundle, static or dynamic) is declared: strict installers (pnpm) refuse the rest", () => {
    const installed = join(app, "node_modules", pkg.name);
    const undeclared = packed
      .filter((f) => /^dist\/.*\.js$/.test(f))
      .flatMap((file) => bareImports(readFileSync(join(installed, file), "utf8")).map((spec) => ({ file, spec })))
      .filter(({ spec }) => !isDeclared(spec));
    expect(undeclared).toEqual([]);
    // The check sees the optional imports too (a regex that missed dynamic ones would pass on anything).
    const cjs = bareImports(readFileSync(join(installed, "dist/cjs/index.js"), "utf8"));
    expect(cjs).toEqual(expect.arrayContaining(["pg", "@electric-sql/pglite", "@electric-sql/pglite-pgvector"]));
  });

  it("finds its migrations above its own file, never a host application's drizzle migrations", async () => {
    // The CommonJS bundle copied into an application that has drizzle migrations of its own.
    const host = join(work, "host");
    mkdirSync(join(host, "dist"), { recursive: true });
    mkdirSync(join(host, "migrations", "meta"), { recursive: true });
    writeFileSync(join(host, "package.json"), JSON.stringify({ name: "host-app" }));
    writeFileSync(join(host, "migrations", "meta", "_journal.json"), JSON.stringify({ entries: [{ idx: 0, tag: "0000_host" }] }));
    writeFileSync(join(host, "migrations", "0000_host.sql"), "DROP TABLE everything;");
    cpSync(join(app, "node_modules", pkg.name, "dist", "cjs", "index.js"), join(host, "dist", "index.js"));
    const r = await sh(`node -e 'require("./dist/index.js").loadMigrations()'`, { NODE_PATH: join(app, "node_modules") }, host);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/MigrationError: the migrations of langgraph-checkpoint-pg were not found in any folder above \S+\/host\/dist/);
  });

  it("npm publish --dry-run has no warning (but the one for not being logged in)", async () => {
    const stage = join(work, "stage");
    const { stderr } = await exec("npm", ["publish", "--dry-run", "--ignore-scripts"], { cwd: stage, env: { ...process.env, npm_config_offline: "true" } });
    const warnings = stderr.split("\n").filter((l) => /npm warn/i.test(l) && !/requires you to be logged in/.test(l));
    expect(warnings).toEqual([]);
  });

  it("import (ESM) and require (CommonJS) give the same API, which migrates, writes and reads against Postgres", async () => {
    const program = (load: string) => `${load}
      const pg = require("pg");
      const { emptyCheckpoint } = require("@langchain/langgraph-checkpoint");
      (async () => {
        const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
        const schema = process.argv[2];
        await m.migrate({ pool, schema });
        const saver = new m.PostgresSaver(pool, { schema });
        const checkpoint = { ...emptyCheckpoint(), id: "1ef00000-0000-6000-8000-000000000001" };
        await saver.put({ configurable: { thread_id: "t", checkpoint_ns: "" } }, checkpoint, { source: "input", step: -1, parents: {} }, {});
        const tuple = await saver.getTuple({ configurable: { thread_id: "t" } });
        console.log(JSON.stringify({ exports: Object.keys(m).sort(), migrations: m.loadMigrations().length, id: tuple.checkpoint.id, errors: new m.InvalidInputError("x", "y") instanceof m.CheckpointerError }));
        await pool.end();
      })().catch((e) => { console.error(e); process.exit(1); });`;
    writeFileSync(join(app, "esm.mjs"), program('import { createRequire } from "node:module"; const require = createRequire(import.meta.url); const m = await import("langgraph-checkpoint-pg");'));
    writeFileSync(join(app, "cjs.cjs"), program('const m = require("langgraph-checkpoint-pg");'));
    const [esm, cjs] = await Promise.all([sh("node esm.mjs esm_app"), sh("node cjs.cjs cjs_app")]);
    const [a, b] = [JSON.parse(ok(esm)), JSON.parse(ok(cjs))];
    expect(a).toEqual(b);
    expect(a).toMatchObject({ migrations: JSON.parse(readFileSync(join(ROOT, "migrations/meta/_journal.json"), "utf8")).entries.length, id: "1ef00000-0000-6000-8000-000000000001", errors: true });
    expect(a.exports).toEqual(expect.arrayContaining(["PostgresSaver", "migrate", "prune", "MsgpackSerializer", "withConflictRetry", "CheckpointConflictError", "SchemaNotMigratedError", "CheckpointParentMissingError", "reencrypt", "UnsafeSchemaError", "HistoryCorruptError", "PayloadTooLargeError", "withRetry", "isRetryable", "rollbackAdoption", "finishAdoption", "compact"]));
    const { rows } = await db.pool.query("SELECT (SELECT count(*) FROM esm_app.checkpoints)::int AS esm, (SELECT count(*) FROM cjs_app.checkpoints)::int AS cjs");
    expect(rows[0]).toEqual({ esm: 1, cjs: 1 });
  });

  it("langgraph-checkpoint-pg/schema: import and require give the same drizzle tables, the migrated database's, in any schema", async () => {
    const program = (load: string) => `${load}
      const { getTableConfig } = require("drizzle-orm/pg-core");
      const shape = (t) => { const c = getTableConfig(t); return { schema: c.schema ?? null, name: c.name, columns: c.columns.map((col) => col.name), keys: c.primaryKeys.map((k) => k.getName()) }; };
      const tables = [s.checkpoints, s.checkpointWrites, s.checkpointBlobs, s.checkpointHeads, s.checkpointTombstones, s.checkpointerRetention];
      const agents = s.checkpointTables("cjs_app");
      const named = [agents.checkpoints, agents.checkpointWrites, agents.checkpointBlobs, agents.checkpointHeads, agents.checkpointTombstones, agents.checkpointerRetention];
      console.log(JSON.stringify({ exports: Object.keys(s).sort(), tables: tables.map(shape), agents: named.map(shape) }));`;
    writeFileSync(join(app, "schema-esm.mjs"), program('import { createRequire } from "node:module"; const require = createRequire(import.meta.url); const s = await import("langgraph-checkpoint-pg/schema");'));
    writeFileSync(join(app, "schema-cjs.cjs"), program('const s = require("langgraph-checkpoint-pg/schema");'));
    const [esm, cjs] = await Promise.all([sh("node schema-esm.mjs"), sh("node schema-cjs.cjs")]);
    const [a, b] = [JSON.parse(ok(esm)), JSON.parse(ok(cjs))];
    expect(a).toEqual(b);
    expect(a.exports).toEqual(["checkpointBlobs", "checkpointHeads", "checkpointTables", "checkpointTombstones", "checkpointWrites", "checkpointerRetention", "checkpoints"]);
    // Every table the migrations made, column for column (cjs_app was migrated by the test above).
    const { rows } = await db.pool.query(
      `SELECT c.relname AS name, array_agg(a.attname::text ORDER BY a.attnum) AS columns
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = 'cjs_app' AND c.relkind = 'r' AND c.relname <> 'checkpointer_migrations'
        GROUP BY c.relname`,
    );
    const migrated = Object.fromEntries(rows.map((r) => [r.name, [...r.columns].sort()]));
    for (const [i, t] of a.tables.entries()) {
      expect(t.schema).toBeNull();
      expect([...t.columns].sort()).toEqual(migrated[t.name]);
      expect(a.agents[i]).toEqual({ ...t, schema: "cjs_app" });
    }
    expect(a.tables.map((t: { name: string }) => t.name).sort()).toEqual(Object.keys(migrated).sort());
  });

  it("langgraph-checkpoint-pg/store: import and require give the root's PostgresStore; the store example (docs/store.md) runs as written, twice", async () => {
    const program = (load: string) => `${load}
      console.log(JSON.stringify({ same: store.PostgresStore === root.PostgresStore, errors: new store.StoreIndexMismatchError("s", { dims: 1, distanceMetric: "l2", indexType: "hnsw" }, { dims: 2, distanceMetric: "l2", indexType: "hnsw" }) instanceof root.CheckpointerError, exports: Object.keys(store).filter((k) => /Store|migrateStore/.test(k)).sort() }));`;
    writeFileSync(join(app, "store-esm.mjs"), program('const store = await import("langgraph-checkpoint-pg/store"); const root = await import("langgraph-checkpoint-pg");'));
    writeFileSync(join(app, "store-cjs.cjs"), program('const store = require("langgraph-checkpoint-pg/store"); const root = require("langgraph-checkpoint-pg");'));
    const [esm, cjs] = await Promise.all([sh("node store-esm.mjs"), sh("node store-cjs.cjs")]);
    const [a, b] = [JSON.parse(ok(esm)), JSON.parse(ok(cjs))];
    expect(a).toEqual(b);
    expect(a).toMatchObject({ same: true, errors: true });
    expect(a.exports).toEqual(expect.arrayContaining(["PostgresStore", "migrateStore", "StoreAdoptionRequiredError", "StoreIndexMismatchError"]));
    const block = docBlocks("docs/store.md").find((b) => b.lang === "ts" && b.code.includes("langgraph-checkpoint-pg/store"));
    expect(block, "a ts block importing langgraph-checkpoint-pg/store in docs/store.md").toBeDefined();
    writeFileSync(join(app, "store-example.mts"), block!.code);
    for (let i = 0; i < 2; i++) {
      const out = ok(await sh("node --import tsx store-example.mts")).trim().split("\n");
      expect(out).toEqual(["{ kind: 'travel', text: 'prefers window seats' }", "[ 'food' ]", "[ 'food' ]", "[ [ 'users', 'u1' ] ]"]);
    }
  });

  it("langgraph-checkpoint-pg/otel: import and require give instrument, refusing bad options with the root's error; the root alone loads no @opentelemetry/api", async () => {
    const program = (load: string) => `${load}
      let refused = false;
      try { otel.instrument({}, { ids: "x" }); } catch (err) { refused = err instanceof root.InvalidOptionsError; }
      console.log(JSON.stringify({ exports: Object.keys(otel).sort(), refused }));`;
    writeFileSync(join(app, "otel-esm.mjs"), program('const otel = await import("langgraph-checkpoint-pg/otel"); const root = await import("langgraph-checkpoint-pg");'));
    writeFileSync(join(app, "otel-cjs.cjs"), program('const otel = require("langgraph-checkpoint-pg/otel"); const root = require("langgraph-checkpoint-pg");'));
    writeFileSync(join(app, "root-cjs.cjs"), 'require("langgraph-checkpoint-pg"); console.log(Object.keys(require.cache).filter((m) => m.includes("@opentelemetry")).length);');
    const [esm, cjs, rootAlone] = await Promise.all([sh("node otel-esm.mjs"), sh("node otel-cjs.cjs"), sh("node root-cjs.cjs")]);
    expect(JSON.parse(ok(esm))).toEqual({ exports: ["instrument"], refused: true });
    expect(JSON.parse(ok(cjs))).toEqual({ exports: ["instrument"], refused: true });
    expect(ok(rootAlone).trim()).toBe("0");
  });

  it("a strict TypeScript file type-checks against its declarations, as ESM and as CommonJS (skipLibCheck: false; /schema as drizzle users check it)", async () => {
    writeFileSync(
      join(app, "typed.mts"),
      `import pg from "pg";
import { PostgresSaver, migrate, prune, type PruneResult, type PostgresSaverOptions } from "langgraph-checkpoint-pg";
import { PostgresStore } from "langgraph-checkpoint-pg/store";
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const options: PostgresSaverOptions = { schema: "agents", lineage: "linear" };
const saver: PostgresSaver = new PostgresSaver(pool, options);
// @ts-expect-error lineage is "branch" or "linear": the declarations are typed, not any
new PostgresSaver(pool, { lineage: "sideways" });
await migrate({ pool, schema: "agents" });
const preview: PruneResult = await prune({ pool, keepLast: 20, dryRun: true });
const perThread: number | undefined = preview.threads?.[0]?.checkpoints;
console.log(saver, perThread);
const store: PostgresStore = new PostgresStore(pool, { schema: "memory", ttl: { defaultTtl: 60 } });
const hits: { key: string; score?: number }[] = await store.search(["users"], { query: "x", mode: "text", filter: { n: { $gt: 1 } } });
// @ts-expect-error mode is auto, text, vector or hybrid
void store.search(["users"], { mode: "fuzzy" });
console.log(hits);
`,
    );
    writeFileSync(
      join(app, "typed.cts"),
      `import pg = require("pg");
import lg = require("langgraph-checkpoint-pg");
import st = require("langgraph-checkpoint-pg/store");
const saver: lg.PostgresSaver = new lg.PostgresSaver(new pg.Pool(), { schema: "agents" });
void new st.PostgresStore({ connectionOptions: "postgres://x", ttl: { defaultTtl: 5 } });
// @ts-expect-error keepLast is a number
void lg.prune({ pool: new pg.Pool(), keepLast: "20" });
export = saver;
`,
    );
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", skipLibCheck: false, noEmit: true, types: ["node"] },
        files: ["typed.mts", "typed.cts"],
      }),
    );
    // langgraph-checkpoint-pg/schema, as a drizzle user has it: drizzle-orm's own declarations do not
    // pass skipLibCheck: false (they name drivers nobody installs), so its users skip library checks.
    writeFileSync(
      join(app, "typed-schema.mts"),
      `import { checkpoints, checkpointTables } from "langgraph-checkpoint-pg/schema";
const threadColumn: "thread_id" = checkpoints.threadId._.name;
const agents: "agents" | undefined = checkpointTables("agents").checkpointHeads._.schema;
// @ts-expect-error the columns are typed: there is no such column
void checkpoints.noSuchColumn;
console.log(threadColumn, agents);
`,
    );
    writeFileSync(
      join(app, "typed-schema.cts"),
      `import tables = require("langgraph-checkpoint-pg/schema");
const blobValue: "value" = tables.checkpointBlobs.value._.name;
// @ts-expect-error the columns are typed: there is no such column
void tables.checkpointWrites.noSuchColumn;
export = blobValue;
`,
    );
    writeFileSync(
      join(app, "tsconfig.schema.json"),
      JSON.stringify({
        compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", skipLibCheck: true, noEmit: true, types: ["node"] },
        files: ["typed-schema.mts", "typed-schema.cts"],
      }),
    );
    const tsc = createRequire(join(ROOT, "package.json")).resolve("typescript/bin/tsc");
    for (const project of [".", "tsconfig.schema.json"]) {
      const r = await sh(`${JSON.stringify(process.execPath)} ${JSON.stringify(tsc)} -p ${project}`);
      expect(r.stdout + r.stderr, project).toBe("");
      expect(r.code).toBe(0);
    }
  }, 240_000);

  it("the README's quick start runs as written, twice on one thread", async () => {
    writeFileSync(join(app, "quick-start.mts"), quickStart());
    for (let i = 0; i < 2; i++) {
      const out = ok(await sh("node --import tsx quick-start.mts"));
      expect(out).toContain("{ name: 'pavaneeshwar', address: 'Hyderabad residency' }");
    }
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM public.checkpoints WHERE thread_id = '12345'");
    expect(rows[0].n).toBe(6);
  });

  it("the drizzle example (docs/data-model.md) joins an application table with the checkpoints, as written", async () => {
    const block = docBlocks("docs/data-model.md").find((b) => b.lang === "ts" && b.code.includes("langgraph-checkpoint-pg/schema"));
    expect(block, "a ts block importing langgraph-checkpoint-pg/schema in docs/data-model.md").toBeDefined();
    writeFileSync(join(app, "drizzle-join.mts"), block!.code);
    // The thread the quick start wrote (run here if this test runs alone), and the application's table.
    const has = await db.pool.query("SELECT 1 FROM public.checkpoint_heads WHERE thread_id = '12345'").catch(() => ({ rowCount: 0 }));
    if (!has.rowCount) {
      writeFileSync(join(app, "quick-start.mts"), quickStart());
      ok(await sh("node --import tsx quick-start.mts"));
    }
    await db.pool.query("CREATE TABLE public.conversations (thread_id text PRIMARY KEY, user_id text NOT NULL)");
    try {
      await db.pool.query("INSERT INTO public.conversations VALUES ('12345', 'user-1'), ('no-checkpoints', 'user-1'), ('other', 'user-2')");
      const out = ok(await sh("node --import tsx drizzle-join.mts"));
      const { rows } = await db.pool.query("SELECT (c.metadata->>'step')::int AS step FROM public.checkpoint_heads h JOIN public.checkpoints c USING (thread_id, checkpoint_ns, checkpoint_id) WHERE h.thread_id = '12345' AND h.checkpoint_ns = ''");
      expect(out).toMatch(new RegExp(`threadId: '12345',\\s+step: ${rows[0].step},\\s+at: \\d{4}-`));
      expect(out).not.toContain("no-checkpoints");
      expect(out).not.toContain("other");
    } finally {
      await db.pool.query("DROP TABLE public.conversations");
    }
  });

  it("the command runs through npx --no-install: --help, --version", async () => {
    const [help, version] = await Promise.all([sh("npx --no-install langgraph-checkpoint-pg --help"), sh("npx --no-install langgraph-checkpoint-pg --version")]);
    expect(ok(help)).toMatch(/^langgraph-checkpoint-pg: migrate and inspect the LangGraph\.js Postgres checkpointer\n\nUsage: langgraph-checkpoint-pg <command> \[options\]/);
    expect(help.stdout).toMatch(/^ {2}threads delete <id> +delete threads whole/m);
    expect(ok(version).trim()).toBe(pkg.version);
  });

  it("the installed command loads no @langchain/* for --help, status and migrate: only the commands that decode values do", async () => {
    const hook = `--import=${pathToFileURL(join(ROOT, "test", "helpers", "module-log.mjs")).href}`;
    const cli = join(app, "node_modules", ".bin", "langgraph-checkpoint-pg");
    const loaded = async (args: string, code = 0) => {
      const log = join(work, `modules-${randomBytes(4).toString("hex")}.txt`);
      const r = await sh(`${JSON.stringify(cli)} ${args}`, { MODULE_LOG: log, NODE_OPTIONS: hook });
      expect(r.code, `${args}: ${r.stderr}`).toBe(code);
      return readFileSync(log, "utf8").split("\n").filter((m) => /\/node_modules\/@langchain\//.test(m));
    };
    expect(await loaded("--help")).toEqual([]);
    expect(await loaded("migrate --schema loading_app")).toEqual([]);
    expect(await loaded("status --schema loading_app")).toEqual([]);
    expect(await loaded("threads --schema loading_app")).toEqual([]);
    expect((await loaded("show no-such-thread --schema loading_app", 1)).length).toBeGreaterThan(0);
  });

  it("installing the package brings PGlite (an optional dependency): without DATABASE_URL, open() falls back to the embedded database, as the quick start does", async () => {
    expect(existsSync(join(app, "node_modules", "@electric-sql", "pglite", "package.json"))).toBe(true);
    const elsewhere = mkdtempSync(join(work, "embedded-"));
    writeFileSync(
      join(app, "embedded-open.mjs"),
      'import { PostgresSaver } from "langgraph-checkpoint-pg";\nconst saver = await PostgresSaver.open({ log: false });\nconsole.log(JSON.stringify({ schema: saver.schema }));\nawait saver.end();\n',
    );
    expect(JSON.parse(ok(await sh(`node ${JSON.stringify(join(app, "embedded-open.mjs"))}`, { DATABASE_URL: "" }, elsewhere)))).toEqual({ schema: "public" });
    expect(existsSync(join(elsewhere, ".langgraph-pg"))).toBe(true);
  });

  it("without PGlite (installed with --omit=optional): an option typo is reported as the typo; production refuses the fallback; elsewhere the message names what to install", async () => {
    const program = (options: string) =>
      `import { PostgresSaver } from "langgraph-checkpoint-pg";\n` +
      `try { await PostgresSaver.open(${options}); console.log("opened"); } catch (e) { console.log(JSON.stringify({ name: e.name, option: e.option, message: e.message })); }\n`;
    const cases: [string, Record<string, string>, RegExp][] = [
      ['{ databaseURL: "postgres://nobody@127.0.0.1:1/db" }', {}, /^Invalid option databaseURL: is not an option of open\(\) \(did you mean databaseUrl\?\); its options: databaseUrl, dataDir, embedded, /],
      ["", { NODE_ENV: "production" }, /^NODE_ENV is production and no database URL is set: refusing to fall back to the embedded database/],
      ["", {}, /^Invalid option databaseUrl: none was given and DATABASE_URL is not set, and the embedded database needs the optional package @electric-sql\/pglite/],
    ];
    // What --omit=optional leaves: the project without PGlite (put back afterwards for the tests that follow).
    const pglite = join(app, "node_modules", "@electric-sql", "pglite");
    renameSync(pglite, `${pglite}.omitted`);
    try {
      for (const [i, [options, env, message]] of cases.entries()) {
        writeFileSync(join(app, `no-pglite-${i}.mjs`), program(options));
        const out = JSON.parse(ok(await sh(`node no-pglite-${i}.mjs`, { DATABASE_URL: "", ...env }))) as { message: string };
        expect(out.message).toMatch(message);
      }
    } finally {
      renameSync(`${pglite}.omitted`, pglite);
    }
    expect(existsSync(join(app, ".langgraph-pg"))).toBe(false);
  });

  it("upgrade-state loads a .ts module through the project's tsx, and says in one line what to do without it", async () => {
    const upcasters = `export const stateVersion: number = 2;\nexport const upcasters = { 1: { rename: { name: "fullName" } } };\n`;
    writeFileSync(join(app, "upcasters.ts"), upcasters);
    const loaded = await sh("npx --no-install langgraph-checkpoint-pg upgrade-state --module ./upcasters.ts --schema esm_app");
    expect(ok(loaded)).toMatch(/^Rewrote 1 checkpoint\(s\) to state version 2 in schema "esm_app"/);
    // A project without tsx: the module elsewhere, run from there.
    const bare = join(work, "bare");
    mkdirSync(bare);
    writeFileSync(join(bare, "upcasters.ts"), upcasters);
    const cli = join(app, "node_modules", ".bin", "langgraph-checkpoint-pg");
    const refused = await sh(`${JSON.stringify(cli)} upgrade-state --module ./upcasters.ts --schema esm_app`, {}, bare);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split("\n")).toHaveLength(1);
    expect(refused.stderr).toMatch(/cannot load the upcasters module "\.\/upcasters\.ts": Node\.js v\d+\S* cannot load TypeScript by itself: install tsx in your project \(npm install -D tsx\)/);
  });
});

/**
 * Every command block of README.md and docs/*.md, in the order of
 * test/helpers/readme.ts (docFiles), run in the test project: fenced bash
 * blocks, the `run:` steps of the YAML ones, the cron line. A few are not run
 * here, each for the reason given (NOT_RUN); anything else is run, so a new
 * block is tested the moment it is written. The placeholders of the pages
 * stand for the test's databases (placeholders).
 */
describe("the command blocks of README.md and docs/, run in that project", () => {
  let placeholders: [string, string][];
  const env = (b: DocBlock) => {
    // The switch-over runbook needs the official saver's tables in public: its own database.
    const url = b.file === "docs/adoption.md" ? official.url : db.url;
    return { DATABASE_URL: url, OWNER_DATABASE_URL: url, CKPT_KEY_2025_06: randomBytes(32).toString("base64"), PATH: [join(work, "bin"), join(app, "node_modules", ".bin"), ...psqlDirs(), process.env.PATH].join(delimiter) };
  };

  beforeAll(async () => {
    placeholders = [
      ["postgres://user:password@localhost:5432/app", db.url],
      ["postgres://other/db", other.url],
      ["postgres://...", db.url],
      ["/srv/app", app],
      ["agents_app", role],
    ];
    await db.pool.query(`CREATE ROLE ${pg.escapeIdentifier(role)} NOLOGIN`);
    // The official saver's tables, with a thread, where the runbook expects them.
    const pool = new pg.Pool({ connectionString: official.url });
    try {
      const saver = new OfficialSaver(pool);
      await saver.setup();
      await addressGraph(saver).invoke({}, { configurable: { thread_id: "12345" } });
    } finally {
      await pool.end();
    }
    // npx, for a package the project installed, runs its bin: the same, without npm's start-up (seconds per command).
    // The real npx --no-install runs in the test above.
    mkdirSync(join(work, "bin"), { recursive: true });
    writeFileSync(
      join(work, "bin", "npx"),
      `#!/usr/bin/env bash\nwhile [[ "$1" == --no-install || "$1" == -y || "$1" == --yes ]]; do shift; done\nbin="${join(app, "node_modules", ".bin")}/$1"\n[ -x "$bin" ] || { echo "npx: $1 is not installed in the project" >&2; exit 127; }\nshift\nexec "$bin" "$@"\n`,
    );
    chmodSync(join(work, "bin", "npx"), 0o755);
  });

  it("installs what the README's Install section names, and the tarball it names", () => {
    const install = readmeBlocks().filter((b) => b.section === "Install" && b.lang === "bash");
    expect(install).toHaveLength(2);
    const names = (line: string) => line.split(/\s+/).slice(2).filter((w) => !w.startsWith("-") && !w.startsWith("#"));
    const registry = install[0]!.code.split("\n").filter((l) => l.startsWith("npm install"));
    expect(registry).toHaveLength(1);
    const named = names(registry[0]!);
    expect(named[0]).toBe(pkg.name);
    // Every package the quick start imports is named, and every peer the package needs is named or
    // comes with one that is (package-lock.json says what each depends on).
    const imported = [...quickStart().matchAll(/from "([^"]+)"/g)].map((m) => m[1]!).filter((n) => n !== pkg.name);
    expect(named).toEqual(expect.arrayContaining(imported));
    const lock = (JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> }).packages;
    const brought = new Set(named.flatMap((n) => Object.keys(lock[`node_modules/${n}`]?.dependencies ?? {})));
    const required = Object.keys(pkg.peerDependencies).filter((n) => !pkg.peerDependenciesMeta[n]?.optional);
    expect(required.filter((n) => !named.includes(n) && !brought.has(n))).toEqual([]);
    // What is optional (the embedded database, drizzle) is named in the section, and how to leave it out.
    const section = docText("README.md").split(/^## /m).find((part) => part.startsWith("Install\n"))!;
    const optional = [...Object.keys(pkg.optionalDependencies ?? {}), ...Object.keys(pkg.peerDependenciesMeta).filter((n) => pkg.peerDependenciesMeta[n]!.optional)];
    for (const n of optional) expect(section, n).toContain(n);
    expect(section).toContain("--omit=optional");
    const fromTarball = install[1]!.code.split("\n").find((l) => l.startsWith("npm install"))!;
    const [tgz, ...peers] = names(fromTarball);
    expect(tgz!.endsWith(`/${tarball.split("/").pop()}`)).toBe(true);
    expect(peers).toEqual(named.slice(1));
    expect(install[1]!.code).toContain(`writes ${tarball.split("/").pop()}`);
    // This project installed at least what the README names.
    expect(PEERS).toEqual(expect.arrayContaining(named.slice(1)));
  });

  it("runs every other block, in order, and each exits 0", async () => {
    const ran: string[] = [];
    for (const block of docBlocks().filter((b) => kindOf(b) === "commands")) {
      const what = commandsOf(block);
      if ("skip" in what) continue;
      for (let command of what.run) {
        for (const [from, to] of placeholders) command = command.split(from).join(to);
        const r = await sh(command, env(block));
        expect(r.code, `${block.file}:${block.line} (${block.section}): ${command}\n${r.stderr}\n${r.stdout}`).toBe(0);
        ran.push(command);
      }
    }
    // What the blocks did is there: the export arrived, the switch-over was rolled back, the grants were given.
    expect(ran.some((c) => c.includes(" export --all | "))).toBe(true);
    const copied = await new pg.Pool({ connectionString: other.url, max: 1 });
    try {
      expect((await copied.query("SELECT count(*)::int AS n FROM public.checkpoints WHERE thread_id = '12345'")).rows[0].n).toBe(6);
    } finally {
      await copied.end();
    }
    const officialPool = new pg.Pool({ connectionString: official.url, max: 1 });
    try {
      const state = (await officialPool.query("SELECT state FROM langgraph.checkpointer_adoption")).rows[0]?.state;
      expect(state).toBe("rolled-back");
    } finally {
      await officialPool.end();
    }
    const { rows } = await db.pool.query("SELECT has_table_privilege($1, 'agents.checkpoints', 'INSERT') AS ok", [role]);
    expect(rows[0].ok).toBe(true);
    expect(existsSync(join(app, "plan.sql")) && readFileSync(join(app, "plan.sql"), "utf8")).toMatch(/CREATE TRIGGER/);
    expect(JSON.parse(readFileSync(join(app, "prune-plan.json"), "utf8"))).toMatchObject({ dryRun: true });
  }, 600_000);
});
