/**
 * One Postgres server for the whole run (DATABASE_URL, else a testcontainers
 * PostgreSqlContainer with image TEST_PG_IMAGE, default postgres:15-alpine), and a
 * fresh database per saver and purpose: `bench_<label>_<rand>`, dropped at the end.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { maskUrl } from "../src/cli/mask.js";

export interface Server {
  adminUrl: string;
  source: string;
  stop(): Promise<void>;
}

export async function startServer(): Promise<Server> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) {
    const c = new pg.Client({ connectionString: fromEnv });
    await c.connect();
    await c.end();
    return { adminUrl: fromEnv, source: `DATABASE_URL ${maskUrl(fromEnv)}`, stop: async () => {} };
  }
  const image = process.env.TEST_PG_IMAGE ?? "postgres:15-alpine";
  const { getContainerRuntimeClient } = await import("testcontainers");
  await getContainerRuntimeClient().catch((err: unknown) => {
    throw new Error(
      `DATABASE_URL is not set and no container runtime is reachable for testcontainers (${err instanceof Error ? err.message : String(err)}). ` +
        "Set DATABASE_URL to an admin URL of a Postgres server, or start Docker.",
    );
  });
  const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
  const container = await new PostgreSqlContainer(image).start();
  return {
    adminUrl: container.getConnectionUri(),
    source: `testcontainers ${image}`,
    stop: async () => {
      await container.stop();
    },
  };
}

export interface Database {
  name: string;
  url: string;
  /** Pools made through `pool()` are ended by `drop()`. */
  pool(options?: pg.PoolConfig): pg.Pool;
  drop(): Promise<void>;
}

const created: Database[] = [];

export async function createDatabase(adminUrl: string, label: string): Promise<Database> {
  const name = `bench_${label.toLowerCase().replace(/[^a-z0-9]+/g, "_").slice(0, 30)}_${randomBytes(4).toString("hex")}`;
  await withAdmin(adminUrl, (c) => c.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`));
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const pools: pg.Pool[] = [];
  let dropped = false;
  const db: Database = {
    name,
    url,
    pool(options = {}) {
      const p = new pg.Pool({ connectionString: url, max: 10, ...options });
      // Idle clients killed by DROP DATABASE ... WITH (FORCE) must not crash the run.
      p.on("error", () => {});
      pools.push(p);
      return p;
    },
    async drop() {
      if (dropped) return;
      dropped = true;
      await Promise.allSettled(pools.map((p) => p.end()));
      await withAdmin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`));
    },
  };
  created.push(db);
  return db;
}

export async function dropAll(): Promise<void> {
  for (const db of created.splice(0)) {
    await db.drop().catch((err: unknown) => console.error(`[bench] could not drop ${db.name}: ${String(err)}`));
  }
}

async function withAdmin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** host and port of a postgres:// URL (for the counting proxy). */
export function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || "127.0.0.1", port: Number(u.port || 5432) };
}
