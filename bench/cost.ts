/**
 * `npm run bench -- --cost`: what one 10-node invoke and one put cost, per saver (ours and the
 * official one), beside the floor of a single-row INSERT (issue 40): the CPU time of the backends
 * that served them, the WAL bytes they wrote, and this process's CPU time (serialization, the
 * driver, LangGraph). Each saver runs on a pool of one connection, so its one backend does all of
 * the work and is read alone; batches alternate between the savers (A B B A ...), nothing else
 * writes meanwhile, and the medians of the per-batch figures are printed with their spread. A batch
 * is 40 invokes, 200 puts or 1,000 INSERTs: backend CPU time is counted in 10 ms ticks.
 *
 * The backends' CPU comes from /proc/<pid>/stat, so it is read only when the server runs on this
 * machine as seen by this process (DATABASE_URL naming a local server; not a container, whose pids
 * differ): elsewhere that column says so. WAL bytes come from pg_current_wal_insert_lsn() and need
 * no access to the server's machine.
 */
import { readFileSync } from "node:fs";
import type pg from "pg";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { startServer, dropAll } from "./db.js";
import { tenNodeGraph, type Durability } from "./graph.js";
import { createPgSaver, createRawFloor, loadOurs, memorySaver, putReplayValues, saverOn, type PgSaverName } from "./savers.js";
import { median } from "./stats.js";
import { ChatThread } from "./workload.js";

const log = (msg: string) => console.error(`[bench cost] ${msg}`);
const TICK_MS = 10; // Linux's USER_HZ is 100 on every platform Node runs on.

/** The CPU milliseconds backend `pid` has used so far, or undefined when its /proc entry is not there to read (a server elsewhere). */
async function backendCpu(pid: number): Promise<number | undefined> {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces, inside parentheses): utime is the 14th field, stime the 15th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return undefined;
  }
}

