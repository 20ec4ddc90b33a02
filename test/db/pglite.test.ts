/**
 * The embedded path: the same saver and migrations on PGlite (Postgres in
 * WebAssembly), the folder lock, and the conformance suite on it.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { brotliDecompressSync, gzipSync } from "node:zlib";
import { PGlite } from "@electric-sql/pglite";
import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { afterAll, describe, expect, it } from "vitest";
import { DataDirLockedError, InvalidOptionsError, loadMigrations, lockDataDir, migrate, openEmbedded, PostgresSaver, PostgresStore, type PGliteLike } from "../../src/index.js";
import { shareEmbedded } from "../../src/db/embedded.js";
import { installedPGlite, snapshotInfo } from "../../src/db/snapshot.js";
import { collect, libraryImport } from "../helpers/cli.js";
import { differential } from "../helpers/conformance.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";

// The official conformance suite's differential (test/helpers/conformance.ts): each statement the saver
// sends, on PGlite's engine and through its driver (conformance.test.ts runs the whole suite on Postgres).
describe("PGlite conformance", () => {
  const db = new PGlite();
  afterAll(() => db.close());
  const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
    checkpointerName: "langgraph-checkpoint-pg on PGlite",
    beforeAllTimeout: 120_000,
    async beforeAll() {
      await migrate({ pool: db });
    },
    async createCheckpointer() {
      await db.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
      return new PostgresSaver(db);
    },
  };
  differential(initializer);
});

describe("embedded data folder", () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), "lgpg-embedded-"));
    dirs.push(d);
    return d;
  };
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  /** One existing embedded folder for the lock tests: creating one costs seconds of CPU. */
  let existing: Promise<string> | undefined;
  const existingDir = () =>
    (existing ??= (async () => {
      const dir = tempDir();
      await (await openEmbedded(dir)).close();
      return dir;
    })());

  it("PostgresSaver.open without DATABASE_URL migrates and persists a thread across reopen", async () => {
    const dataDir = tempDir();
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      const first = await PostgresSaver.open({ dataDir });
      const config = await first.put(
        { configurable: { thread_id: "t", checkpoint_ns: "" } },
        { v: 4, id: "cp-1", ts: new Date().toISOString(), channel_values: { a: "kept" }, channel_versions: { a: "1" }, versions_seen: {} },
        { source: "input", step: -1, parents: {} },
        { a: "1" },
      );
      await first.end();
      const second = await PostgresSaver.open({ dataDir });
      expect((await second.getTuple(config))?.checkpoint.channel_values).toEqual({ a: "kept" });
      await second.end();
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
    }
  });

  it("a second opener in this process gets a clear error naming the holder", async () => {
    const dataDir = await existingDir();
    const held = await openEmbedded(dataDir);
    try {
      const err = await openEmbedded(dataDir).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DataDirLockedError);
      expect((err as DataDirLockedError).holder.pid).toBe(process.pid);
      expect((err as Error).message).toMatch(new RegExp(`process ${process.pid}`));
    } finally {
      await held.close();
    }
    // Released: it opens again.
    await (await openEmbedded(dataDir)).close();
  });

  it("another process is refused while this one holds the folder", async () => {
    const dataDir = tempDir();
    const release = lockDataDir(dataDir);
    try {
      const script = join(dataDir, "..", `try-lock-${process.pid}.mjs`);
      writeFileSync(
        script,
        `import { lockDataDir } from ${JSON.stringify(join(process.cwd(), "src/db/embedded.ts"))};\n` +
          `try { lockDataDir(${JSON.stringify(dataDir)}); console.log("LOCKED"); } catch (e) { console.log(e.code, e.holder.pid); }\n`,
      );
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", script]);
      expect(stdout.trim()).toBe(`DATA_DIR_LOCKED ${process.pid}`);
      rmSync(script);
    } finally {
      release();
    }
  });

  it("recovers a stale lock left by a killed process", async () => {
    const dataDir = await existingDir();
    // A process that takes the lock and is then killed without cleanup.
    const child = spawn(process.execPath, [
      "--import",
      "tsx",
      "-e",
      `import(${JSON.stringify(join(process.cwd(), "src/db/embedded.ts"))}).then((m) => { m.lockDataDir(${JSON.stringify(dataDir)}); console.log("held"); setInterval(() => {}, 1000); })`,
    ]);
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (d: Buffer) => d.toString().includes("held") && resolve());
      child.on("exit", (code) => reject(new Error(`child exited early (${code})`)));
    });
    child.removeAllListeners("exit");
    const dead = new Promise((r) => child.on("exit", r));
    child.kill("SIGKILL");
    await dead;
    const db = await openEmbedded(dataDir);
    await db.close();
  });

  it("loadDataDir: a new folder starts from a saved data folder (tar or gzipped tar), an existing one ignores it; a tar leaving the folder is refused", async () => {
    const cfg = (thread_id: string) => ({ configurable: { thread_id, checkpoint_ns: "" } });
    // The shipped snapshot (see scripts/embedded-snapshot.ts), migrated here.
    const tar = brotliDecompressSync(readFileSync(join(process.cwd(), "embedded", "initdb.tar.br")));
    for (const bytes of [tar, gzipSync(tar)]) {
      const dataDir = tempDir();
      let calls = 0;
      const load = () => {
        calls += 1;
        return bytes;
      };
      for (let i = 0; i < 2; i++) {
        const db = await openEmbedded(dataDir, { loadDataDir: load });
        try {
          expect(db.created).toBe(i === 0 ? "snapshot" : undefined);
          await migrate({ pool: db.db });
          const { rows } = await db.db.query<{ n: number }>("SELECT count(*)::int AS n FROM checkpointer_migrations");
          expect(rows[0]!.n).toBe(loadMigrations().length);
          if (i === 0) await new PostgresSaver(db.db).put(cfg("kept"), makeCheckpoint(), meta(-1), {});
          else expect((await new PostgresSaver(db.db).getTuple(cfg("kept")))?.checkpoint).toBeDefined();
        } finally {
          await db.close();
        }
      }
      expect(calls).toBe(1);
    }

    const evil = Buffer.alloc(1536);
    evil.write("../escaped", 0);
    evil.write("0000644\0", 100);
    evil.write("00000000000\0", 124);
    evil.write("0", 156);
    const dataDir = tempDir();
    const err = await openEmbedded(dataDir, { loadDataDir: () => evil }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toMatch(/loadDataDir: not a PGlite data folder tar: entry "\.\.\/escaped" leaves the folder/);
    expect(existsSync(join(dataDir, "..", "escaped"))).toBe(false);
    expect(readdirSync(dataDir)).toEqual([]); // no half-written pgdata, and the lock was released
  });
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

describe.each(OPENERS)("$name.open() without DATABASE_URL", ({ name, end, own, bad: badOwn }) => {
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

describe("the embedded database the saver's and the store's open() share", () => {
  it("is one PGlite instance per folder, started with the package's start parameters and pgvector; it closes with its last user", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "lgpg-shared-"));
    try {
      const a = await shareEmbedded(dataDir);
      const b = await shareEmbedded(dataDir);
      expect(b.db).toBe(a.db);
      // Only the opener that made the folder says it did.
      expect([a.created, b.created]).toEqual(["snapshot", undefined]);
      expect((await a.db.query<{ shared_buffers: string }>("SHOW shared_buffers")).rows).toEqual([{ shared_buffers: "16MB" }]);
      await a.db.query("CREATE EXTENSION IF NOT EXISTS vector");
      expect((await a.db.query<{ d: number }>("SELECT '[3,4]'::vector <-> '[0,0]'::vector AS d")).rows).toEqual([{ d: 5 }]);
      await a.close();
      expect(() => lockDataDir(dataDir)).toThrow(DataDirLockedError);
      await b.close();
      lockDataDir(dataDir)();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
