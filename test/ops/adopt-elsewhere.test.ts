/**
 * The official saver's and store's tables in other schemas (issue 39, seams 1
 * and 2). Adoption concerns the schema being set up: official tables in any
 * other schema never stop `setup()`, `open()` or `migrate` of an unrelated new
 * schema; the first migration says so once (an `officialTablesFound` event,
 * one line on stderr from the CLI and from `open()`) and leaves them as they
 * are. In the very schema being set up they still stop it. And the store's
 * refusal suggests a command that works as written, next to the official
 * checkpointer's tables too.
 */
import { randomBytes } from "node:crypto";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import { PostgresStore as OfficialStore } from "@langchain/langgraph-checkpoint-postgres/store";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { latestVersion, migrate, migrateStore, PostgresSaver, PostgresStore, StoreAdoptionRequiredError, type SaverEvent } from "../../src/index.js";
import { runCli, suggestedCommands } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { logGraph } from "../helpers/graphs.js";
import { tableNames } from "../helpers/partitions.js";

const db = withTestDatabase("adopt_elsewhere");
const fresh = (prefix: string) => `${prefix}_${randomBytes(3).toString("hex")}`;
/** The official JS saver's tables, with a thread; the official store's, with an item; and both in one schema, as their defaults put them. */
const OFF_SAVER = "off_x";
const OFF_STORE = "off_s";
const OFF_BOTH = "off_both";
const officialStores: OfficialStore[] = [];

/** What the official schemas hold: their tables and their rows' count (what nothing here may change). */
async function officialState() {
  const out: Record<string, unknown> = {};
  for (const schema of [OFF_SAVER, OFF_STORE, OFF_BOTH]) {
    const names = await tableNames(db.pool, schema);
    const rows: Record<string, number> = {};
    for (const t of names) rows[t] = (await db.pool.query(`SELECT count(*)::int AS n FROM ${schema}.${t}`)).rows[0].n;
    out[schema] = rows;
  }
  return out;
}

beforeAll(async () => {
  for (const schema of [OFF_SAVER, OFF_BOTH]) {
    const official = new OfficialSaver(db.pool, undefined, { schema });
    await official.setup();
    await logGraph(official).invoke({ word: "hi" }, { configurable: { thread_id: "t1" } });
  }
  for (const schema of [OFF_STORE, OFF_BOTH]) {
    const store = new OfficialStore({ connectionOptions: db.url, schema });
    officialStores.push(store);
    await store.setup();
    await store.put(["users", "u1"], "prefs", { theme: "dark" });
  }
});
afterAll(async () => {
  for (const s of officialStores) await s.stop();
});

const found = (events: SaverEvent[]) => events.filter((e): e is Extract<SaverEvent, { type: "officialTablesFound" }> => e.type === "officialTablesFound");

