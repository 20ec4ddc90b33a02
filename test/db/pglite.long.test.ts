/**
 * The embedded path's slow tests (\`npm run test:long\`: each starts PGlite in new processes or runs initdb,
 * seconds of CPU apiece): \`open()\` without DATABASE_URL, as an app starts, and the empty database the
 * package ships. The rest of the embedded path: pglite.test.ts.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openEmbedded, PostgresSaver, type PGliteLike } from "../../src/index.js";
import { installedPGlite, snapshotInfo } from "../../src/db/snapshot.js";
import { collect, libraryImport, tempDirs } from "../helpers/cli.js";

describe("embedded data folder", () => {
  const tempDir = tempDirs("lgpg-embedded-");
  it("a new folder starts from the empty database the package ships (embedded/initdb.tar.br), which belongs to the installed PGlite; else `npm run embedded:snapshot`", async () => {
    const info = snapshotInfo()!;
    expect(info.pglite).toBe(installedPGlite());
    const systemId = async (db: PGliteLike) => (await db.query<{ id: string }>("SELECT system_identifier::text AS id FROM pg_control_system()")).rows[0]!.id;
    // The fast path: no initdb, so the folder has the snapshot's system identifier (initdb makes a new one).
    const fast = await openEmbedded(tempDir());
    const slow = await openEmbedded(tempDir(), { loadDataDir: () => undefined });
    try {
      expect(fast.created).toBe("snapshot");
      expect(await systemId(fast.db)).toBe(info.systemIdentifier);
      expect(slow.created).toBe("initdb");
      expect(await systemId(slow.db)).not.toBe(info.systemIdentifier);
    } finally {
      await Promise.all([fast.close(), slow.close()]);
    }
    // And open() on a new folder, as an app's first run does.
    const dataDir = tempDir();
    const saver = await PostgresSaver.open({ dataDir });
    await saver.end();
    const reopened = await openEmbedded(dataDir);
    try {
      expect(reopened.created).toBeUndefined();
      expect(await systemId(reopened.db)).toBe(info.systemIdentifier);
    } finally {
      await reopened.close();
    }
  });
});

/**
 * Issue 28: a missing DATABASE_URL must not silently mean a local database in
 * production. `open()` in a child process, as an app starts: with
 * NODE_ENV=production and no DATABASE_URL it refuses, saying what to set;
 * asked explicitly it opens the embedded database; elsewhere it falls back,
 * saying so in one line on stderr.
 */
/** The two openers: the same rules, the same lines, each naming itself; the options of each, and a bad value of one of them. */
const OPENERS = [
  { name: "PostgresSaver", end: "end", own: ["schema", "serde", "lineage", "elementStorage"], bad: '{ lineage: "sideways" }' },
  { name: "PostgresStore", end: "stop", own: ["schema", "ttl", "index", "textSearchLanguage"], bad: "{ ttl: { defaultTtl: -1 } }" },
] as const;

