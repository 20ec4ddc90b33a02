/**
 * Hostile input through the saver against a real database: ids, namespaces,
 * channel names, task ids, metadata and schema names made of quotes,
 * semicolons, backslashes, NUL, emoji and right-to-left text are stored and
 * read back exactly, or refused with a clear error; the SQL text sent never
 * depends on them. Oversized values are stored, or refused by the limit.
 */
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidInputError, InvalidOptionsError, migrate, PostgresSaver } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { withTestDatabase } from "../helpers/db.js";
import { addressGraph } from "../helpers/graphs.js";

const db = withTestDatabase("hostile");

/** Strings that break naive SQL building, logging or display. */
const HOSTILE: Record<string, string> = {
  quote: "it's",
  doubleQuote: 'say "hi"',
  injection: "x'); DROP TABLE checkpoints; --",
  injection2: '"; DROP SCHEMA public CASCADE; --',
  semicolons: ";;;",
  backslashes: "C:\\path\\to\\'thing'\\",
  escapes: "E'\\x00' \\\\ \\n",
  dollar: "$1 $$ $tag$ body $tag$",
  comment: "/* open comment -- and more",
  percent: "%s %d %n {0} ${x}",
  emoji: "😀🧨👩‍👩‍👧‍👦",
  rtl: "שלום עולם مرحبا",
  bidi: "\u202Eevil\u202C \u2066iso\u2069",
  zeroWidth: "a\u200Bb\uFEFFc",
  controls: "tab\tnew\nline\rbell\u0007esc\u001b",
  space: " ",
  unicode: "ÅÄÖ ñ ß ΣΑΣ",
  json: '{"a":1}',
  array: "{1,2,3}",
  bytea: "\\xdeadbeef",
  like: "%_\\%",
};

let saver: PostgresSaver;
/** Every SQL text the saver sent (values are not recorded: only the text). */
let texts: string[];

beforeAll(async () => {
  await migrate({ pool: db.pool });
  texts = [];
  const query = db.pool.query.bind(db.pool) as (...args: unknown[]) => unknown;
  // Record the text of every statement the saver runs through the pool.
  (db.pool as unknown as { query: (...args: unknown[]) => unknown }).query = (config: unknown, ...rest: unknown[]) => {
    texts.push(typeof config === "string" ? config : (config as { text: string }).text);
    return query(config, ...rest);
  };
  saver = new PostgresSaver(db.pool);
});

/** Every saver operation with `s` in every string position; returns what it read back. */
async function roundTrip(s: string) {
  const thread = `${s}|thread`;
  const ns = `${s}|ns`;
  const channel = `${s}|channel`;
  const version = `${"1".padStart(32, "0")}.${s.length}`;
  const cp = makeCheckpoint({ [channel]: s, plain: "v" }, { [channel]: version, plain: version });
  cp.id = `${uuid6(-3)}${s}`.slice(0, 100);
  const metadata = meta(-1, { [s]: s, note: s });
  const config = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: ns } }, cp, metadata, cp.channel_versions);
  await saver.putWrites(config, [[channel, s]], `${s}|task`, `${s}|path`);
  const tuple = await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: ns } });
  const listed = [];
  for await (const t of saver.list({ configurable: { thread_id: thread } }, { filter: { [s]: s } })) listed.push(t);
  const history = await saver.getDeltaChannelHistory({ config, channels: [channel] });
  return { thread, ns, channel, cp, metadata, config, tuple, listed, history };
}

