/**
 * Channel versions (src/saver/version.ts): new threads get short ones, threads in the
 * long or numeric format keep theirs, and LangGraph's two orders (`>` for
 * triggers, `compareChannelVersions` for the next version) agree with the
 * counter across the short format's width changes (35 -> 36 -> 1296 ...).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { compareChannelVersions, maxChannelVersion, type BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver } from "../../src/index.js";
import { officialVersion } from "../../src/ops/rollback.js";
import { isSyntheticVersion, realVersion } from "../../src/saver/upcast.js";
import { withTestDatabase } from "../helpers/db.js";
import { counter, LONG_VERSION_RE, tid, VERSION_RE } from "../helpers/graphs.js";

const db = withTestDatabase("versions");
let saver: PostgresSaver;
beforeAll(async () => {
  await migrate({ pool: db.pool });
  saver = new PostgresSaver(db.pool);
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id }, recursionLimit: 200 });
const next = (v: string | number | undefined) => saver.getNextVersion(v) as unknown as string | number;

/** Both of LangGraph's orders say a < b. */
function expectBefore(a: string | number, b: string | number): void {
  expect(b > a, `${String(b)} > ${String(a)}`).toBe(true);
  expect(compareChannelVersions(a, b), `compareChannelVersions(${String(a)}, ${String(b)})`).toBe(-1);
  expect(maxChannelVersion(a, b)).toBe(b);
  expect(maxChannelVersion(b, a)).toBe(b);
}

/** The saver of this package before short versions (its getNextVersion, as released), and the Python savers: long versions. */
class LongVersionSaver extends PostgresSaver {
  override getNextVersion(current: string | number | undefined): number {
    if (typeof current === "number") return Math.floor(current) + 1 + Math.random() / 2;
    const n = typeof current === "string" ? Number.parseInt(current.split(".")[0] ?? "0", 10) || 0 : 0;
    return `${String(n + 1).padStart(32, "0")}.${Math.random()}` as unknown as number;
  }
}

/** Integer versions, as the official JS saver writes them. */
class NumericVersionSaver extends PostgresSaver {
  override getNextVersion(current: string | number | undefined): number {
    return typeof current === "number" ? current + 1 : 1;
  }
}

/** A node that runs again and again until `n` reaches `until`: each step needs `>` to see the channel move. */
const LoopState = Annotation.Root({ n: Annotation<number>(), until: Annotation<number>() });
function loopGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(LoopState)
    .addNode("inc", (s) => ({ n: s.n + 1 }))
    .addEdge(START, "inc")
    .addConditionalEdges("inc", (s) => (s.n < s.until ? "inc" : END))
    .compile({ checkpointer });
}

async function versionsOf(threadId: string): Promise<(string | number)[]> {
  const out: (string | number)[] = [];
  for await (const t of saver.list(cfg(threadId))) out.push(...Object.values(t.checkpoint.channel_versions));
  for await (const t of saver.list(cfg(threadId))) for (const seen of Object.values(t.checkpoint.versions_seen)) out.push(...Object.values(seen));
  return out;
}

