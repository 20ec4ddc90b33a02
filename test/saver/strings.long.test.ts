/**
 * Every string comes back exactly as written (issue 33), whatever its length
 * and wherever it is stored. A seeded property test: random well-formed
 * strings (lone surrogates have their own rule, see README "Serialization"),
 * with and without a leading U+FEFF (a default TextDecoder drops it), of every
 * UTF-8 length across the msgpack codec's boundaries (see boundaryLengths),
 * through the serializer's readers and through a real saver: checkpoint
 * values (as values, object keys, list elements), values without a version,
 * pending writes, metadata (JSONB and metadata_raw), element rows, a graph,
 * rows in the official saver's JSON, and the CLI's export and import.
 * STRINGS_SEED=<n> replays another run.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { JsonPlusSerializer, uuid6, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import { encode } from "@msgpack/msgpack";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, MsgpackSerializer, PostgresSaver } from "../../src/index.js";
import { LONE_SURROGATE } from "../../src/validate.js";
import { meta } from "../helpers/checkpoints.js";
import { runCli } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";
import { boundaryLengths, prng, randomString } from "../helpers/random.js";

const SEED = Number(process.env.STRINGS_SEED ?? 33);
const rng = prng(SEED);
/**
 * Per length: one string led by U+FEFF, one by two of them (or none, every
 * other length), one without; of the long lengths (str16's end), only one led
 * by one or two.
 */
const cases: string[] = boundaryLengths().flatMap((n) =>
  n > 1000 ? [randomString(rng, n, { bom: true, twice: n % 2 === 0 })] : [randomString(rng, n, { bom: true }), randomString(rng, n, { twice: n % 2 === 0 }), randomString(rng, n)],
);
const distinct = [...new Set(cases)];
/** The same cases in groups, one put (or call) each. */
const groups: string[][] = [];
for (let i = 0; i < cases.length; i += 120) groups.push(cases.slice(i, i + 120));
const where = (s: string) => `case of ${Buffer.byteLength(s)} bytes starting ${JSON.stringify(s.slice(0, 3))} (STRINGS_SEED=${SEED})`;

/** Compares string by string, each failure naming its case. */
function expectSame(got: unknown[], want: string[]): void {
  expect(got.length).toBe(want.length);
  want.forEach((s, i) => expect(got[i], where(s)).toBe(s));
}

it("the cases cover what they claim", () => {
  const lengths = new Set(cases.map((s) => Buffer.byteLength(s)));
  for (const n of [0, 16, 17, 31, 32, 50, 200, 201, 255, 256, 65535, 65536]) expect(lengths.has(n), `${n} bytes`).toBe(true);
  const led = cases.filter((s) => s.startsWith("\ufeff"));
  expect(led.filter((s) => Buffer.byteLength(s) > 200).length).toBeGreaterThan(100);
  expect(led.filter((s) => s.startsWith("\ufeff\ufeff")).length).toBeGreaterThan(100);
  expect(cases.some((s) => LONE_SURROGATE.test(s))).toBe(false);
});

describe("through the serializer", () => {
  const serde = new MsgpackSerializer();

  it("msgpack: as a value, an object key, an array item", async () => {
    for (const group of groups) {
      const value = { list: group, keys: Object.fromEntries(group.map((s, i) => [s, i])) };
      const back = (await serde.loadsTyped(...(await serde.dumpsTyped(value)))) as typeof value;
      expectSame(back.list, group);
      expect(Object.keys(back.keys)).toEqual(Object.keys(value.keys));
      for (const s of group) expect(await serde.loadsTyped(...(await serde.dumpsTyped(s))), where(s)).toBe(s);
    }
  });

  it("values msgpack cannot hold, in their JSON form (jsonform.ts)", async () => {
    class Box {
      constructor(readonly text: string) {}
    }
    for (const group of groups) {
      const back = (await serde.loadsTyped(...(await serde.dumpsTyped(group.map((s) => new Box(s)))))) as { text: string }[];
      expectSame(back.map((b) => b.text), group);
    }
  });

  it("JSON as LangGraph's JsonPlusSerializer (the official saver) writes it (jsonplus.ts)", async () => {
    const jsonPlus = new JsonPlusSerializer();
    for (const group of groups) {
      const [type, bytes] = await jsonPlus.dumpsTyped({ list: group, keys: Object.fromEntries(group.map((s, i) => [s, i])) });
      expect(type).toBe("json");
      const back = (await serde.loadsTyped(type, bytes)) as { list: string[]; keys: Record<string, number> };
      expectSame(back.list, group);
      expect(Object.keys(back.keys)).toEqual([...new Set(group)]);
    }
  });

  it("Python's msgpack, in a database adopted from the Python saver (pyserde.ts)", async () => {
    // @msgpack/msgpack's plain encoding of strings and lists is the standard one Python's msgpack writes.
    for (const group of groups) expectSame((await serde.loadsTyped("msgpack-py", encode(group))) as string[], group);
  });
});