describe("hostile ids, namespaces, channels, task ids and metadata", () => {
  for (const [name, s] of Object.entries(HOSTILE)) {
    it(`${name}: stored and read back exactly`, async () => {
      const r = await roundTrip(s);
      expect(r.config.configurable).toEqual({ thread_id: r.thread, checkpoint_ns: r.ns, checkpoint_id: r.cp.id });
      expect(r.tuple?.config.configurable).toEqual({ thread_id: r.thread, checkpoint_ns: r.ns, checkpoint_id: r.cp.id });
      expect(r.tuple?.checkpoint.channel_values).toEqual({ [r.channel]: s, plain: "v" });
      expect(r.tuple?.metadata).toEqual(r.metadata);
      expect(r.tuple?.pendingWrites).toEqual([[`${s}|task`, r.channel, s]]);
      expect(r.listed.map((t) => t.checkpoint.id)).toEqual([r.cp.id]);
      // The bytes in the table are the bytes given (no normalization, no escaping left behind).
      const { rows } = await db.pool.query("SELECT thread_id, checkpoint_ns, metadata ->> 'note' AS note FROM checkpoints WHERE checkpoint_id = $1", [r.cp.id]);
      expect(rows).toEqual([{ thread_id: r.thread, checkpoint_ns: r.ns, note: s }]);
      await saver.deleteThread(r.thread);
      expect(await saver.getTuple({ configurable: { thread_id: r.thread, checkpoint_ns: r.ns } })).toBeUndefined();
    });
  }

  it("NUL in any key is refused before any SQL, naming the field", async () => {
    const before = texts.length;
    const cp = makeCheckpoint({ x: 1 });
    const cases: Array<[Promise<unknown>, RegExp]> = [
      [saver.getTuple({ configurable: { thread_id: "a\u0000b" } }), /thread_id/],
      [saver.put({ configurable: { thread_id: "t", checkpoint_ns: "n\u0000" } }, cp, meta(-1), cp.channel_versions), /checkpoint_ns/],
      [saver.put({ configurable: { thread_id: "t", checkpoint_ns: "" } }, cp, meta(-1), { "c\u0000": 1 }), /channel/],
      [saver.putWrites({ configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: "x" } }, [["c", 1]], "task\u0000"), /taskId/],
      [saver.putWrites({ configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id: "x" } }, [["c\u0000", 1]], "task"), /channel/],
      [saver.deleteThread("\u0000"), /threadId/],
    ];
    for (const [p, field] of cases) {
      const error = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).field).toMatch(field);
      expect((error as Error).message).toMatch(/NUL/);
    }
    expect(texts.length).toBe(before);
  });

  it("a task path with NUL or a lone surrogate is refused before any SQL, naming the field (issue 26 row 10)", async () => {
    const config = await saver.put({ configurable: { thread_id: "task-path", checkpoint_ns: "" } }, makeCheckpoint({ x: 1 }), meta(-1), {});
    const before = texts.length;
    for (const [path, reason] of [
      ["a\u0000b", /NUL/],
      ["half\uD800", /lone surrogate/],
      ["\uDC00x", /lone surrogate/],
    ] as const) {
      const error = await saver.putWrites(config, [["c", 1]], "task", path).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).field).toBe("putWrites taskPath");
      expect((error as Error).message).toMatch(reason);
    }
    expect(texts.length).toBe(before);
    // Everything else is stored as given, the empty path included.
    for (const path of ["", "~__pregel_pull, node", "😀 \u202E path"]) await saver.putWrites(config, [["c", path]], `task ${path}`, path);
    const { rows } = await db.pool.query("SELECT task_path FROM checkpoint_writes WHERE thread_id = 'task-path' ORDER BY task_path");
    expect(rows.map((r) => r.task_path)).toEqual(["", "~__pregel_pull, node", "😀 \u202E path"].sort());
  });

  it("NUL in metadata and in values is kept exactly (stored in bytes, never in SQL text)", async () => {
    const s = "nul\u0000inside";
    const cp = makeCheckpoint({ v: s });
    const config = await saver.put({ configurable: { thread_id: "nul-values", checkpoint_ns: "" } }, cp, meta(-1, { note: s }), cp.channel_versions);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.channel_values).toEqual({ v: s });
    expect((tuple?.metadata as Record<string, unknown>).note).toBe(s);
  });

  it("ids with lone surrogates (not valid UTF-8) are refused or read back exactly, never silently altered", async () => {
    // Postgres text is UTF-8; pg would turn a lone surrogate into U+FFFD on the way.
    for (const s of ["lone\uD800", "\uDC00x"]) {
      const cp = makeCheckpoint({ x: 1 });
      const result = await saver.put({ configurable: { thread_id: s, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions).then(
        (config) => ({ config }),
        (error: unknown) => ({ error }),
      );
      if ("error" in result) {
        expect(result.error).toBeInstanceOf(InvalidInputError);
        continue;
      }
      // Accepted: then it must be stored as given, not as U+FFFD.
      const { rows } = await db.pool.query("SELECT thread_id FROM checkpoints WHERE checkpoint_id = $1", [cp.id]);
      expect(rows.map((r) => r.thread_id)).toEqual([s]);
    }
  });

  it("metadata and values with lone surrogates are kept exactly", async () => {
    const s = "half\uD83D of an emoji";
    const cp = makeCheckpoint({ v: s });
    const config = await saver.put({ configurable: { thread_id: "surrogate-values", checkpoint_ns: "" } }, cp, meta(-1, { note: s }), cp.channel_versions);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.channel_values).toEqual({ v: s });
    expect((tuple?.metadata as Record<string, unknown>).note).toBe(s);
  });

  it("the SQL text never depends on the input: hostile and boring values send the same statements", async () => {
    texts.length = 0;
    for (const s of Object.values(HOSTILE)) await roundTrip(s);
    const hostile = new Set(texts);
    texts.length = 0;
    await roundTrip("boring");
    await roundTrip("also-boring");
    const boring = new Set(texts);
    expect([...hostile].sort()).toEqual([...boring].sort());
    for (const text of hostile) {
      for (const s of Object.values(HOSTILE)) {
        if (s.length >= 4) expect(text.includes(s)).toBe(false);
      }
    }
  });
});