describe("official tables in other schemas", () => {
  it("setup(), migrate() and open() of a new schema go on beside them, saying so once; the official tables stay as they were", async () => {
    const before = await officialState();
    const events: SaverEvent[] = [];
    const onEvent = (e: SaverEvent) => void events.push(e);

    const viaSetup = fresh("ours");
    expect((await new PostgresSaver(db.pool, { schema: viaSetup, onEvent }).setup()).toVersion).toBe(latestVersion());
    expect(found(events)).toEqual([
      {
        type: "officialTablesFound",
        schema: viaSetup,
        of: "saver",
        schemas: [OFF_BOTH, OFF_SAVER],
        message: expect.stringContaining(`schema "${OFF_SAVER}" holds the tables of the official JS saver`),
        suggested: [{ words: ["migrate", "--adopt", OFF_BOTH, "--dry-run"], schema: viaSetup }],
      },
    ]);
    expect(found(events)[0]!.message).toContain(`--adopt ${OFF_BOTH}`);
    // Said once: the schema is this package's now, later setups have nothing to say.
    await new PostgresSaver(db.pool, { schema: viaSetup, onEvent }).setup();
    expect(found(events)).toHaveLength(1);

    const viaMigrate = fresh("ours");
    events.length = 0;
    expect((await migrate({ pool: db.pool, schema: viaMigrate, onEvent })).toVersion).toBe(latestVersion());
    expect(found(events).map((e) => e.schema)).toEqual([viaMigrate]);

    const viaOpen = fresh("ours");
    const lines: string[] = [];
    const opened = await PostgresSaver.open({ databaseUrl: db.url, schema: viaOpen, log: (line) => void lines.push(line) });
    await opened.end();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^langgraph-checkpoint-pg: .*schema "${OFF_SAVER}" holds the tables of the official JS saver.*"${viaOpen}" was set up beside them`));

    // adopt: false asked for exactly this: nothing to say.
    events.length = 0;
    await new PostgresSaver(db.pool, { schema: fresh("ours"), onEvent }).setup({ adopt: false });
    expect(found(events)).toEqual([]);
    expect(await officialState()).toEqual(before);
  });

  it("the CLI's migrate of a new schema exits 0, with one line on stderr", async () => {
    const schema = fresh("ours");
    const run = await runCli(["migrate", "--schema", schema, "--database-url", db.url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^Migrated schema "${schema}"`));
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(new RegExp(`^langgraph-checkpoint-pg migrate: .*schema "${OFF_SAVER}" holds the tables of the official JS saver`));
  });

  it("the store: setup() and migrate --store-only of a new schema go on beside the official store, saying so once", async () => {
    const before = await officialState();
    const events: SaverEvent[] = [];
    const schema = fresh("ours_store");
    await new PostgresStore(db.pool, { schema, onEvent: (e) => void events.push(e) }).setup();
    expect(found(events)).toEqual([
      {
        type: "officialTablesFound",
        schema,
        of: "store",
        schemas: [OFF_BOTH, OFF_STORE],
        message: expect.stringContaining("official PostgresStore"),
        suggested: [{ words: ["migrate", "--store-only", "--adopt-store", OFF_BOTH, "--dry-run"], schema }],
      },
    ]);
    expect(await tableNames(db.pool, schema)).toContain("store_items");
    const cli = fresh("ours_store");
    const run = await runCli(["migrate", "--store-only", "--schema", cli, "--database-url", db.url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(/^langgraph-checkpoint-pg migrate: .*the tables of the official PostgresStore/);
    expect(await officialState()).toEqual(before);
  });
});

// In the schema being set up they still stop it, as before: test/ops/adopt.test.ts, test/store/migrate.test.ts.
describe("the official store in the schema being set up", () => {
  it("the store's refusal suggests a command that runs as written, though the official saver's tables share the schema", async () => {
    const refused = await new PostgresStore(db.pool, { schema: OFF_BOTH }).setup().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreAdoptionRequiredError);
    const [hinted] = suggestedCommands((refused as Error).message);
    expect(hinted).toEqual(expect.arrayContaining(["migrate", "--adopt-store", OFF_BOTH, "--dry-run"]));
    // The hint as a user runs it: DATABASE_URL set, the words as written.
    const dry = await runCli(hinted!, { env: { DATABASE_URL: db.url } });
    expect(dry.stderr).toBe("");
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`copying the official store's items from schema "${OFF_BOTH}" (1 item(s))`);
    const run = await runCli(hinted!.filter((w) => w !== "--dry-run"), { env: { DATABASE_URL: db.url } });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`Copied 1 item(s)`);
    expect((await new PostgresStore(db.pool, { schema: OFF_BOTH }).get(["users", "u1"], "prefs"))?.value).toEqual({ theme: "dark" });
    // The checkpointer's tables were not asked for: the official saver's stay alone in that schema.
    expect((await migrateStore({ pool: db.pool, schema: OFF_BOTH })).applied).toEqual([]);
    expect(await tableNames(db.pool, OFF_BOTH)).not.toContain("checkpointer_migrations");
  });
});
