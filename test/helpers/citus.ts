/**
 * TEST_CITUS (`npm run test:citus`, docs/scaling-out.md "On Citus"): TEST_DATABASE_URL names a Citus
 * coordinator, and each test database is made a Citus database (the coordinator creates it on every
 * node; the extension and the nodes registered in it), then migrated (`public`: the saver's tables and
 * the store's) and distributed by the SQL block of docs/scaling-out.md, as a user runs it. A test that
 * migrates another schema gets plain tables on the coordinator there.
 */
import pg from "pg";
import { migrate, migrateStore } from "../../src/index.js";
import { docBlocks } from "./readme.js";

export const testCitus = (): boolean => process.env.TEST_CITUS === "1";

/**
 * SQL: the backends of the current database waiting on a lock (pid, application_name, query). On
 * Citus, the coordinator's backends whose work waits on any node (a statement sent to a worker
 * waits there, where the coordinator's pg_stat_activity does not show it).
 */
export function lockWaitingSql(): string {
  return testCitus()
    ? `(SELECT DISTINCT c.pid, c.application_name, c.query FROM pg_catalog.citus_stat_activity w
         JOIN pg_catalog.citus_stat_activity c ON c.global_pid = w.global_pid AND NOT c.is_worker_query
        WHERE w.datname = pg_catalog.current_database() AND w.wait_event_type = 'Lock')`
    : "(SELECT pid, application_name, query FROM pg_catalog.pg_stat_activity WHERE datname = pg_catalog.current_database() AND wait_event_type = 'Lock')";
}

/** What CREATE DATABASE and DROP DATABASE need on the coordinator to reach the workers. */
export const CITUS_DATABASE_PROPAGATION = "SET citus.enable_create_database_propagation = on";

/** The distribution block of docs/scaling-out.md, for the schema `public` of the database `database`: its statements, each run alone as psql runs them. */
export function distributionSql(database: string): string[] {
  const block = docBlocks("docs/scaling-out.md").find((b) => b.lang === "sql" && b.code.includes("create_distributed_table"));
  if (!block) throw new Error("docs/scaling-out.md: no SQL block with create_distributed_table");
  const sql = block.code.replace(/\bagents\./g, "public.").replace(/\bDATABASE app\b/g, `DATABASE ${pg.escapeIdentifier(database)}`);
  return sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, "").trim())
    .filter((s) => s !== "");
}

/**
 * The store's lines of that block, for the store migrated into `schema` (a test's own): its tables
 * distributed by namespace, as a user distributes them.
 */
export function storeDistributionSql(schema: string): string[] {
  return distributionSql("unused")
    .filter((s) => /store_item|checkpointer_store_migrations/.test(s))
    .map((s) => s.replace(/\bpublic\./g, `${schema}.`));
}

/**
 * Makes the new database `name` (created on every node already) a Citus database, migrated and
 * distributed. One at a time across the run's workers (an advisory lock on the admin database):
 * `citus_add_node` syncs the role to the worker, and two at once fail there ("tuple concurrently
 * updated" on the role's row).
 */
export async function citusDatabase(admin: pg.Client, url: string, name: string): Promise<void> {
  await admin.query("SELECT pg_advisory_lock(hashtext('langgraph-checkpoint-pg tests: a Citus database'))");
  try {
    await setUp(admin, url, name);
  } finally {
    await admin.query("SELECT pg_advisory_unlock(hashtext('langgraph-checkpoint-pg tests: a Citus database'))");
  }
}

interface Node {
  nodename: string;
  nodeport: number;
}

/** The cluster's workers (as the admin database's metadata names them), each with `url` pointed at it. */
export async function workers(admin: pg.Client, url: string): Promise<(Node & { url: string })[]> {
  const { rows } = await admin.query<Node>("SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid");
  return rows.map((w) => {
    const at = new URL(url);
    at.hostname = w.nodename;
    at.port = String(w.nodeport);
    return { ...w, url: at.toString() };
  });
}

/** Runs `sql` once on the database `url` names. */
export async function runOn(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function setUp(admin: pg.Client, url: string, name: string): Promise<void> {
  const nodes = await workers(admin, url);
  const { rows: coordinator } = await admin.query<Node>("SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0");
  for (const w of nodes) await runOn(w.url, "CREATE EXTENSION IF NOT EXISTS citus");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("CREATE EXTENSION IF NOT EXISTS citus");
    const host = coordinator[0] ?? { nodename: new URL(url).hostname, nodeport: Number(new URL(url).port || 5432) };
    await client.query("SELECT citus_set_coordinator_host($1, $2)", [host.nodename, host.nodeport]);
    for (const w of nodes) await client.query("SELECT citus_add_node($1, $2)", [w.nodename, w.nodeport]);
  } finally {
    await client.end();
  }
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await migrate({ pool });
    await migrateStore({ pool });
    for (const statement of distributionSql(name)) await pool.query(statement);
  } finally {
    await pool.end();
  }
}
