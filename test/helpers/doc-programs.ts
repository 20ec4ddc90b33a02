/**
 * Runs a documentation page's programs (`ts`) and SQL as written, in the page's order, against a
 * database of the page's own that holds the quick start's thread, with the package imported from
 * src/ (each program compiled by esbuild, as tsx compiles it, and run by node in a process of its
 * own); a program followed by a ```` ```text output ```` block must print it. test/readme.test.ts
 * runs README.md's, test/docs.long.test.ts every page of docs/ (the rule: docs/tests.md).
 *
 * @example
 * ```ts
 * it("README.md", () => runPage("README.md"), 600_000);
 * ```
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import pg from "pg";
import { expect } from "vitest";
import { PostgresSaver, migrate, migrateStore } from "../../src/index.js";
import { ROOT } from "./cli.js";
import { createTestDatabase, type TestDatabase } from "./db.js";
import { addressGraph } from "./graphs.js";
import { docBlocks, expectedOutput, kindOf, outputMatches, pointedAtSources, type DocBlock } from "./readme.js";

const exec = promisify(execFile);
const where = (b: { file: string; line: number }) => `${b.file}:${b.line}`;

/** The page's blocks the tests run (programs and SQL); none: nothing to run. */
export function runnableBlocks(file: string): DocBlock[] {
  return docBlocks(file).filter((b) => kindOf(b) === "program" || kindOf(b) === "sql");
}

/** A test's title for a page: the page and where its runnable blocks are. */
export function pageTitle(file: string): string {
  return `${file}: ${runnableBlocks(file).map((b) => `${b.lang} at line ${b.line}`).join(", ")}`;
}

/** A page's database: migrated (public; `agents` with the store too, for SQL that names it), holding the quick start's thread "12345". */
async function pageDatabase(file: string, blocks: DocBlock[]): Promise<TestDatabase> {
  const db = await createTestDatabase(`docs ${file.replace(/^docs\//, "").replace(/\.md$/, "")}`);
  await migrate({ pool: db.pool });
  const saver = new PostgresSaver(db.pool);
  await addressGraph(saver).invoke({}, { configurable: { thread_id: "12345" } });
  await saver.end();
  if (blocks.some((b) => kindOf(b) === "sql" && /\bagents\./.test(b.code))) {
    // The store's vector table exists only for a store with an index, which needs pgvector on the server.
    const vector = (await db.pool.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).rowCount! > 0;
    await migrate({ pool: db.pool, schema: "agents" });
    await migrateStore({ pool: db.pool, schema: "agents", ...(vector ? { index: { dims: 3, distanceMetric: "cosine", indexType: "hnsw" } } : {}) });
    // Stand-ins of Citus's functions (docs/scaling-out.md): they check that each table and column a block names exists.
    await db.pool.query(`
      CREATE FUNCTION public.create_distributed_table(t regclass, col text, colocate_with text DEFAULT 'default') RETURNS void
      LANGUAGE plpgsql AS $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = col AND NOT attisdropped) THEN RAISE 'no column % in %', col, t; END IF;
        IF colocate_with <> 'default' THEN PERFORM colocate_with::regclass; END IF;
      END $$;
      CREATE FUNCTION public.create_reference_table(t regclass) RETURNS void LANGUAGE sql AS 'SELECT';
      CREATE FUNCTION public.create_distributed_function(f regprocedure, arg text, colocate_with text DEFAULT 'default') RETURNS void
      LANGUAGE plpgsql AS $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_proc WHERE oid = f AND arg = ANY (proargnames)) THEN RAISE 'no argument % in %', arg, f; END IF;
        IF colocate_with <> 'default' THEN PERFORM colocate_with::regclass; END IF;
      END $$;`);
  }
  return db;
}

/** A SQL block with its placeholders standing for the test's: the database `app`, the role `app`. */
function sqlOf(code: string, db: TestDatabase, role: string): string {
  const database = new URL(db.url).pathname.slice(1);
  return code.replace(/\bDATABASE app\b/g, `DATABASE ${pg.escapeIdentifier(database)}`).replace(/\bROLE app\b/g, `ROLE ${pg.escapeIdentifier(role)}`);
}

/** Runs `file`'s programs and SQL (see the top of this file); throws naming the block that failed. */
export async function runPage(file: string): Promise<void> {
  const blocks = docBlocks(file);
  const runnable = runnableBlocks(file);
  const db = await pageDatabase(file, blocks);
  // Programs live inside the repository, so their imports resolve from its node_modules; they run in a
  // folder of their own, where an embedded database (./.langgraph-pg) may be created.
  const dir = mkdtempSync(join(ROOT, "test", ".readme-"));
  const cwd = mkdtempSync(join(tmpdir(), "lgpg-docs-"));
  const role = `docs_app_${randomBytes(4).toString("hex")}`;
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: db.url, CKPT_KEY_2025_06: randomBytes(32).toString("base64") };
  delete env.FORCE_COLOR;
  try {
    if (runnable.some((b) => kindOf(b) === "sql" && /\bROLE app\b/.test(b.code))) await db.pool.query(`CREATE ROLE ${pg.escapeIdentifier(role)} NOLOGIN`);
    // Each program compiled as tsx would (esbuild, types stripped, nothing checked), all of the page's in one
    // build: node then runs them without tsx's loader, a third of the CPU time per program (dependencies stay
    // in node_modules; src/ is bundled, and finds migrations/ above it as the package does).
    const programs = runnable.filter((b) => kindOf(b) === "program");
    for (const block of programs) writeFileSync(join(dir, `line-${block.line}.mts`), pointedAtSources(block.code));
    await build({
      entryPoints: programs.map((b) => join(dir, `line-${b.line}.mts`)),
      outdir: dir,
      outExtension: { ".js": ".mjs" },
      bundle: true,
      packages: "external",
      format: "esm",
      platform: "node",
      target: "node20",
      logLevel: "silent",
    });
    for (const block of runnable) {
      if (kindOf(block) === "sql") {
        await db.pool.query(sqlOf(block.code, db, role)).catch((e: Error) => {
          throw new Error(`${where(block)}: ${e.message}`);
        });
        continue;
      }
      const run = await exec(process.execPath, [join(dir, `line-${block.line}.mjs`)], { cwd, env, maxBuffer: 16 << 20 }).catch((e: { code: number; stdout: string; stderr: string }) => {
        throw new Error(`${where(block)} exited ${e.code}\n${e.stderr}\n${e.stdout}`);
      });
      const expected = expectedOutput(blocks, block);
      if (expected) expect(outputMatches(expected.code, run.stdout), `${where(block)} printed:\n${run.stdout}\nthe page shows (line ${expected.line}):\n${expected.code}`).toBe(true);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(cwd, { recursive: true, force: true });
    await db.drop();
    if (runnable.some((b) => kindOf(b) === "sql" && /\bROLE app\b/.test(b.code))) {
      const admin = new pg.Client({ connectionString: db.adminUrl });
      await admin.connect();
      await admin.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`).finally(() => admin.end());
    }
  }
}