describe.each(OPENERS)("open() of $name without DATABASE_URL", ({ name, end, own, bad: badOwn }) => {
  const lib = libraryImport();
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  /**
   * Runs `open(options)` for each of `optionsList` in one new process, each in its own empty folder (the
   * process's working directory while it runs); what each printed, and whether it made ./.langgraph-pg.
   * One process for several: each start costs a second of CPU, and what is tested is each call.
   */
  async function openEach(optionsList: string[], env: Record<string, string> = {}) {
    const cwd = mkdtempSync(join(tmpdir(), "lgpg-open-"));
    dirs.push(cwd);
    const app = lib.file("app");
    writeFileSync(
      join(cwd, app),
      `import { mkdirSync } from "node:fs";\n` +
        `import { ${name} } from ${JSON.stringify(lib.url)};\n` +
        `const calls = [${optionsList.map((o) => `() => ${name}.open(${o})`).join(", ")}];\n` +
        "for (const [i, call] of calls.entries()) {\n" +
        "  mkdirSync(`case-${i}`);\n  process.chdir(`case-${i}`);\n" +
        `  try { const s = await call(); console.log("opened " + s.schema); await s.${end}(); }\n` +
        "  catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, option: e.option, message: e.message })); }\n" +
        '  process.chdir("..");\n}\n',
    );
    const { DATABASE_URL: _, NODE_ENV: __, ...inherited } = process.env;
    // --liftoff-only, as `npm run demo` runs: V8 compiles PGlite's WebAssembly once, without the optimizing
    // second pass that a process of a few seconds never gains back (a third of its CPU).
    const child = spawn(process.execPath, ["--liftoff-only", ...lib.nodeArgs, app], { cwd, env: { ...inherited, ...env } });
    const r = await collect(child);
    const lines = r.stdout.trim().split("\n");
    expect(lines, r.stderr).toHaveLength(optionsList.length);
    return lines.map((out, i) => {
      const at = join(cwd, `case-${i}`);
      return { ...r, result: out.startsWith("{") ? (JSON.parse(out) as Record<string, string>) : out, created: existsSync(join(at, ".langgraph-pg")), cwd: at };
    });
  }
  const openIn = async (options: string, env: Record<string, string> = {}) => (await openEach([options], env))[0]!;

  it("with NODE_ENV=production refuses to fall back, saying what to set and how to ask for it; creates nothing", async () => {
    const r = await openIn("", { NODE_ENV: "production" });
    expect(r.result).toMatchObject({ name: "DatabaseUrlMissingError", code: "DATABASE_URL_MISSING" });
    const message = (r.result as Record<string, string>).message!;
    expect(message).toContain("NODE_ENV is production and no database URL is set");
    expect(message).toContain("Set DATABASE_URL to your Postgres server");
    expect(message).toContain(`${name}.open({ embedded: true }), or open({ dataDir })`);
    expect(r.created).toBe(false);
    expect(r.stderr).toBe("");
  });

  it("with NODE_ENV=production opens the embedded database when asked for it (embedded: true, or a dataDir), without a notice", async () => {
    const options = ["{ embedded: true }", '{ dataDir: ".langgraph-pg" }'];
    for (const [i, r] of (await openEach(options, { NODE_ENV: "production" })).entries()) {
      expect(r.result, `${options[i]}: ${r.stderr}`).toBe("opened public");
      expect(r.created, options[i]).toBe(true);
      expect(r.stderr, "the process's stderr, both calls").toBe("");
    }
  });

  it("elsewhere falls back to ./.langgraph-pg, saying so in one line on stderr: where, and how to use a server instead", async () => {
    // In one process: the first call's line is all it prints, so log: false (the second) silences it.
    const [r, quiet] = await openEach(["", "{ log: false }"]);
    for (const opened of [r!, quiet!]) {
      expect(opened.result, opened.stderr).toBe("opened public");
      expect(opened.created).toBe(true);
    }
    expect(r!.stderr).toBe(
      `langgraph-checkpoint-pg: no DATABASE_URL: using the embedded database (PGlite) in ${join(r!.cwd, ".langgraph-pg")} (created now); ` +
        `set DATABASE_URL to use a Postgres server, or pass ${name}.open({ embedded: true }) to choose this one without this line\n`,
    );
  });

  it("an option it does not know is refused before anything is opened or created, listing every option of open()", async () => {
    const r = await openIn('{ databaseURL: "postgres://nobody@127.0.0.1:1/db" }');
    expect(r.result).toMatchObject({ name: "InvalidOptionsError", option: "databaseURL" });
    const message = (r.result as Record<string, string>).message!;
    expect(message).toMatch(/^Invalid option databaseURL: is not an option of (PostgresStore\.)?open\(\) \(did you mean databaseUrl\?\); its options: /);
    for (const option of ["databaseUrl", "dataDir", "embedded", "migrate", "pool", "adopt", "retry", "log", ...own]) {
      expect(message).toContain(option);
    }
    expect(r.created).toBe(false);
    // A bad value of a known option too, and the opener's own options: checked before the folder is made.
    const badOptions = ["{ retry: { attempt: 3 } }", "{ adopt: 3 }", badOwn, '{ embedded: "yes" }', '{ databaseUrl: "postgres://x", dataDir: "d" }', '{ dataDir: "d", log: 1 }'];
    for (const [i, bad] of (await openEach(badOptions)).entries()) {
      const options = badOptions[i]!;
      expect(bad.result, options).toMatchObject({ name: "InvalidOptionsError" });
      expect(bad.created, options).toBe(false);
      expect(existsSync(join(bad.cwd, "d")), options).toBe(false);
    }
  });
});