async function backendPid(pool: pg.Pool): Promise<number> {
  return (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
}

async function walLsn(admin: pg.Pool): Promise<bigint> {
  const { rows } = await admin.query<{ b: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint::text AS b");
  return BigInt(rows[0]!.b);
}

interface Sample {
  cpuMs?: number;
  /** This process's CPU (the saver's serialization, the driver, LangGraph): user + system. */
  clientMs: number;
  walBytes: number;
}

/** Runs `op` `count` times on a pool of one connection; its backend's CPU and the WAL written, per operation. */
async function measure(admin: pg.Pool, pool: pg.Pool, pid: number, count: number, op: (i: number) => Promise<unknown>, offset: number): Promise<Sample> {
  const cpu0 = await backendCpu(pid);
  const wal0 = await walLsn(admin);
  const client0 = process.cpuUsage();
  for (let i = 0; i < count; i++) await op(offset + i);
  const client = process.cpuUsage(client0);
  const wal1 = await walLsn(admin);
  const cpu1 = await backendCpu(pid);
  // The pool's connection must be the one read: a pool of one that kept it.
  if ((await backendPid(pool)) !== pid) throw new Error("the pool replaced its connection during a batch: its CPU is not all read");
  return {
    cpuMs: cpu0 === undefined || cpu1 === undefined ? undefined : (cpu1 - cpu0) / count,
    clientMs: (client.user + client.system) / 1000 / count,
    walBytes: Number(wal1 - wal0) / count,
  };
}

/**
 * Where each saver's WAL goes, by table and index: one more batch of 20 invokes each, its WAL records
 * read back with pg_walinspect (PostgreSQL 15 and newer; needs the right to create the extension in
 * the floor's database, so it is skipped, saying why, where that is refused).
 */
async function walByRelation(admin: pg.Pool, runs: Map<string, { pool: pg.Pool; op: (i: number) => Promise<unknown> }>): Promise<void> {
  try {
    await admin.query("CREATE EXTENSION IF NOT EXISTS pg_walinspect");
  } catch (err) {
    console.log(`  (WAL by table skipped: pg_walinspect: ${err instanceof Error ? err.message : String(err)})`);
    return;
  }
  const count = 20;
  for (const name of ["ours", "official"]) {
    const r = runs.get(name)!;
    // The filenodes of this saver's database, to name the relations the WAL records touch.
    const names = new Map((await r.pool.query<{ f: string; rel: string }>("SELECT relfilenode::text AS f, relname AS rel FROM pg_class WHERE relfilenode <> 0")).rows.map((x) => [x.f, x.rel]));
    const lsn = async () => (await admin.query<{ l: string }>("SELECT pg_current_wal_insert_lsn()::text AS l")).rows[0]!.l;
    const start = await lsn();
    for (let i = 0; i < count; i++) await r.op(2_000_000 + i);
    const { rows } = await admin.query<{ rel: string | null; n: number; bytes: number }>(
      `SELECT substring(block_ref from 'rel \\d+/\\d+/(\\d+)') AS rel, count(*)::int AS n, sum(record_length)::int AS bytes
         FROM pg_get_wal_records_info($1, $2) GROUP BY 1 ORDER BY 3 DESC`,
      [start, await lsn()],
    );
    const parts = rows.map((x) => `${x.rel ? (names.get(x.rel) ?? "other") : "no table (commits)"} ${Math.round(x.bytes / count)} B (${(x.n / count).toFixed(1)} records)`);
    console.log(`  ${name} WAL by relation, per invoke: ${parts.join(", ")}`);
  }
}

/** The runs of {@link putReplays}. */
const STATEMENT = "ours: its put statement, raw pg";
const UNCHECKED = "ours: the same rows, unchecked";

/**
 * Our put's statement as `saver` sends it for one of the benchmark's puts (captured from its pool's one
 * connection), and two ways to send it again on `pool` with a fresh checkpoint id, parent and versions
 * each time (each call a new checkpoint, its blob rows all new): `STATEMENT`, the very statement; and
 * `UNCHECKED`, the same rows (the head moved, the blob rows, the checkpoint row) written by plain
 * INSERTs that check nothing: no tombstone gate, no head or parent check, no counts.
 */
async function putReplays(pool: pg.Pool, saver: BaseCheckpointSaver, saverPool: pg.Pool): Promise<{ pool: pg.Pool; ops: Record<string, (i: number) => Promise<unknown>> }> {
  const thread = new ChatThread(saver, "cost-capture", { remember: false });
  await thread.put(0);
  // The saver's pool keeps one connection: its statements are seen on it.
  const client = await saverPool.connect();
  const seen: { text: string; values: unknown[] }[] = [];
  const query = client.query.bind(client);
  (client as unknown as { query: unknown }).query = (q: unknown, ...rest: unknown[]) => {
    if (q && typeof q === "object" && "text" in q) seen.push(q as { text: string; values: unknown[] });
    return (query as (...a: unknown[]) => unknown)(q, ...rest);
  };
  client.release();
  await thread.put(1);
  (client as unknown as { query: unknown }).query = query;
  const put = seen.find((q) => /INSERT INTO .*checkpoint_heads/s.test(q.text));
  if (!put) throw new Error("the put's statement was not seen");
  const schema = /INSERT INTO ("?[^.\s]+"?)\.checkpoint_heads/.exec(put.text)![1]!;
  // $n of UNCHECKED -> $n of the put (src/saver/sql/put.ts names them).
  const from = [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 18, 19, 15, 16, 17, 20, 21];
  const unchecked = `WITH move AS (
  INSERT INTO ${schema}.checkpoint_heads AS h (thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks, moved_at, row_version)
  VALUES ($1, $2, $3, $16, pg_catalog.now(), 1)
  ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE
     SET checkpoint_id = EXCLUDED.checkpoint_id, has_pending_tasks = EXCLUDED.has_pending_tasks, moved_at = EXCLUDED.moved_at, row_version = h.row_version + 1
), new_blobs AS (
  INSERT INTO ${schema}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, p.channel, p.version, p.type, CASE WHEN p.len < 0 THEN NULL ELSE pg_catalog.substring($13::bytea, p.off + 1, p.len) END
    FROM ROWS FROM (pg_catalog.unnest($8::text[]), pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[]),
                    pg_catalog.unnest($11::int[]), pg_catalog.unnest($12::int[])) AS p(channel, version, type, off, len)
)
INSERT INTO ${schema}.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw,
                                   ttl_seconds, state_version, has_pending_tasks, unversioned_type, unversioned_values)
VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $14, $15, $16, $17, $18)`;
  const statement = putReplayValues(put.values, "statement");
  const bare = putReplayValues(put.values, "unchecked");
  return {
    pool,
    ops: {
      [STATEMENT]: () => pool.query({ name: "cost_put", text: put.text, values: statement() }),
      [UNCHECKED]: () => {
        const values = bare();
        return pool.query({ name: "cost_unchecked", text: unchecked, values: from.map((n) => values[n - 1]) });
      },
    },
  };
}

const spread = (xs: number[], digits: number) => `${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)}`;

export async function costMain(args: { rounds: number }): Promise<number> {
  const ours = await loadOurs();
  if (!ours) throw new Error("src/ does not load");
  const server = await startServer();
  log(`postgres: ${server.source}`);
  // LangGraph's default durability: what most graphs run with.
  const durability: Durability = "async";
  try {
    const floor = await createRawFloor(server.adminUrl);
    const admin = floor.db.pool({ max: 1 });
    const runs = new Map<string, { pool: pg.Pool; pid: number; op: (i: number) => Promise<unknown>; per: number; samples: Sample[] }>();
    for (const name of ["ours", "official"] as PgSaverName[]) {
      const handle = await createPgSaver(name, server.adminUrl, `cost_${name}`);
      // One connection, kept: its backend does all of this saver's work.
      const pool = handle.db.pool({ max: 1, idleTimeoutMillis: 0 });
      const graph = tenNodeGraph(saverOn(name, pool));
      runs.set(name, { pool, pid: await backendPid(pool), op: (i) => graph.invoke(`cost-${i}`, durability), per: 40, samples: [] });
      // One put (the loopback benchmark's: 5 channels, 2 changed) on a thread of its own, on the same connection.
      const thread = new ChatThread(saverOn(name, pool), `cost-put-${name}`, { remember: false });
      runs.set(`${name}: put`, { pool, pid: await backendPid(pool), op: (i) => thread.put(i), per: 200, samples: [] });
      if (name === "ours") {
        // Where our put's cost goes, each on a connection of its own: its very statement sent with raw pg, and the
        // same rows written by a statement that checks nothing.
        const replay = await putReplays(handle.db.pool({ max: 1, idleTimeoutMillis: 0 }), saverOn(name, pool), pool);
        for (const [label, op] of Object.entries(replay.ops)) runs.set(label, { pool: replay.pool, pid: await backendPid(replay.pool), op, per: 200, samples: [] });
        // The same put with whole values, on a connection of its own: what storing lists by their elements costs the client.
        const wholePool = handle.db.pool({ max: 1, idleTimeoutMillis: 0 });
        const whole = new ChatThread(new ours.PostgresSaver(wholePool, { schema: "public", elementStorage: false }), "cost-put-whole", { remember: false });
        runs.set("ours, whole: put", { pool: wholePool, pid: await backendPid(wholePool), op: (i) => whole.put(i), per: 200, samples: [] });
      }
    }
    const insertPool = floor.db.pool({ max: 1, idleTimeoutMillis: 0 });
    const payload = Buffer.alloc(200, 7);
    runs.set("pg floor: INSERT", {
      pool: insertPool,
      pid: await backendPid(insertPool),
      op: (i) => insertPool.query({ name: "cost_insert", text: "INSERT INTO floor_insert (k, v) VALUES ($1, $2)", values: [`cost-${i}`, payload] }),
      per: 1000,
      samples: [],
    });
    // MemorySaver's put of the same checkpoints: the client's CPU a put costs with no database (serialization, copies).
    const memory = new ChatThread(memorySaver(), "cost-put-memory", { remember: false });
    runs.set("memory: put", { pool: insertPool, pid: await backendPid(insertPool), op: (i) => memory.put(i), per: 200, samples: [] });
    const names = [...runs.keys()];
    // Warm-up: plans prepared, caches filled, the graph compiled.
    for (const r of runs.values()) await measure(admin, r.pool, r.pid, 5, r.op, 1_000_000);
    for (let round = 0; round < args.rounds * 2; round++) {
      const order = round % 2 === 0 ? names : [...names].reverse();
      for (const name of order) {
        const r = runs.get(name)!;
        r.samples.push(await measure(admin, r.pool, r.pid, r.per, r.op, round * r.per));
      }
    }
    const insert = runs.get("pg floor: INSERT")!.samples;
    const insertWal = median(insert.map((s) => s.walBytes));
    const insertCpu = insert.every((s) => s.cpuMs !== undefined) ? median(insert.map((s) => s.cpuMs!)) : undefined;
    const insertClient = median(insert.map((s) => s.clientMs));
    console.log(`database cost per 10-node invoke (durability ${durability}) and per put; ${args.rounds * 2} batches each, alternating; median [min-max]`);
    console.log(
      `  pg floor: one single-row INSERT: WAL ${insertWal.toFixed(0)} B, backend CPU ${insertCpu === undefined ? "n/a" : `${insertCpu.toFixed(3)} ms`}, client CPU ${insertClient.toFixed(3)} ms`,
    );
    const per: Record<string, { wal: number; cpu?: number; client: number }> = {};
    for (const name of ["ours", "official", "ours: put", "official: put"]) {
      const s = runs.get(name)!.samples;
      const wal = s.map((x) => x.walBytes);
      const cpu = s.every((x) => x.cpuMs !== undefined) ? s.map((x) => x.cpuMs!) : undefined;
      const client = s.map((x) => x.clientMs);
      per[name] = { wal: median(wal), cpu: cpu && median(cpu), client: median(client) };
      const digits = name.endsWith("put") ? 3 : 2;
      console.log(
        `  ${name.padEnd(13)} WAL ${median(wal).toFixed(0)} B [${spread(wal, 0)}] (${(median(wal) / insertWal).toFixed(1)} INSERTs)` +
          `, backend CPU ${cpu ? `${median(cpu).toFixed(digits)} ms [${spread(cpu, digits)}] (${insertCpu ? `${(median(cpu) / insertCpu).toFixed(1)} INSERTs` : "-"})` : "n/a (the server's processes are not on this machine)"}` +
          `, client CPU ${median(client).toFixed(digits)} ms [${spread(client, digits)}]`,
      );
    }
    const ratio = (a?: number, b?: number) => (a === undefined || b === undefined || b === 0 ? "n/a" : `${(a / b).toFixed(2)}x`);
    for (const [what, a, b] of [["invoke", "ours", "official"], ["put", "ours: put", "official: put"]] as const) {
      console.log(
        `  ours / official, per ${what}: WAL ${ratio(per[a]!.wal, per[b]!.wal)}, backend CPU ${ratio(per[a]!.cpu, per[b]!.cpu)}, client CPU ${ratio(per[a]!.client, per[b]!.client)}`,
      );
    }
    const client = (name: string) => median(runs.get(name)!.samples.map((x) => x.clientMs)).toFixed(3);
    const backend = (name: string) => {
      const s = runs.get(name)!.samples;
      return s.every((x) => x.cpuMs !== undefined) ? `${median(s.map((x) => x.cpuMs!)).toFixed(3)} ms` : "n/a";
    };
    console.log(
      `  where ours' put goes, backend CPU: the same rows written unchecked ${backend(UNCHECKED)}, its statement sent with raw pg ${backend(STATEMENT)}, ` +
        `ours ${backend("ours: put")}, single-row INSERT ${insertCpu === undefined ? "n/a" : `${insertCpu.toFixed(3)} ms`}; ` +
        `client CPU: its statement sent with raw pg ${client(STATEMENT)} ms (the driver), ours ${client("ours: put")} ms`,
    );
    console.log(
      `  client CPU per put: single-row INSERT ${insertClient.toFixed(3)} ms, MemorySaver ${client("memory: put")} ms, ` +
        `ours ${client("ours: put")} ms (whole values: ${client("ours, whole: put")} ms), official ${client("official: put")} ms`,
    );
    await walByRelation(admin, runs);
    return 0;
  } finally {
    await dropAll();
    await server.stop();
  }
}
