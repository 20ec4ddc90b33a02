/**
 * LangGraph's own graph tests (the langgraph-suite tool: `run.sh <saver file>`) against this saver on
 * Citus: each database the suite creates on the coordinator is created on the workers too (the suite
 * copies template0, which Citus does not propagate; the workers' copies outlive the run), made a
 * Citus database, migrated and distributed as docs/scaling-out.md says (test/helpers/citus.ts).
 *
 * @example
 * ```bash
 * DATABASE_URL="$(scripts/citus-cluster.sh)" PROJECT_DIR="$PWD" LG_RUNTIME=both ../shared/tools/langgraph-suite/run.sh "$PWD/test/citus/langgraph-saver.ts"
 * ```
 */
import pg from "pg";
import { PostgresSaver } from "../../src/index.js";
import { citusDatabase, runOn, workers } from "../helpers/citus.js";

export const name = "project-postgres-citus";

export async function createSaver(connectionString: string): Promise<PostgresSaver> {
  const database = new URL(connectionString).pathname.slice(1);
  const adminUrl = new URL(connectionString);
  adminUrl.pathname = "/postgres";
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  try {
    for (const w of await workers(admin, adminUrl.toString())) await runOn(w.url, `CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    await citusDatabase(admin, connectionString, database);
  } finally {
    await admin.end();
  }
  return PostgresSaver.fromConnString(connectionString);
}

export async function teardown(saver: PostgresSaver): Promise<void> {
  await saver.end();
}
