/**
 * The CLI, spawned as a real process against a real Postgres (and PGlite as
 * another database to import into): every command, bad arguments, exit codes,
 * password masking, export -> import into another schema and another database
 * with identical state and history. The embedded database's own (the default
 * folder, NODE_ENV=production, two processes on one folder):
 * embedded.long.test.ts (`npm run test:long`).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Command, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import type { RunnableConfig } from "@langchain/core/runnables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PGlite } from "@electric-sql/pglite";
import { latestVersion, loadMigrations, migrate, PostgresSaver, type CompactResult, type PruneResult } from "../../src/index.js";
import { migrationNumber } from "../../src/errors.js";
import { withTestDatabase } from "../helpers/db.js";
import { addressGraph, nestedGraph } from "../helpers/graphs.js";
import { firstLine, migrateEmbeddedDefault, runCli, tempDirs } from "../helpers/cli.js";
import { longText } from "../helpers/checkpoints.js";

const db = withTestDatabase("cli");
const tempDir = tempDirs("lgpg-cli-");

/**
 * The embedded database the export is imported into, created by `migrate` in
 * the default place (./.langgraph-pg of a working directory).
 */
let embeddedDir: string;
beforeAll(async () => {
  embeddedDir = await migrateEmbeddedDefault(tempDir());
});

const cfg = (thread_id: string, extra: Record<string, unknown> = {}): RunnableConfig => ({ configurable: { thread_id, ...extra } });
/** The command line's database flags for schema `schema` of the test database. */
const pg = (schema: string) => ["--database-url", db.url, "--schema", schema];

async function schemaExists(name: string): Promise<boolean> {
  return (await db.pool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [name])).rowCount === 1;
}

/**
 * Every row of the three tables of a schema, every column, in key order
 * (timestamps rendered in UTC), and which checkpoint heads each lineage (an
 * import creates the head rows afresh: their row version and time differ).
 */
async function rows(query: (sql: string) => Promise<{ rows: unknown[] }>, schema: string) {
  await query("SET TimeZone = 'UTC'");
  const read = async (table: string, order: string) =>
    ((await query(`SELECT to_jsonb(x) AS r FROM "${schema}".${table} x ORDER BY ${order}`)).rows as { r: unknown }[]).map((r) => r.r);
  return {
    checkpoints: await read("checkpoints", "thread_id, checkpoint_ns, checkpoint_id"),
    writes: await read("checkpoint_writes", "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"),
    blobs: await read("checkpoint_blobs", "thread_id, checkpoint_ns, channel, version"),
    heads: (
      await query(`SELECT thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks FROM "${schema}".checkpoint_heads ORDER BY thread_id, checkpoint_ns`)
    ).rows,
  };
}

/** rows() on one pooled client of the test database (SET stays on that session). */
async function pgRows(schema: string) {
  const client = await db.pool.connect();
  try {
    return await rows((q) => client.query(q), schema);
  } finally {
    await client.query("RESET TimeZone");
    client.release();
  }
}

/** What LangGraph reads back for a thread: state (with subgraphs) and the full history. */
async function readBack(saver: PostgresSaver, thread: string, graph: (s: PostgresSaver) => ReturnType<typeof addressGraph> | ReturnType<typeof nestedGraph>) {
  const g = graph(saver);
  const plain = (s: Awaited<ReturnType<typeof g.getState>>) => ({
    values: s.values,
    next: s.next,
    config: s.config,
    parentConfig: s.parentConfig,
    metadata: s.metadata,
    createdAt: s.createdAt,
    tasks: s.tasks.map((t) => ({ id: t.id, name: t.name, interrupts: t.interrupts, state: t.state })),
  });
  const state = plain(await g.getState(cfg(thread), { subgraphs: true }));
  const history = [];
  for await (const s of g.getStateHistory(cfg(thread))) history.push(plain(s));
  return JSON.parse(JSON.stringify({ state, history })) as unknown;
}

