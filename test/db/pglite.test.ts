/**
 * The embedded path: the same saver and migrations on PGlite (Postgres in
 * WebAssembly), the folder lock, and the conformance suite on it. open()'s
 * fallback in a new process and the shipped empty database: pglite.long.test.ts.
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
import { DataDirLockedError, InvalidOptionsError, loadMigrations, lockDataDir, migrate, openEmbedded, PostgresSaver } from "../../src/index.js";
import { shareEmbedded } from "../../src/db/embedded.js";
import { tempDirs } from "../helpers/cli.js";
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
  const tempDir = tempDirs("lgpg-embedded-");
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