describe("hostile schema names", () => {
  const SCHEMAS = [
    'we"ird',
    "x'); DROP TABLE public.canary; --",
    '"; DROP SCHEMA public CASCADE; --',
    "back\\slash",
    "emoji 😀 schema",
    "שלום",
    "Agents", // case matters for quoted identifiers
    "agents",
    "semi;colon",
  ];

  beforeAll(async () => {
    await db.pool.query("CREATE TABLE public.canary (id int)");
  });
  afterAll(async () => {
    for (const s of SCHEMAS) await db.pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(s)} CASCADE`);
  });

  it("migrate + saver + a graph run work end to end in each, and each name is exactly one schema", async () => {
    for (const schema of SCHEMAS) {
      const result = await migrate({ pool: db.pool, schema });
      expect(result.schema).toBe(schema);
      const s = new PostgresSaver(db.pool, { schema });
      const thread = `in ${schema}`;
      expect(await addressGraph(s).invoke({}, { configurable: { thread_id: thread } })).toEqual({ name: "pavaneeshwar", address: "Hyderabad residency" });
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(schema)}.checkpoints WHERE thread_id = $1`, [thread]);
      expect(rows[0].n).toBe(3);
      expect((await migrate({ pool: db.pool, schema })).applied).toEqual([]);
    }
    const { rows } = await db.pool.query("SELECT nspname FROM pg_namespace WHERE nspname = ANY($1) ORDER BY nspname", [SCHEMAS]);
    expect(rows.map((r) => r.nspname).sort()).toEqual([...SCHEMAS].sort());
    // Nothing was dropped by a name that looks like SQL.
    expect((await db.pool.query("SELECT to_regclass('public.canary') IS NOT NULL AS ok")).rows[0].ok).toBe(true);
    // The two spellings are separate schemas with separate data.
    expect(await new PostgresSaver(db.pool, { schema: "Agents" }).getTuple({ configurable: { thread_id: "in agents" } })).toBeUndefined();
  });

  it("names Postgres cannot hold are refused with a clear error naming the option", () => {
    for (const schema of ["a\u0000b", "x".repeat(64), "😀".repeat(16), "pg_evil", ""]) {
      expect(() => new PostgresSaver(db.pool, { schema })).toThrow(InvalidOptionsError);
      expect(() => new PostgresSaver(db.pool, { schema })).toThrow(/option schema/);
    }
  });
});