describe("CLI against Postgres", () => {
  let source: PostgresSaver;
  let forkId: string;

  beforeAll(async () => {
    await migrate({ pool: db.pool, schema: "src" });
    source = new PostgresSaver(db.pool, { schema: "src" });
    // The article's thread, then a fork: a state update on its second checkpoint.
    const graph = addressGraph(source);
    await graph.invoke({}, cfg("12345"));
    const ids: string[] = [];
    for await (const s of graph.getStateHistory(cfg("12345"))) ids.unshift(s.config.configurable!.checkpoint_id as string);
    const forked = await graph.updateState(cfg("12345", { checkpoint_id: ids[1] }), { name: "forked" });
    forkId = forked.configurable!.checkpoint_id as string;
    // A subgraph stopped at an interrupt: two namespaces, pending interrupt writes.
    await nestedGraph(source).invoke({ topic: "pg" }, cfg("nested"));
    // Values JSON cannot hold, and metadata JSONB cannot (NUL): raw bytes must round-trip.
    const odd = await source.put(
      cfg("odd", { checkpoint_ns: "" }),
      {
        v: 4,
        id: "00000000-0000-6000-8000-000000000001",
        ts: new Date(0).toISOString(),
        channel_values: { set: new Set([1, 2]), when: new Date(86_400_000), big: 2n ** 70n, bytes: new Uint8Array([0, 255]), nan: Number.NaN, list: [] },
        channel_versions: { set: "1", when: "1", big: "1", bytes: "1", nan: "1", list: "1" },
        versions_seen: {},
      },
      { source: "input", step: -1, parents: {}, note: "nul\u0000inside" } as never,
      { set: "1", when: "1", big: "1", bytes: "1", nan: "1", list: "1" },
    );
    await source.putWrites(odd, [["set", new Map([["k", -0]])]], "task-1", "path");
  });

  afterAll(async () => {
    await source?.end();
  });

  it("prints --help for the CLI and every command, exit 0", async () => {
    const commands = ["migrate", "status", "threads", "history", "show", "export", "import", "prune", "compact"];
    const runs = await Promise.all([runCli(["--help"]), ...commands.map((c) => runCli([c, "--help"]))]);
    expect(runs.map((r) => r.code)).toEqual(runs.map(() => 0));
    expect(runs[0]!.stdout).toMatch(/Usage: langgraph-checkpoint-pg <command>/);
    commands.forEach((c, i) => {
      const out = runs[i + 1]!.stdout;
      expect(out).toContain(`Usage: langgraph-checkpoint-pg ${c}`);
      expect(out).toContain("--database-url <url>");
      expect(out).toMatch(/Exit codes:[\s\S]*2 {2}bad usage[\s\S]*3 {2}schema not migrated[\s\S]*4 {2}the embedded data folder/);
    });
  });

  it("rejects bad usage with one clear line naming the flag, exit 2, and writes nothing", async () => {
    const dataDir = join(tempDir(), "never-created");
    const cases: [string[], RegExp][] = [
      [["frobnicate"], /unknown command "frobnicate"/],
      [["migrate", ...pg("bad_1"), "--bogus"], /unknown option --bogus/],
      [["migrate", ...pg("bad_2"), "--dry-run=yes"], /option --dry-run takes no value/],
      [["migrate", "--data-dir", dataDir, "--frobnicate"], /unknown option --frobnicate/],
      [["status", "--schema"], /option --schema needs a value/],
      [["status", "--schema", "pg_nope", "--database-url", db.url], /--schema: names starting with pg_ are reserved/],
      [["threads", ...pg("src"), "--limit", "0"], /--limit: expected a positive integer, got "0"/],
      [["compact", ...pg("src"), "--batch-size", "0"], /--batch-size: expected a positive integer, got "0"/],
      [["compact", ...pg("src"), "--thread", ""], /--thread/],
      [["compact", ...pg("src"), "extra"], /unexpected argument "extra"/],
      [["history", ...pg("src")], /missing argument <thread>/],
      [["show", ...pg("src"), "a", "b", "c"], /unexpected argument "c"/],
      [["export", ...pg("src")], /missing argument <thread> \(or --all\)/],
      [["export", ...pg("src"), "x", "--all"], /give thread ids or --all, not both/],
      [["status", "--database-url", db.url, "--data-dir", dataDir], /--database-url and --data-dir exclude each other/],
      [["status", "--database-url", "mysql://x"], /--database-url: expected a postgres:\/\/ or postgresql:\/\/ URL/],
      [["history", ...pg("src"), "x".repeat(600)], /<thread>: is 600 bytes long; the limit is 512 bytes/],
      [["import", ...pg("bad_3"), "a.jsonl", "b.jsonl"], /unexpected argument "b.jsonl"/],
      [["import", ...pg("bad_3"), "a.jsonl", "--keep-whole", "--module", "m.mjs"], /--module: only to store values by content, not with --keep-whole/],
      [["prune", ...pg("src")], /no retention rule: give --keep-last, --older-than, --idle-for, or --ttl/],
      [["prune", ...pg("src"), "--older-than", "3x", "--yes"], /--older-than: cannot parse "3x"/],
      [["prune", ...pg("src"), "--keep-last", "0", "--yes"], /--keep-last: expected a positive integer/],
      [["prune", ...pg("src"), "--ttl", "--no-ttl", "--yes"], /--ttl and --no-ttl exclude each other/],
    ];
    const runs = await Promise.all(cases.map(([args]) => runCli(args)));
    runs.forEach((r, i) => {
      expect({ args: cases[i]![0], code: r.code }).toEqual({ args: cases[i]![0], code: 2 });
      expect(firstLine(r)).toMatch(cases[i]![1]);
      expect(r.stderr).toMatch(/Usage: langgraph-checkpoint-pg .*--help/);
      expect(r.stdout).toBe("");
    });
    expect(await schemaExists("bad_1")).toBe(false);
    expect(await schemaExists("bad_2")).toBe(false);
    expect(await schemaExists("bad_3")).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
  });

  it("migrate: --dry-run prints the SQL and changes nothing; then applies once; status reports it", async () => {
    const dry = await runCli(["migrate", ...pg("fresh"), "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('CREATE TABLE "checkpoints"');
    const last = loadMigrations().at(-1)!.name;
    // Migrations are named as their files are: 0000_init ... (never by their 1-based count).
    expect(dry.stdout).toContain(`schema at no migration, this code: migration ${last}; ${latestVersion()} migration(s) pending`);
    expect(dry.stdout).toContain("\n-- migration 0000_init (recorded in");
    expect(await schemaExists("fresh")).toBe(false);

    const before = await runCli(["status", ...pg("fresh")]);
    expect(before.code).toBe(3);
    expect(before.stdout).toMatch(/migration\(s\) pending: run `npx langgraph-checkpoint-pg migrate --schema fresh` \(with the same --database-url\)/);
    expect(before.stdout).toMatch(/·\s+0000_init\s+pending/);

    const applied = await runCli(["migrate", ...pg("fresh"), "--json"]);
    expect(applied.code).toBe(0);
    expect(JSON.parse(applied.stdout)).toMatchObject({ schema: "fresh", fromVersion: 0, toVersion: latestVersion(), dryRun: false });
    const [again, status] = await Promise.all([runCli(["migrate", ...pg("fresh")]), runCli(["status", ...pg("src"), "--json"])]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`is up to date (migration ${last})`);
    expect(status.code).toBe(0);
    const s = JSON.parse(status.stdout);
    expect(s).toMatchObject({ schema: "src", state: "up-to-date", schemaVersion: latestVersion(), pending: [] });
    const counts = (await db.pool.query('SELECT (SELECT count(*) FROM src.checkpoints)::int AS c, (SELECT count(*) FROM src.checkpoint_blobs)::int AS b')).rows[0];
    expect(s.rows.checkpoints).toBe(counts.c);
    expect(s.rows.checkpoint_blobs).toBe(counts.b);
  });

  it("refuses a schema newer than the code with exit 3 (migrate, status, read commands)", async () => {
    await migrate({ pool: db.pool, schema: "future" });
    await db.pool.query(`INSERT INTO future.checkpointer_migrations (version, name, sha256) VALUES (${latestVersion() + 1}, '9999_future', 'x')`);
    const [m, s, t] = await Promise.all([runCli(["migrate", ...pg("future")]), runCli(["status", ...pg("future")]), runCli(["threads", ...pg("future")])]);
    expect([m.code, s.code, t.code]).toEqual([3, 3, 3]);
    // The numbers are the files' (the last shipped is migration N-1 of N), never the 1-based count.
    const [known, future] = [migrationNumber(latestVersion()), migrationNumber(latestVersion() + 1)];
    expect(firstLine(m)).toContain(`is at checkpointer migration ${future}, newer than this code knows (${known})`);
    expect(s.stdout).toMatch(/NEWER than this code/);
    expect(s.stdout).toMatch(/migration 9999_future \(this code: migration 0\d{3}_\w+\)/);
    expect(firstLine(t)).toMatch(/newer than this code knows/);
    const notMigrated = await runCli(["threads", ...pg("nothing_here")]);
    expect(notMigrated.code).toBe(3);
    expect(firstLine(notMigrated)).toContain(`has no checkpointer migration, this code needs migrations up to ${known}`);
    expect(firstLine(notMigrated)).toMatch(/Run the migrations first/);
  });

  it("threads, history (a fork as a tree), show (decoded), with --json", async () => {
    const [threads, tree, historyJson, show, showJson, showOld, missing] = await Promise.all([
      runCli(["threads", ...pg("src"), "--json"]),
      runCli(["history", "12345", ...pg("src")]),
      runCli(["history", "nested", ...pg("src"), "--json"]),
      runCli(["show", "12345", ...pg("src")]),
      runCli(["show", "odd", ...pg("src"), "--json"]),
      runCli(["show", "12345", forkId, ...pg("src"), "--json"]),
      runCli(["show", "12345", "no-such-checkpoint", ...pg("src")]),
    ]);
    expect(threads.code).toBe(0);
    const list = JSON.parse(threads.stdout) as { threadId: string; checkpoints: number; namespaces: number }[];
    expect(list.map((t) => t.threadId).sort()).toEqual(["12345", "nested", "odd"]);
    expect(list.find((t) => t.threadId === "12345")).toMatchObject({ checkpoints: 4, namespaces: 1 });
    expect(list.find((t) => t.threadId === "nested")!.namespaces).toBe(2);

    // The fork hangs off checkpoint 2; the main line runs to the head (the fork).
    expect(tree.code).toBe(0);
    const lines = tree.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/thread "12345", namespace "": 4 checkpoint\(s\), 1 branch point/);
    const shape = (l: string) => l.trim().replace(/[0-9a-f-]{36}/, "ID").replace(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/, "").replace(/\s+/g, " ").trim();
    expect(lines.slice(1).map(shape)).toEqual(["● ID input step -1", "● ID loop step 0", "├─● ID loop step 1", "● ID update step 1 ← head"]);
    expect(tree.stdout).toContain(forkId);

    const nested = JSON.parse(historyJson.stdout) as { lineages: { checkpointNs: string; checkpoints: unknown[] }[] };
    expect(nested.lineages.map((l) => l.checkpointNs)).toEqual(["", expect.stringMatching(/^sub:/)]);

    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/← head/);
    // The fork was made from checkpoint 2, before get_address ran: only the updated name.
    expect(show.stdout).toMatch(/name\s+\S+\s+msgpack\s+"forked"/);
    expect(show.stdout).not.toContain("Hyderabad");
    // LangGraph's `__pregel_tasks: []` has no version: shown apart, as stored with the checkpoint.
    expect(show.stdout).toMatch(/Channel values without a version[^\n]*\n\s+CHANNEL\s+VALUE\n\s+__pregel_tasks\s+\[\]/);

    const odd = JSON.parse(showJson.stdout);
    expect(odd.metadata).toEqual({ source: "input", step: -1, parents: {}, note: "nul\u0000inside" });
    const values = Object.fromEntries(odd.channels.map((c: { channel: string; value: unknown }) => [c.channel, c.value]));
    expect(values).toEqual({
      set: { $type: "Set", values: [1, 2] },
      when: { $type: "Date", value: "1970-01-02T00:00:00.000Z" },
      big: { $type: "bigint", value: String(2n ** 70n) },
      bytes: { $type: "Uint8Array", base64: "AP8=" },
      nan: { $type: "number", value: "NaN" },
      list: [],
    });
    expect(odd.pendingWrites).toEqual([
      { taskId: "task-1", idx: 0, channel: "set", type: "msgpack", taskPath: "path", value: { $type: "Map", entries: [["k", { $type: "number", value: "-0" }]] } },
    ]);

    expect(JSON.parse(showOld.stdout)).toMatchObject({
      checkpointId: forkId,
      isHead: true,
      metadata: { source: "update" },
      unversioned: [{ channel: "__pregel_tasks", value: [] }],
    });
    expect(missing.code).toBe(1);
    expect(firstLine(missing)).toMatch(/Checkpoint no-such-checkpoint of thread "12345" not found/);
  });

  it("export -> import into another schema and into PGlite: identical rows, state and history; the copy resumes", async () => {
    const file = join(tempDir(), "all.jsonl");
    const exported = await runCli(["export", "--all", ...pg("src"), "-o", file, "--decoded"]);
    expect(exported.code).toBe(0);
    const lines = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ kind: "header", format: "langgraph-checkpoint-pg/export", version: 1 });
    expect(lines.filter((l) => l.kind === "end").map((l) => l.thread_id).sort()).toEqual(["12345", "nested", "odd"]);
    // With --decoded, decoded values ride along with the exact bytes (and an import ignores them).
    expect(lines.find((l) => l.kind === "blob" && l.thread_id === "12345" && l.channel === "address")).toMatchObject({
      type: "msgpack",
      value: Buffer.from("\xb3Hyderabad residency", "latin1").toString("base64"),
      decoded: "Hyderabad residency",
    });
    // So do the values a checkpoint holds without a version, and the head flag.
    expect(lines.find((l) => l.kind === "checkpoint" && l.thread_id === "12345" && l.is_head)).toMatchObject({
      unversioned_type: "msgpack",
      unversioned_decoded: { __pregel_tasks: [] },
    });

    await migrate({ pool: db.pool, schema: "copy" });
    const dataDir = embeddedDir;
    // Into Postgres, and through stdin into the embedded database ("another database"): independent, so at once.
    const [intoPg, intoPglite] = await Promise.all([
      runCli(["import", file, ...pg("copy")]),
      runCli(["import", "--data-dir", dataDir, "--json"], { input: readFileSync(file, "utf8") }),
    ]);
    expect(intoPg.code).toBe(0);
    expect(intoPg.stdout).toMatch(/Imported 3 thread\(s\)/);
    expect(intoPglite.code).toBe(0);
    expect(JSON.parse(intoPglite.stdout).imported).toHaveLength(3);

    // Byte-identical rows, every column.
    const srcRows = await pgRows("src");
    expect(await pgRows("copy")).toEqual(srcRows);
    const pglite = new PGlite(join(dataDir, "pgdata"));
    try {
      expect(await rows((q) => pglite.query(q), "public")).toEqual(srcRows);
    } finally {
      await pglite.close();
    }

    // What LangGraph reads back is identical.
    const copy = new PostgresSaver(db.pool, { schema: "copy" });
    expect(await readBack(copy, "12345", addressGraph)).toEqual(await readBack(source, "12345", addressGraph));
    expect(await readBack(copy, "nested", nestedGraph)).toEqual(await readBack(source, "nested", nestedGraph));
    expect(await copy.getTuple(cfg("odd"))).toEqual(await source.getTuple(cfg("odd")));
    // The copy resumes the interrupted subgraph like the original would.
    const resumed = await nestedGraph(copy).invoke(new Command({ resume: "ok" }), cfg("nested"));
    expect(resumed).toMatchObject({ topic: "pg", summary: expect.stringContaining("reviewer said ok") });

    // Importing again: refused (exit 1, nothing written), or skipped on request.
    const before = await pgRows("copy");
    const [again, skipped] = [await runCli(["import", file, ...pg("copy")]), await runCli(["import", file, ...pg("copy"), "--skip-existing"])];
    expect(again.code).toBe(1);
    expect(firstLine(again)).toMatch(/Thread "\w+" already exists in the target schema "copy"; nothing was imported\. Delete it first \(`npx langgraph-checkpoint-pg threads delete \w+ --schema copy` \(with the same --database-url\)/);
    expect(skipped.code).toBe(0);
    expect(skipped.stdout).toMatch(/Imported 0 thread\(s\).*skipped 3 existing/);
    expect(await pgRows("copy")).toEqual(before);
  });

  it("a malformed or truncated export writes nothing and names the line; a missing thread fails export", async () => {
    const dir = tempDir();
    const good = (await runCli(["export", "12345", "odd", ...pg("src")])).stdout.trim().split("\n");
    const truncated = join(dir, "truncated.jsonl");
    writeFileSync(truncated, good.slice(0, -1).join("\n")); // drops the last thread's end record
    const badJson = join(dir, "bad.jsonl");
    writeFileSync(badJson, [...good.slice(0, 3), "{not json"].join("\n"));
    const badField = join(dir, "field.jsonl");
    const lines = good.map((l) => JSON.parse(l));
    const i = lines.findIndex((l) => l.kind === "write" && l.thread_id === "odd");
    lines[i].idx = "zero";
    writeFileSync(badField, lines.map((l) => JSON.stringify(l)).join("\n"));
    const twice = join(dir, "twice.jsonl");
    const cp = good.findIndex((l) => l.includes('"kind":"checkpoint"') && l.includes('"thread_id":"odd"'));
    writeFileSync(twice, [...good.slice(0, cp + 1), good[cp], ...good.slice(cp + 1)].join("\n"));
    await migrate({ pool: db.pool, schema: "empty" });
    const [r1, r2, r3, r4, r5, r6] = await Promise.all([
      runCli(["import", truncated, ...pg("empty")]),
      runCli(["import", badJson, ...pg("empty")]),
      runCli(["import", badField, ...pg("empty")]),
      runCli(["import", join(dir, "nope.jsonl"), ...pg("empty")]),
      runCli(["export", "12345", "ghost", ...pg("src"), "-o", join(dir, "out.jsonl")]),
      runCli(["import", twice, ...pg("empty")]),
    ]);
    expect([r1.code, r2.code, r3.code, r4.code, r5.code, r6.code]).toEqual([1, 1, 1, 1, 1, 1]);
    expect(firstLine(r6)).toMatch(new RegExp(`line ${cp + 2}: repeats the key of line ${cp + 1} \\(a checkpoint is stored once\\)`));
    expect(firstLine(r1)).toMatch(new RegExp(`line ${good.length - 1}: the file ends inside thread "odd" \\(truncated export\\?\\)`));
    expect(firstLine(r2)).toMatch(/line 4: not valid JSON/);
    expect(firstLine(r3)).toMatch(new RegExp(`line ${i + 1} \\(idx\\): expected an integer`));
    expect(firstLine(r4)).toMatch(/cannot read .*nope.jsonl: no such file/);
    expect(firstLine(r5)).toMatch(/Thread "ghost" not found/);
    expect(existsSync(join(dir, "out.jsonl"))).toBe(false);
    const { rows: n } = await db.pool.query("SELECT (SELECT count(*) FROM empty.checkpoints)::int + (SELECT count(*) FROM empty.checkpoint_blobs)::int AS n");
    expect(n[0].n).toBe(0);
  });

  it("prune: a dry run unless --yes; then the last N of each lineage stay and the state reads the same", async () => {
    await migrate({ pool: db.pool, schema: "prunable" });
    const saver = new PostgresSaver(db.pool, { schema: "prunable" });
    const graph = addressGraph(saver);
    for (let i = 0; i < 3; i++) await graph.invoke({}, cfg("p"));
    const count = async () => (await db.pool.query("SELECT count(*)::int AS n FROM prunable.checkpoints")).rows[0].n as number;
    expect(await count()).toBe(9);
    const state = (await graph.getState(cfg("p"))).values;

    for (let i = 0; i < 2; i++) await graph.invoke({}, cfg("q"));
    expect(await count()).toBe(15);
    const keep = (await db.pool.query("SELECT count(*)::int AS n FROM prunable.checkpoint_blobs")).rows[0].n as number;

    // The default is a dry run; --dry-run says so explicitly. Both list per thread what would go.
    const [implicit, dry, dryJson, both] = await Promise.all([
      runCli(["prune", ...pg("prunable"), "--keep-last", "2", "--grace", "0"]),
      runCli(["prune", ...pg("prunable"), "--keep-last", "2", "--grace", "0", "--dry-run"]),
      runCli(["prune", ...pg("prunable"), "--keep-last", "2", "--grace", "0", "--dry-run", "--json"]),
      runCli(["prune", ...pg("prunable"), "--keep-last", "2", "--dry-run", "--yes"]),
    ]);
    expect(both.code).toBe(2);
    expect(firstLine(both)).toMatch(/--dry-run and --yes exclude each other/);
    expect(implicit.stdout).toBe(dry.stdout);
    expect(dry.code).toBe(0);
    const lines = dry.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^THREAD\s+CHECKPOINTS\s+WRITES\s+BLOBS\s+SIZE/);
    expect(lines[1]).toMatch(/^p\s+7\s+\d+\s+\d+\s+\S+/);
    expect(lines[2]).toMatch(/^q\s+4\s+\d+\s+\d+\s+\S+/);
    expect(lines[3]).toMatch(/^Dry run: would delete 11 checkpoints, \d+ writes, \d+ blobs .*\(2 thread\(s\) scanned, 2 with something to delete\)\. Nothing was deleted; add --yes to delete\./);
    expect(lines[4]).toBe("Would keep 4 checkpoint(s): 4 by --keep-last 2.");
    const preview = JSON.parse(dryJson.stdout) as PruneResult;
    expect(preview).toMatchObject({ dryRun: true, checkpoints: 11 });
    expect(preview.threads!.map((t) => [t.threadId, t.checkpoints, t.expired])).toEqual([
      ["p", 7, false],
      ["q", 4, false],
    ]);
    // Per thread adds up to the totals.
    for (const k of ["checkpoints", "writes", "blobs", "bytes"] as const) expect(preview.threads!.reduce((n, t) => n + t[k], 0)).toBe(preview[k]);
    expect(await count()).toBe(15);
    expect((await db.pool.query("SELECT count(*)::int AS n FROM prunable.checkpoint_blobs")).rows[0].n).toBe(keep);

    const real = await runCli(["prune", ...pg("prunable"), "--keep-last", "2", "--grace", "0", "--yes", "--json"]);
    expect(real.code).toBe(0);
    const done = JSON.parse(real.stdout) as PruneResult;
    expect(done).toMatchObject({ dryRun: false, checkpoints: 11, writes: preview.writes, blobs: preview.blobs, threadsScanned: 2, aborted: false });
    expect(done.threads).toBeUndefined();
    expect(await count()).toBe(4);
    expect((await graph.getState(cfg("p"))).values).toEqual(state);
  });

  it("prune on fresh data: nothing goes, and the summary says which rule kept what, the grace period included", async () => {
    await migrate({ pool: db.pool, schema: "fresh" });
    const graph = addressGraph(new PostgresSaver(db.pool, { schema: "fresh" }));
    for (let i = 0; i < 7; i++) await graph.invoke({}, cfg("f"));
    const [dry, real] = [await runCli(["prune", ...pg("fresh"), "--keep-last", "20"]), await runCli(["prune", ...pg("fresh"), "--keep-last", "20", "--yes"])];
    const grace = "1 by --grace 15m (written within it, or the parent of one that was: a graph may still run on them; --grace 0 turns it off)";
    expect(dry.stdout).toMatch(/^Dry run: would delete 0 checkpoints, 0 writes, 0 blobs \(0 B\) in schema "fresh" of \S+ \(1 thread\(s\) scanned, 0 with something to delete\)\./);
    expect(dry.stdout).toContain(`\nWould keep 21 checkpoint(s): 20 by --keep-last 20, ${grace}.\n`);
    expect(real.stdout).toMatch(/^Deleted 0 checkpoints, 0 writes, 0 blobs \(0 B\) from schema "fresh"/);
    expect(real.stdout).toContain(`\nKept 21 checkpoint(s): 20 by --keep-last 20, ${grace}.\n`);
    const json = JSON.parse((await runCli(["prune", ...pg("fresh"), "--keep-last", "20", "--json"])).stdout) as PruneResult;
    expect(json.kept).toEqual({ keepLast: 20, head: 0, olderThan: 0, grace: 1, delta: 0 });
  });

  it("compact: --dry-run --json counts and changes nothing; then lists are stored by their elements, in blobs and writes, and the state reads the same", async () => {
    await migrate({ pool: db.pool, schema: "compactable" });
    const saver = new PostgresSaver(db.pool, { schema: "compactable", elementStorage: false });
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("ai", (s) => ({ messages: [new AIMessage({ content: longText(`reply ${s.messages.length}`), id: `ai-${s.messages.length}` })] }))
      .addEdge(START, "ai")
      .addEdge("ai", END)
      .compile({ checkpointer: saver });
    for (let i = 0; i < 3; i++) await graph.invoke({ messages: [new HumanMessage({ content: longText(`hello ${i}`), id: `h-${i}` })] }, cfg("c"));
    const state = await graph.getState(cfg("c"));
    const rows = async (table: string) =>
      (await db.pool.query(`SELECT channel, type, value FROM compactable.${table} ORDER BY to_jsonb(${table})::text`)).rows;
    const [blobsBefore, writesBefore] = [await rows("checkpoint_blobs"), await rows("checkpoint_writes")];
    // The messages channel's versions and the input objects ({ messages: [question] }: the question is long enough to be
    // stored by content), and the tasks' writes to it (small values stay whole: the branch).
    const lists = blobsBefore.filter((b) => b.channel === "messages" && b.type !== "empty").length;
    const inputs = blobsBefore.filter((b) => b.channel === "__start__" && b.type !== "empty").length;
    const writes = writesBefore.filter((w) => w.channel === "messages").length;
    expect(writes).toBe(6);

    const dry = await runCli(["compact", ...pg("compactable"), "--dry-run", "--json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout) as CompactResult).toMatchObject({ dryRun: true, threads: 1, threadsCompacted: 1, values: lists + inputs + writes, writes, elementRows: 6, valuesSkipped: 0 });
    expect([await rows("checkpoint_blobs"), await rows("checkpoint_writes")]).toEqual([blobsBefore, writesBefore]);

    const real = await runCli(["compact", ...pg("compactable"), "--thread", "c"]);
    expect(real.code, real.stderr).toBe(0);
    expect(real.stdout).toMatch(
      new RegExp(`^Rewrote ${lists + inputs + writes} value\\(s\\) \\(${writes} of them pending writes\\) in 1 of 1 thread\\(s\\), adding 6 element row\\(s\\): \\S+ \\S* ?of whole values become \\S+ \\S* ?in schema "compactable" of `),
    );
    expect(real.stdout).toMatch(/A release before element storage cannot read these threads/);
    const after = await rows("checkpoint_blobs");
    expect(after.filter((b) => b.channel === "messages" && b.type === "pg:refs")).toHaveLength(lists);
    expect(after.filter((b) => b.channel === "__start__" && b.type.startsWith("pg:obj:"))).toHaveLength(inputs);
    expect(after.filter((b) => b.channel === "__elements__")).toHaveLength(6);
    expect((await rows("checkpoint_writes")).filter((w) => w.type === "pg:refs")).toHaveLength(writes);
    expect((await graph.getState(cfg("c"))).values).toStrictEqual(state.values);

    const again = await runCli(["compact", ...pg("compactable"), "--json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout) as CompactResult).toMatchObject({ dryRun: false, threads: 1, values: 0, elementRows: 0 });
  });

  it("threads delete: --dry-run lists what would go; an unknown thread deletes nothing; then the thread is gone, others stay", async () => {
    await migrate({ pool: db.pool, schema: "deletable" });
    const saver = new PostgresSaver(db.pool, { schema: "deletable" });
    for (const t of ["a", "b", "c"]) await addressGraph(saver).invoke({}, cfg(t));
    const rows = async () =>
      (
        await db.pool.query(
          `SELECT t.thread_id, (SELECT count(*) FROM deletable.checkpoints c WHERE c.thread_id = t.thread_id)::int AS c,
                  (SELECT count(*) FROM deletable.checkpoint_writes w WHERE w.thread_id = t.thread_id)::int AS w,
                  (SELECT count(*) FROM deletable.checkpoint_blobs b WHERE b.thread_id = t.thread_id)::int AS b,
                  (SELECT count(*) FROM deletable.checkpoint_heads h WHERE h.thread_id = t.thread_id)::int AS h
             FROM unnest(ARRAY['a', 'b', 'c']) AS t(thread_id) ORDER BY 1`,
        )
      ).rows as { thread_id: string; c: number; w: number; b: number; h: number }[];
    const before = await rows();
    expect(before.every((r) => r.c === 3 && r.h === 1)).toBe(true);

    const [dry, dryJson, ghost, usage] = await Promise.all([
      runCli(["threads", "delete", "a", "b", ...pg("deletable"), "--dry-run"]),
      runCli(["threads", "delete", "a", ...pg("deletable"), "--dry-run", "--json"]),
      runCli(["threads", "delete", "a", "ghost", ...pg("deletable")]),
      runCli(["threads", "delete", ...pg("deletable")]),
    ]);
    expect(dry.code).toBe(0);
    const [a, b] = before;
    const line = (r: typeof a) => `\\n\\s+${r!.thread_id}\\s+${r!.c}\\s+1\\s+${r!.w}\\s+${r!.b}\\s+[\\d.]+ k?B`;
    expect(dry.stdout).toMatch(
      new RegExp(`^Dry run: would delete from schema "deletable" of postgres://\\S+:\\n\\s+THREAD\\s+CHECKPOINTS\\s+NAMESPACES\\s+WRITES\\s+BLOBS\\s+SIZE${line(a)}${line(b)}\\n`),
    );
    expect(dry.stdout).toMatch(/\nNothing was deleted; run it again without --dry-run to delete\.\n$/);
    expect(JSON.parse(dryJson.stdout)).toMatchObject({ dryRun: true, threads: [{ threadId: "a", checkpoints: a!.c, writes: a!.w, blobs: a!.b }] });
    expect(ghost.code).toBe(1);
    expect(firstLine(ghost)).toMatch(/Thread "ghost" not found in schema "deletable" of .*; nothing was deleted/);
    expect(usage.code).toBe(2);
    expect(firstLine(usage)).toMatch(/missing argument <thread>/);
    expect(await rows()).toEqual(before);

    const real = await runCli(["threads", "delete", "a", ...pg("deletable")]);
    expect(real.code).toBe(0);
    expect(real.stdout).toMatch(/^Deleted from schema "deletable" of [^\n]+:\n\s+THREAD[^\n]+\n\s+a\s+3\s/);
    expect(await rows()).toEqual(before.map((r) => (r.thread_id === "a" ? { thread_id: "a", c: 0, w: 0, b: 0, h: 0 } : r)));
    expect(await saver.getTuple(cfg("a"))).toBeUndefined();
    const again = await runCli(["threads", "delete", "a", ...pg("deletable")]);
    expect(again.code).toBe(1);
  });

  it("never prints a database password", async () => {
    const url = new URL(db.url);
    url.password = "hunter2-secret";
    url.port = "1"; // nothing listens: a connection error that names the target
    const r = await runCli(["status", "--database-url", url.toString()]);
    expect(r.code).toBe(1);
    expect(firstLine(r)).toMatch(/Could not connect to postgres:\/\/[^:]+:\*\*\*@/);
    expect(r.stdout + r.stderr).not.toContain("hunter2-secret");
    // The same through DATABASE_URL.
    const fromEnv = await runCli(["threads"], { env: { DATABASE_URL: url.toString() } });
    expect(fromEnv.code).toBe(1);
    expect(firstLine(fromEnv)).toMatch(/Could not connect to postgres:\/\/[^:]+:\*\*\*@/);
    expect(fromEnv.stdout + fromEnv.stderr).not.toContain("hunter2-secret");
  });
});

describe("grants", () => {
  it("prints exactly grantStatements, and refuses bad usage with exit 2", async () => {
    const { grantStatements } = await import("../../src/index.js");
    const ok = await runCli(["grants", "--role", "agents_app", "--schema", 'we"ird']);
    expect(ok.code).toBe(0);
    expect(ok.stdout.trim()).toBe(grantStatements({ role: "agents_app", schema: 'we"ird' }).map((s) => `${s};`).join("\n"));
    for (const [flag, store] of [["--no-store", false], ["--store-only", "only"]] as const) {
      const run = await runCli(["grants", "--role", "agents_app", flag]);
      expect(run.stdout.trim(), flag).toBe(grantStatements({ role: "agents_app", store }).map((s) => `${s};`).join("\n"));
    }
    expect((await runCli(["grants", "--role", "agents_app", "--no-store", "--store-only"])).code).toBe(2);
    const missing = await runCli(["grants"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--role/);
    const pub = await runCli(["grants", "--role", "PUBLIC"]);
    expect(pub.code).toBe(2);
  });

  it("--help names every table it grants on", async () => {
    const help = await runCli(["grants", "--help"]);
    const granted = /ON TABLE (.*) TO/.exec((await runCli(["grants", "--role", "r"])).stdout)![1]!.split(", ").map((t) => t.replace(/^"public"\./, ""));
    expect(granted.length).toBeGreaterThan(3);
    const words = ["zero", "one", "two", "three", "four", "five", "six", "seven"];
    expect(help.stdout.replace(/\n/g, " ")).toContain(`on the ${words[granted.length]} tables (${granted.join(", ")})`);
  });
});