describe("getNextVersion", () => {
  it("counts up in short versions past every width change, in both of LangGraph's orders", () => {
    let v = next(undefined);
    expect(v).toMatch(VERSION_RE);
    expect(String(v).length).toBe(12);
    for (let i = 2; i <= 50_000; i++) {
      const w = next(v);
      expect(w).toMatch(VERSION_RE);
      expect(counter(w)).toBe(i);
      expectBefore(v, w);
      v = w;
    }
    // The width changes themselves: 35 -> 36 and 1295 -> 1296 (one more base-36 digit, one letter up).
    expect(String(next("-az.01234567")).startsWith("-b10.")).toBe(true);
    expectBefore("-az.zzzzzzzz", "-b10.00000000");
    expect(String(next("-bzz.01234567")).startsWith("-c100.")).toBe(true);
    expectBefore("-bzz.zzzzzzzz", "-c100.00000000");
    // Far beyond any thread's length the order still holds.
    const big = next(`-g${(36 ** 7 - 1).toString(36)}.01234567`);
    expect(counter(big)).toBe(36 ** 7);
    expectBefore(`-g${(36 ** 7 - 1).toString(36)}.99999999`, big);
  });

  it("keeps a long-format thread long; every long version sorts after every short one", () => {
    let v: string | number = "00000000000000000000000000000002.0.27282425125643517";
    for (let i = 3; i < 2000; i++) {
      const w = next(v);
      expect(w).toMatch(LONG_VERSION_RE);
      expect(counter(w)).toBe(i);
      expectBefore(v, w);
      v = w;
    }
    // The previous release reads a short version's counter as 0 and goes on in long versions: still forward.
    expectBefore(`-z${"z".repeat(26)}.99999999`, "00000000000000000000000000000001.0.5");
    expectBefore(next(next(undefined)), "00000000000000000000000000000000.0");
  });

  it("keeps numeric versions numbers (official JS threads)", () => {
    const v = next(41);
    expect(typeof v).toBe("number");
    expect(Math.floor(v as number)).toBe(42);
    expect((v as number) - 42).toBeLessThan(0.5);
  });

  it("differs between branches that reach the same counter", () => {
    const first = next(undefined);
    const many = new Set(Array.from({ length: 5000 }, () => next(first)));
    expect(many.size).toBe(5000);
    for (const v of many) expect(counter(v)).toBe(2);
  });

  it("marks upcast versions in the thread's format, after every version of their counter", () => {
    // upcast.ts writes `<counter>.u<state version>.<checkpoint id>`; upgradeState makes it `.r…`.
    for (const [synthetic, regular] of [
      ["-b1k.u2.1f0c5a8e-0000-6000-8000-000000000000", "-b1k.9zzzzzzz"],
      ["00000000000000000000000000000056.u2.1f0c5a8e-0000-6000-8000-000000000000", "00000000000000000000000000000056.0.9999"],
    ] as const) {
      expect(isSyntheticVersion(synthetic)).toBe(true);
      expect(isSyntheticVersion(regular)).toBe(false);
      expectBefore(regular, synthetic);
      const real = realVersion(synthetic) as string;
      expect(isSyntheticVersion(real)).toBe(false);
      expectBefore(regular, real);
      expect(counter(next(real))).toBe(57);
    }
  });

  it("rolls short versions back long for the Python saver (it parses the counter as a decimal) and as numbers for the JS saver", () => {
    expect(officialVersion("-b1k.3xf09qzl", "python")).toBe("00000000000000000000000000000056.3xf09qzl");
    expect(officialVersion("00000000000000000000000000000056.0.25", "python")).toBe("00000000000000000000000000000056.0.25");
    const js = officialVersion("-b1k.3xf09qzl", "js") as number;
    expect(Math.floor(js)).toBe(56);
    expect(js - 56).toBeLessThan(0.5);
    expect(officialVersion("-b1k.4xf09qzl", "js")).not.toBe(js);
  });
});

