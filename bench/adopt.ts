/**
 * How long an adoption holds the official saver's writers (not part of `npm run bench`):
 *
 *   DATABASE_URL=postgres://... node --import tsx bench/adopt.ts [--checkpoints=100000]
 *
 * Fills the official JS saver's tables (its own setup()) in a fresh database with N checkpoints on
 * 1,000 threads, two 200-byte JSON blobs and one pending write each, then times
 * `migrate({ adopt })`: the copy and the triggers, one transaction, during which official writers
 * wait (their reads do not). It prints the size of the official tables and the time.
 */
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import { migrate } from "../src/index.js";
import { createDatabase, dropAll, startServer } from "./db.js";

const arg = process.argv.find((a) => a.startsWith("--checkpoints="));
const n = arg ? Number(arg.slice("--checkpoints=".length)) : 100_000;
if (!Number.isSafeInteger(n) || n < 1) throw new Error("--checkpoints=<positive integer>");

const server = await startServer();
try {
  const db = await createDatabase(server.adminUrl, "adopt");
  const pool = db.pool();
  await new OfficialSaver(pool).setup();
  // Rows as the official saver stores them, written in bulk (its put would take minutes).
  await pool.query(
    `INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
     SELECT 't' || (i % 1000), '', lpad(i::text, 12, '0'), NULL,
            jsonb_build_object('v', 4, 'id', lpad(i::text, 12, '0'), 'ts', '2024-07-01T10:00:00.000Z',
                               'channel_versions', jsonb_build_object('a', i, 'b', i), 'versions_seen', '{}'::jsonb),
            '{"source":"loop","step":1}'
       FROM generate_series(1, $1::int) i`,
    [n],
  );
  await pool.query(
    `INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
     SELECT 't' || (i % 1000), '', c, i::text, 'json', convert_to(repeat('x', 200), 'UTF8') FROM generate_series(1, $1::int) i, unnest(ARRAY['a', 'b']) c`,
    [n],
  );
  await pool.query(
    `INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
     SELECT 't' || (i % 1000), '', lpad(i::text, 12, '0'), 'task', 0, 'a', 'json', convert_to('"v"', 'UTF8') FROM generate_series(1, $1::int) i`,
    [n],
  );
  await pool.query("VACUUM ANALYZE checkpoints, checkpoint_blobs, checkpoint_writes");
  const { rows } = await pool.query(
    "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) AS size FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'",
  );
  const started = performance.now();
  await migrate({ pool, schema: "langgraph", adopt: { from: "public" } });
  const seconds = (performance.now() - started) / 1000;
  console.log(`${server.source}: adopted ${n} checkpoints, ${2 * n} blobs, ${n} writes (${rows[0].size}) in ${seconds.toFixed(1)} s`);
} finally {
  await dropAll();
  await server.stop();
}