describe("through the saver", () => {
  const db = withTestDatabase("strings");
  let saver: PostgresSaver;
  let elementSaver: PostgresSaver;
  const dirs: string[] = [];
  beforeAll(async () => {
    await migrate({ pool: db.pool });
    saver = new PostgresSaver(db.pool);
    elementSaver = new PostgresSaver(db.pool, { elementStorage: true });
  });
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  const metadataText = (g: number) => (g % 2 === 1 ? groups[g]! : groups[g]!.map((x) => x.replace(/\u0000/g, "0")));

  /** Puts one checkpoint per group: each string as a channel, as object keys, in an unversioned list; metadata too. */
  async function putAll(s: PostgresSaver, threadId: string) {
    let parent: string | undefined;
    const ids: string[] = [];
    for (const [g, group] of groups.entries()) {
      const channels = Object.fromEntries(group.map((x, i) => [`c${i}`, x]));
      const values = { ...channels, keys: Object.fromEntries(group.map((x, i) => [x, i])), list: group, unversioned: group };
      const versions = Object.fromEntries(Object.keys(values).filter((k) => k !== "unversioned").map((k) => [k, g + 1]));
      // Metadata: every string as a value and as a key. Every other group as JSONB alone (which cannot
      // hold NUL), the others with a bigint too (kept exactly in metadata_raw).
      const text = metadataText(g);
      const metadata = { ...meta(g), text, ...Object.fromEntries(text.map((x, i) => [`m:${x}`, i])), ...(g % 2 === 1 ? { big: 1n } : {}) };
      const checkpoint = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: values, channel_versions: versions, versions_seen: {} };
      const config = await s.put({ configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: parent } }, checkpoint, metadata as CheckpointMetadata, versions);
      await s.putWrites(config, group.map((x, i) => [`w${i}`, x]), "task-1");
      parent = config.configurable!.checkpoint_id as string;
      ids.push(parent);
    }
    return ids;
  }

  async function expectAllBack(s: PostgresSaver, threadId: string, ids: string[]) {
    for (const [g, group] of groups.entries()) {
      const tuple = (await s.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: ids[g] } }))!;
      const v = tuple.checkpoint.channel_values as Record<string, unknown>;
      expectSame(group.map((_, i) => v[`c${i}`]), group);
      expectSame(v.list as string[], group);
      expectSame(v.unversioned as string[], group);
      expect(Object.keys(v.keys as object)).toEqual([...new Set(group)]);
      expectSame(tuple.pendingWrites!.filter(([task]) => task === "task-1").map(([, , value]) => value), group);
      const m = tuple.metadata as unknown as Record<string, unknown>;
      expectSame(m.text as string[], metadataText(g));
      // (JSONB orders an object's keys its own way.)
      expect(Object.keys(m).filter((k) => k.startsWith("m:")).sort()).toEqual([...new Set(metadataText(g))].map((x) => `m:${x}`).sort());
    }
    // list() reads the same rows in another statement: the same values.
    let n = 0;
    for await (const t of s.list({ configurable: { thread_id: threadId } })) {
      const g = ids.indexOf(t.config.configurable!.checkpoint_id as string);
      expectSame((t.checkpoint.channel_values as { list: string[] }).list, groups[g]!);
      n++;
    }
    expect(n).toBe(groups.length);
  }

  it("put/getTuple/list, putWrites, metadata (JSONB and metadata_raw)", async () => {
    const threadId = tid("strings");
    const ids = await putAll(saver, threadId);
    // Both metadata columns were used.
    const { rows } = await db.pool.query<{ raw: boolean }>("SELECT metadata_raw IS NOT NULL AS raw FROM checkpoints WHERE thread_id = $1", [threadId]);
    expect(new Set(rows.map((r) => r.raw))).toEqual(new Set([true, false]));
    await expectAllBack(saver, threadId, ids);
  });

  it("element rows (elementStorage: true)", async () => {
    const threadId = tid("strings-el");
    const ids = await putAll(elementSaver, threadId);
    const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = '__elements__'", [threadId]);
    expect(rows[0]!.n).toBeGreaterThanOrEqual(distinct.length);
    await expectAllBack(elementSaver, threadId, ids);
  });

  it("rows in the official saver's JSON (type \"json\"), read by the default serializer", async () => {
    const threadId = tid("strings-json");
    const ids = await putAll(new PostgresSaver(db.pool, { serde: new JsonPlusSerializer(), elementStorage: false }), threadId);
    const { rows } = await db.pool.query<{ type: string }>("SELECT DISTINCT type FROM checkpoint_blobs WHERE thread_id = $1", [threadId]);
    expect(rows.map((r) => r.type)).toEqual(["json"]);
    await expectAllBack(saver, threadId, ids);
  });

  const State = Annotation.Root({
    texts: Annotation<string[]>(),
    echoed: Annotation<string[]>(),
    keyed: Annotation<Record<string, number>>(),
  });

  for (const [label, pick] of [["whole values", () => saver], ["elementStorage: true", () => elementSaver]] as const) {
    it(`through a graph (${label})`, async () => {
      const graph = new StateGraph(State)
        .addNode("echo", (st) => ({ echoed: st.texts.map((x) => x), keyed: Object.fromEntries(st.texts.map((x, i) => [x, i])) }))
        .addEdge(START, "echo")
        .addEdge("echo", END)
        .compile({ checkpointer: pick() });
      const config = { configurable: { thread_id: tid("strings-graph") } };
      await graph.invoke({ texts: cases }, config);
      const { values } = await graph.getState(config);
      expectSame(values.texts, cases);
      expectSame(values.echoed, cases);
      expect(Object.keys(values.keyed)).toEqual(distinct);
    });
  }

  it("the CLI's export and import (src/cli/transfer.ts, src/ops/transfer.ts)", async () => {
    const threadId = tid("strings-cli");
    const ids = await putAll(saver, threadId);
    // And one value of 4 MiB (the import's base64 check once overflowed the stack on a few).
    const big = "\ufeff" + "x".repeat(4 << 20);
    const bigConfig = { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: ids.at(-1) } };
    await saver.putWrites(bigConfig, [["big", big]], "task-2");
    await migrate({ pool: db.pool, schema: "copy" });
    const dir = mkdtempSync(join(tmpdir(), "lgpg-strings-"));
    dirs.push(dir);
    const file = join(dir, "thread.jsonl");
    const flags = (schema: string) => ["--database-url", db.url, "--schema", schema];
    const exported = await runCli(["export", threadId, ...flags("public"), "-o", file, "--decoded"]);
    expect(exported.code, exported.stderr).toBe(0);
    // The decoded values shown alongside the bytes (--decoded) are exact too.
    const records = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const shown = records.filter((r) => r.kind === "write" && r.checkpoint_id === ids[0]).sort((a, b) => Number(a.idx) - Number(b.idx));
    expectSame(shown.map((r) => r.decoded), groups[0]!);
    // The 4 MiB string is stored by content: its write names its element row, which holds it (once).
    const named = records.find((r) => r.kind === "write" && r.task_id === "task-2")!.decoded as { $type: string; hashes: string[] };
    expect(named).toEqual({ $type: "pg:val", hashes: [expect.stringMatching(/^[0-9a-f]{32}$/)] });
    expect(records.find((r) => r.kind === "blob" && r.channel === "__elements__" && r.version === named.hashes[0])!.decoded === big).toBe(true);
    const imported = await runCli(["import", file, ...flags("copy")]);
    expect(imported.code, imported.stderr).toBe(0);
    const copy = new PostgresSaver(db.pool, { schema: "copy" });
    await expectAllBack(copy, threadId, ids);
    const last = (await copy.getTuple(bigConfig))!;
    expect(last.pendingWrites!.find(([task]) => task === "task-2")![2] === big).toBe(true);
  });
});