describe("oversized values", () => {
  const MB = 1024 * 1024;

  it("a 50 MB channel value is stored and read back, without an out-of-memory crash", async () => {
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let peak = rssBefore;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    try {
      const big = "0123456789abcdef".repeat((50 * MB) / 16); // 50 MiB of text
      const cp = makeCheckpoint({ big, small: 1 });
      const thread = "big-50mb";
      const config = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
      const tuple = await saver.getTuple(config);
      expect((tuple?.checkpoint.channel_values.big as string).length).toBe(big.length);
      expect(tuple?.checkpoint.channel_values.big === big).toBe(true);
      // Stored by content: its channel's row names the element row that holds it.
      const { rows } = await db.pool.query("SELECT max(octet_length(value))::int AS n FROM checkpoint_blobs WHERE thread_id = $1", [thread]);
      expect(rows[0].n).toBeGreaterThanOrEqual(50 * MB);
      await saver.deleteThread(thread);
    } finally {
      clearInterval(sampler);
    }
    global.gc?.();
    const growth = (peak - rssBefore) / MB;
    console.log(`[hostile] 50 MB value: peak RSS +${growth.toFixed(0)} MB, after ${((process.memoryUsage().rss - rssBefore) / MB).toFixed(0)} MB`);
    // Generous, but far from a crash: a few copies of the value, not an unbounded blow-up.
    expect(growth).toBeLessThan(1_500);
  });

  it("maxValueBytes refuses larger values before any SQL, naming the channel and the limit", async () => {
    const limited = new PostgresSaver(db.pool, { maxValueBytes: 1 * MB });
    const before = texts.length;
    const cp = makeCheckpoint({ huge: "x".repeat(2 * MB), ok: 1 });
    const thread = "too-big";
    const put = await limited.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(put).toBeInstanceOf(InvalidInputError);
    expect((put as Error).message).toMatch(/channel_values\["huge"\].*serializes to \d+ bytes; the limit \(maxValueBytes\) is 1048576/);
    const write = await limited.putWrites({ configurable: { thread_id: thread, checkpoint_ns: "", checkpoint_id: cp.id } }, [["huge", "y".repeat(2 * MB)]], "t").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(write).toBeInstanceOf(InvalidInputError);
    expect((write as Error).message).toMatch(/channel "huge"/);
    // The same for values without a version (stored with the checkpoint row).
    const unversioned = { ...makeCheckpoint({ ok: 1 }), channel_values: { ok: 1, huge: "u".repeat(2 * MB) } };
    const bare = await limited.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, unversioned, meta(-1), unversioned.channel_versions).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(bare).toBeInstanceOf(InvalidInputError);
    expect((bare as Error).message).toMatch(/channels without a version.*the limit \(maxValueBytes\) is 1048576/);
    expect(texts.slice(before).filter((t) => !t.includes("checkpointer_migrations"))).toEqual([]);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [thread]);
    expect(rows[0].n).toBe(0);
  });

  it("the default limit (64 MiB) refuses a value just above it", async () => {
    const cp = makeCheckpoint({ huge: "z".repeat(64 * MB) }); // msgpack adds a 5-byte header
    await expect(saver.put({ configurable: { thread_id: "over-default", checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions)).rejects.toThrow(
      /the limit \(maxValueBytes\) is 67108864/,
    );
    await expect(() => new PostgresSaver(db.pool, { maxValueBytes: 0 })).toThrow(InvalidOptionsError);
  });
});
