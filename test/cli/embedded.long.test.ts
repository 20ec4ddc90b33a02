/**
 * The CLI on the embedded database (PGlite), spawned as a real process: the
 * default folder (./.langgraph-pg of the working directory) that migrate
 * creates and read commands never do, the refusal to fall back to it in
 * production, two processes on one folder (the lock, recovered after a kill).
 * In `npm run test:long`, not `npm test`: it starts PGlite in child processes,
 * minutes of CPU for what it adds to the everyday run (cli.test.ts imports an
 * export into the embedded database there).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { firstLine, migrateEmbeddedDefault, ROOT, runCli, tempDirs } from "../helpers/cli.js";

const tempDir = tempDirs("lgpg-cli-");

/**
 * One embedded database for the whole file, created by `migrate` in the default
 * place (./.langgraph-pg of the working directory): creating a PGlite folder
 * costs seconds, so the lock test reuses it.
 */
let embeddedCwd: string;
const embeddedDir = () => join(embeddedCwd, ".langgraph-pg");
beforeAll(async () => {
  embeddedCwd = tempDir();
  await migrateEmbeddedDefault(embeddedCwd);
});

describe("CLI on the embedded database (PGlite)", () => {
  it("uses ./.langgraph-pg by default (created by migrate, see beforeAll); read commands never create it", async () => {
    const elsewhere = tempDir();
    const [before, status] = await Promise.all([runCli(["threads"], { cwd: elsewhere }), runCli(["status", "--json"], { cwd: embeddedCwd })]);
    expect(before.code).toBe(3);
    expect(firstLine(before)).toMatch(/No embedded database in .*\.langgraph-pg/);
    expect(existsSync(join(elsewhere, ".langgraph-pg"))).toBe(false);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ database: "embedded database in ./.langgraph-pg", state: "up-to-date" });
  });

  it("with NODE_ENV=production and no database named, refuses (exit 2), saying what to set; creates nothing; --data-dir asks for it", async () => {
    const cwd = tempDir();
    const production = { env: { NODE_ENV: "production" }, cwd };
    const refused = await runCli(["migrate"], production);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `langgraph-checkpoint-pg migrate: NODE_ENV is production and no database URL is set: refusing to fall back to the embedded database in ${join(cwd, ".langgraph-pg")}, ` +
        "a local folder that a redeploy loses and other instances never see. Set DATABASE_URL to your Postgres server, or ask for the embedded database explicitly: " +
        "--data-dir .langgraph-pg (or another folder).\n",
    );
    expect(existsSync(join(cwd, ".langgraph-pg"))).toBe(false);
    // The store's migrations follow the same rule, with the same words.
    for (const store of ["--store", "--store-only"]) {
      const storeRefused = await runCli(["migrate", store, "--no-adopt-store"], production);
      expect(storeRefused.code, store).toBe(2);
      expect(storeRefused.stderr, store).toBe(refused.stderr);
      expect(existsSync(join(cwd, ".langgraph-pg")), store).toBe(false);
    }
    const asked = await runCli(["migrate", "--data-dir", ".langgraph-pg"], production);
    expect(asked.code, asked.stderr).toBe(0);
    expect(asked.stderr).toBe("");
    // Named explicitly, the same folder is no fallback: no notice either.
    expect((await runCli(["status", "--data-dir", ".langgraph-pg"], { cwd })).stderr).toBe("");
    // Elsewhere migrate --store falls back, and says so once for both tracks.
    const both = await runCli(["migrate", "--store", "--no-adopt-store"], { cwd: tempDir() });
    expect(both.code, both.stderr).toBe(0);
    expect(both.stdout).toMatch(/Migrated the store in schema "public" in embedded database in \.\/\.langgraph-pg: applied 0000_store_init/);
    expect(both.stderr).toBe(
      "langgraph-checkpoint-pg: no --database-url and no DATABASE_URL: using the embedded database in ./.langgraph-pg (created now); " +
        "set DATABASE_URL to use a Postgres server, or pass --data-dir .langgraph-pg to choose this one without this line\n",
    );
  });

  it("a second process on the folder gets exit 4 naming the holder; a killed holder's lock is recovered", async () => {
    const dataDir = embeddedDir();
    // Another process holds the folder open.
    const holder = spawn(
      process.execPath,
      ["--import", "tsx", "-e", `import(${JSON.stringify(join(ROOT, "src/db/embedded.ts"))}).then((m) => m.openEmbedded(${JSON.stringify(dataDir)})).then(() => { console.log("held"); setInterval(() => {}, 1000); })`],
      { cwd: ROOT },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout.on("data", (d: Buffer) => d.toString().includes("held") && resolve());
        holder.on("exit", (code) => reject(new Error(`holder exited early (${code})`)));
      });
      const [status, imp] = await Promise.all([runCli(["status", "--data-dir", dataDir]), runCli(["import", "--data-dir", dataDir], { input: "" })]);
      for (const r of [status, imp]) {
        expect(r.code).toBe(4);
        expect(firstLine(r)).toMatch(new RegExp(`in use by process ${holder.pid} on `));
      }
    } finally {
      holder.removeAllListeners("exit");
      const dead = new Promise((r) => holder.on("exit", r));
      holder.kill("SIGKILL");
      await dead;
    }
    // SIGKILL left its lock file behind: the next process takes it over.
    expect(existsSync(join(dataDir, "lock.json"))).toBe(true);
    const after = await runCli(["threads", "--data-dir", dataDir]);
    expect(after.code).toBe(0);
  });
});