describe("graphs on the saver", () => {
  it("runs 40 steps on a new thread in short versions (across 35 -> 36), every step triggered", async () => {
    const threadId = tid("short");
    const graph = loopGraph(saver);
    expect(await graph.invoke({ n: 0, until: 40 }, cfg(threadId))).toEqual({ n: 40, until: 40 });
    const versions = await versionsOf(threadId);
    expect(versions.length).toBeGreaterThan(80);
    for (const v of versions) expect(v).toMatch(VERSION_RE);
    expect(Math.max(...versions.map(counter))).toBeGreaterThan(36);
    // And on: the next run continues from the stored versions.
    expect(await graph.invoke({ n: 0, until: 3 }, cfg(threadId))).toEqual({ n: 3, until: 3 });
  });

  it("continues a thread written in the long format (this package before, Python savers) in the long format", async () => {
    const threadId = tid("long");
    const old = new LongVersionSaver(db.pool);
    expect(await loopGraph(old).invoke({ n: 0, until: 5 }, cfg(threadId))).toEqual({ n: 5, until: 5 });
    const before = await versionsOf(threadId);
    for (const v of before) expect(v).toMatch(LONG_VERSION_RE);
    const graph = loopGraph(saver);
    expect(await graph.invoke({ n: 10, until: 15 }, cfg(threadId))).toEqual({ n: 15, until: 15 });
    const after = await versionsOf(threadId);
    expect(after.length).toBeGreaterThan(before.length);
    for (const v of after) expect(v).toMatch(LONG_VERSION_RE);
    expect((await graph.getState(cfg(threadId))).values).toEqual({ n: 15, until: 15 });
  });

  it("lets the previous release continue a short thread (rolling deploy, rollback): it goes on in long versions, every step triggered", async () => {
    const threadId = tid("rolling");
    expect(await loopGraph(saver).invoke({ n: 0, until: 40 }, cfg(threadId))).toEqual({ n: 40, until: 40 });
    const old = loopGraph(new LongVersionSaver(db.pool));
    expect(await old.invoke({ n: 0, until: 20 }, cfg(threadId))).toEqual({ n: 20, until: 20 });
    const head = (await saver.getTuple(cfg(threadId)))!;
    expect(Object.values(head.checkpoint.channel_versions).some((v) => LONG_VERSION_RE.test(String(v)))).toBe(true);
    // And back to this release: the thread is long now and stays long.
    expect(await loopGraph(saver).invoke({ n: 0, until: 10 }, cfg(threadId))).toEqual({ n: 10, until: 10 });
    const latest = (await saver.getTuple(cfg(threadId)))!;
    for (const v of Object.values(latest.checkpoint.channel_versions)) expect(v).toMatch(LONG_VERSION_RE);
  });

  it("continues a numeric thread (official JS saver) in numbers", async () => {
    const threadId = tid("numeric");
    expect(await loopGraph(new NumericVersionSaver(db.pool)).invoke({ n: 0, until: 3 }, cfg(threadId))).toEqual({ n: 3, until: 3 });
    const graph = loopGraph(saver);
    expect(await graph.invoke({ n: 0, until: 4 }, cfg(threadId))).toEqual({ n: 4, until: 4 });
    const versions = await versionsOf(threadId);
    for (const v of versions) expect(typeof v).toBe("number");
    expect(versions.some((v) => !Number.isInteger(v))).toBe(true);
  });

  it("gives two forks of one checkpoint their own versions and values", async () => {
    const threadId = tid("fork");
    const graph = loopGraph(saver);
    await graph.invoke({ n: 0, until: 3 }, cfg(threadId));
    const states = [];
    for await (const s of graph.getStateHistory(cfg(threadId))) states.push(s);
    const fork = states.find((s) => s.values.n === 1)!;
    // Two branches from n = 1: one counts to 5, the other to 7; both pass the same counters.
    const a = await graph.updateState(fork.config, { until: 5 });
    const b = await graph.updateState(fork.config, { until: 7 });
    const [ta, tb] = [(await saver.getTuple(a))!, (await saver.getTuple(b))!];
    expect(ta.checkpoint.channel_versions.until).not.toBe(tb.checkpoint.channel_versions.until);
    expect(counter(ta.checkpoint.channel_versions.until as string)).toBe(counter(tb.checkpoint.channel_versions.until as string));
    expect(await graph.invoke(null, { ...a, recursionLimit: 200 })).toEqual({ n: 5, until: 5 });
    expect(await graph.invoke(null, { ...b, recursionLimit: 200 })).toEqual({ n: 7, until: 7 });
    // Each branch reads its own values at every checkpoint (blobs are keyed by version).
    const byBranch = new Map<string, number[]>();
    for await (const t of saver.list(cfg(threadId))) {
      const until = t.checkpoint.channel_values.until as number;
      if (until !== 3) byBranch.set(String(until), [...(byBranch.get(String(until)) ?? []), t.checkpoint.channel_values.n as number]);
    }
    expect([...new Set(byBranch.get("5"))]).toEqual([5, 4, 3, 2, 1]);
    expect([...new Set(byBranch.get("7"))]).toEqual([7, 6, 5, 4, 3, 2, 1]);
  });

  it("reads long, short and numeric threads side by side", async () => {
    const ids = { long: tid("mix-long"), short: tid("mix-short"), numeric: tid("mix-num") };
    await loopGraph(new LongVersionSaver(db.pool)).invoke({ n: 0, until: 2 }, cfg(ids.long));
    await loopGraph(new NumericVersionSaver(db.pool)).invoke({ n: 0, until: 2 }, cfg(ids.numeric));
    await loopGraph(saver).invoke({ n: 0, until: 2 }, cfg(ids.short));
    for (const threadId of Object.values(ids)) {
      const head = await saver.getTuple(cfg(threadId));
      expect(head?.checkpoint.channel_values).toMatchObject({ n: 2, until: 2 });
      const listed = [];
      for await (const t of saver.list(cfg(threadId))) listed.push(t);
      expect(listed.length).toBe(4);
      // Every version the checkpoints name has its blob.
      for (const t of listed) for (const ch of Object.keys(t.checkpoint.channel_versions)) if (ch === "n" || ch === "until") expect(t.checkpoint.channel_values[ch]).toBeTypeOf("number");
    }
  });
});
