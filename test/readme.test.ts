/**
 * The documentation as tests: README.md and every page of docs/ (the rule is
 * in docs/tests.md, "The examples in these pages", and test/helpers/readme.ts).
 * Every fenced block is run or marked as output; each page's programs (ts) and
 * SQL run as written, in the page's order, against a database of the page's
 * own that holds the quick start's thread, with the package imported from
 * src/ (each program compiled by esbuild, as tsx compiles it, and run by node
 * in a process of its own); every local link resolves. test/tarball.long.test.ts runs the command
 * blocks, the quick start and two other programs against the packed package.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSaver, migrate, migrateStore } from "../src/index.js";
import { ROOT } from "./helpers/cli.js";
import { createTestDatabase, type TestDatabase } from "./helpers/db.js";
import { addressGraph } from "./helpers/graphs.js";
import {
  anchorsOf,
  brokenLink,
  docBlocks,
  docFiles,
  expectedOutput,
  kindOf,
  localLinks,
  NOT_RUN,
  outputMatches,
  pointedAtSources,
  quickStart,
  type DocBlock,
} from "./helpers/readme.js";

const exec = promisify(execFile);
const files = docFiles();
const where = (b: { file: string; line: number }) => `${b.file}:${b.line}`;

it("every fenced block is run by a test or marked as output: no block without a language the tests know", () => {
  const refused = docBlocks()
    .filter((b) => kindOf(b) === undefined)
    .map((b) => `${where(b)}: \`\`\`${b.lang || "(no language)"}`);
  // A new block is a `ts` program, `sql`, a command (`bash`, `yaml`, `cron`), output (`text`, `console`), or the house's diagram (`mermaid`).
  expect(refused).toEqual([]);
  const blocks = docBlocks();
  // An output block compared with a program's output follows that program.
  const stray = blocks.filter((b, i) => b.meta === "output" && (i === 0 || blocks[i - 1]!.lang !== "ts" || blocks[i - 1]!.file !== b.file)).map(where);
  expect(stray).toEqual([]);
  // Each reason not to run a command block still names one (test/tarball.long.test.ts runs the others).
  const commands = blocks.filter((b) => kindOf(b) === "commands");
  const stale = NOT_RUN.filter(([re]) => !commands.some((b) => re.test(b.code) || [...b.code.matchAll(/run: (.*)$/gm)].some((m) => re.test(m[1]!.trim())))).map(([re]) => String(re));
  expect(stale).toEqual([]);
  // A configuration file parses: sections and key = value lines, comments.
  for (const b of blocks.filter((b) => kindOf(b) === "config")) {
    const bad = b.code.split("\n").filter((l) => l.trim() !== "" && !/^\s*([;#].*|\[[\w.-]+\]|[\w.]+\s*=\s*\S.*)$/.test(l));
    expect(bad, where(b)).toEqual([]);
  }
});

it("every link of README.md and docs/*.md to a local file or an anchor resolves, and the README links every page", () => {
  const broken = files.flatMap((f) => localLinks(f)).flatMap((l) => {
    const why = brokenLink(l);
    return why ? [`${where(l)}: ${l.target}: ${why}`] : [];
  });
  expect(broken).toEqual([]);
  const linked = new Set(localLinks("README.md").map((l) => l.target.split("#")[0]));
  expect(files.filter((f) => f.startsWith("docs/") && !linked.has(f))).toEqual([]);
  // The anchors the README's first screen promises exist (a sanity check of the slugs themselves).
  expect(anchorsOf("docs/data-model.md").has("what-one-run-stores-npm-run-demo")).toBe(true);
});

it("the quick start is at most 20 lines and imports only the package and LangGraph", () => {
  const code = quickStart();
  expect(code.split("\n").length).toBeLessThanOrEqual(20);
  expect([...code.matchAll(/from "([^"]+)"/g)].map((m) => m[1])).toEqual(["@langchain/langgraph", "langgraph-checkpoint-pg"]);
});

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
      CREATE FUNCTION public.create_distributed_table(t text, col text, colocate_with text DEFAULT 'default') RETURNS void
      LANGUAGE plpgsql AS $$ BEGIN
        IF t LIKE '%.store_item_vectors' AND pg_catalog.to_regclass(t) IS NULL AND NOT ${vector} THEN RETURN; END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t::regclass AND attname = col AND NOT attisdropped) THEN RAISE 'no column % in %', col, t; END IF;
        IF colocate_with <> 'default' THEN PERFORM colocate_with::regclass; END IF;
      END $$;
      CREATE FUNCTION public.create_reference_table(t regclass) RETURNS void LANGUAGE sql AS 'SELECT';`);
  }
  return db;
}

/** A SQL block with its placeholders standing for the test's: the database `app`, the role `app`. */
function sqlOf(code: string, db: TestDatabase, role: string): string {
  const database = new URL(db.url).pathname.slice(1);
  return code.replace(/\bDATABASE app\b/g, `DATABASE ${pg.escapeIdentifier(database)}`).replace(/\bROLE app\b/g, `ROLE ${pg.escapeIdentifier(role)}`);
}

describe.concurrent("each page's programs and SQL run as written, in order, on a database of its own", () => {
  for (const file of files) {
    const blocks = docBlocks(file);
    const runnable = blocks.filter((b) => kindOf(b) === "program" || kindOf(b) === "sql");
    if (runnable.length === 0) continue;
    it(`${file}: ${runnable.map((b) => `${b.lang} at line ${b.line}`).join(", ")}`, async () => {
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
    }, 600_000);
  }
});
