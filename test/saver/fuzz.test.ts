/**
 * Fuzzing the read path: tens of thousands of random, generated and mutated
 * msgpack frames, truncations, deep nesting, huge length headers, unknown
 * extensions and prototype-polluting keys, through MsgpackSerializer and
 * EncryptedSerializer. Every case must end in a value built only from the
 * allowlist, or a DeserializationError: nothing else thrown, no hang, no
 * prototype pollution. Seeded: FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<k>
 * multiplies the case counts.
 */
import { randomBytes } from "node:crypto";
import { Document } from "@langchain/core/documents";
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  ChatMessageChunk,
  FunctionMessage,
  FunctionMessageChunk,
  HumanMessage,
  HumanMessageChunk,
  RemoveMessage,
  SystemMessage,
  SystemMessageChunk,
  ToolMessage,
  ToolMessageChunk,
} from "@langchain/core/messages";
import { Send } from "@langchain/langgraph";
import { DeltaSnapshot } from "@langchain/langgraph-checkpoint";
import { encode, ExtData } from "@msgpack/msgpack";
import { afterAll, describe, expect, it } from "vitest";
import { DeserializationError, EncryptedSerializer, MsgpackSerializer } from "../../src/index.js";
import { cpuTime } from "../helpers/cpu.js";
import { prng } from "../helpers/random.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20250607);
const SCALE = Number(process.env.FUZZ_SCALE ?? 1);
const n = (count: number) => Math.max(1, Math.round(count * SCALE));

const serde = new MsgpackSerializer();

// ---------------------------------------------------------------------------
// What decoding may build
// ---------------------------------------------------------------------------

const ALLOWED_CLASSES = new Set<unknown>([
  Object,
  Array,
  Map,
  Set,
  Date,
  RegExp,
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
  Uint8Array,
  Int8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  ArrayBuffer,
  DataView,
  DeltaSnapshot,
  Document,
  HumanMessage,
  HumanMessageChunk,
  AIMessage,
  AIMessageChunk,
  SystemMessage,
  SystemMessageChunk,
  ToolMessage,
  ToolMessageChunk,
  ChatMessage,
  ChatMessageChunk,
  FunctionMessage,
  FunctionMessageChunk,
  RemoveMessage,
]);

/** Every object reachable from `value` is of an allowed class; plain objects have Object.prototype. Returns a reason or undefined. */
function disallowed(value: unknown): string | undefined {
  const seen = new Set<unknown>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || v === undefined) continue;
    const t = typeof v;
    if (t === "function") return "a function";
    if (t === "symbol") return "a symbol";
    if (t !== "object" || seen.has(v)) continue;
    seen.add(v);
    const proto = Object.getPrototypeOf(v) as { constructor?: unknown } | null;
    const ctor = proto === null ? Object : Object.prototype.hasOwnProperty.call(proto, "constructor") ? proto.constructor : undefined;
    if (!ALLOWED_CLASSES.has(ctor)) return `an instance of ${String((ctor as { name?: string } | undefined)?.name ?? "an unknown class")}`;
    if (v instanceof Map) {
      for (const [k, x] of v) stack.push(k, x);
    } else if (v instanceof Set) {
      for (const x of v) stack.push(x);
    } else if (!ArrayBuffer.isView(v) && !(v instanceof ArrayBuffer)) {
      for (const key of Reflect.ownKeys(v)) {
        const d = Object.getOwnPropertyDescriptor(v, key)!;
        if (d.get || d.set) {
          if (v instanceof Error && key === "stack") continue; // V8's own accessor
          return `an accessor property ${String(key)}`;
        }
        stack.push(d.value);
      }
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Prototype pollution: snapshot the built-in prototypes, compare at the end
// ---------------------------------------------------------------------------

const PROTOS: Array<[string, object]> = [
  ["Object.prototype", Object.prototype],
  ["Array.prototype", Array.prototype],
  ["Function.prototype", Function.prototype],
  ["Map.prototype", Map.prototype],
  ["Set.prototype", Set.prototype],
  ["Error.prototype", Error.prototype],
  ["String.prototype", String.prototype],
];
const snapshot = () => Object.fromEntries(PROTOS.map(([name, p]) => [name, Reflect.ownKeys(p).map(String).sort()]));
const before = snapshot();

afterAll(() => {
  const rows = Object.entries(totals).map(([label, s]) => `${label}: ${s.cases} cases, ${s.values} values, ${s.errors} typed errors, slowest ${s.slowestMs.toFixed(1)} ms`);
  const total = Object.values(totals).reduce((a, s) => a + s.cases, 0);
  console.log(`[fuzz] seed ${SEED}: ${total} cases\n  ${rows.join("\n  ")}`);
  expect(snapshot()).toEqual(before);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(Object.getPrototypeOf({})).toBe(Object.prototype);
});

// ---------------------------------------------------------------------------
// Running cases
// ---------------------------------------------------------------------------

interface Stats {
  cases: number;
  values: number;
  errors: number;
  slowestMs: number;
}

const totals: Record<string, Stats> = {};

/** One input: a value of allowed classes, or a DeserializationError; anything else fails with the input in hex. */
async function check(label: string, load: () => Promise<unknown>, input: Uint8Array | string): Promise<void> {
  const stats = (totals[label] ??= { cases: 0, values: 0, errors: 0, slowestMs: 0 });
  stats.cases++;
  const t0 = performance.now();
  let value: unknown;
  try {
    value = await load();
  } catch (error) {
    stats.errors++;
    if (!(error instanceof DeserializationError)) {
      throw new Error(`[${label}] seed ${SEED}: input ${show(input)} threw ${String(error)} (${(error as Error)?.constructor?.name}), not DeserializationError`);
    }
    // Typed errors never quote the payload back.
    if ((error as Error).message.length > 300) throw new Error(`[${label}] overlong error message for ${show(input)}`);
    return;
  } finally {
    stats.slowestMs = Math.max(stats.slowestMs, performance.now() - t0);
  }
  stats.values++;
  const bad = disallowed(value);
  if (bad) throw new Error(`[${label}] seed ${SEED}: input ${show(input)} built ${bad}`);
}

function show(input: Uint8Array | string): string {
  if (typeof input === "string") return JSON.stringify(input.slice(0, 200));
  const hex = Buffer.from(input.subarray(0, 96)).toString("hex");
  return input.length > 96 ? `${hex}… (${input.length} bytes)` : hex;
}

const msgpack = (bytes: Uint8Array) => () => serde.loadsTyped("msgpack", bytes);

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------

/** Valid encodings of every kind of value the serializer writes. */
async function corpus(): Promise<Uint8Array[]> {
  const values: unknown[] = [
    null,
    undefined,
    true,
    -0,
    Number.NaN,
    2 ** 53,
    -123456789n,
    2n ** 100n,
    "",
    "text",
    "a\uD800b",
    "x".repeat(300),
    [],
    [1, [2, [3, [4]]]],
    { a: 1, b: { c: [1, 2] } },
    JSON.parse('{"__proto__": {"polluted": 1}, "constructor": {"prototype": {"polluted": 1}}}'),
    new Map<unknown, unknown>([
      [1, "one"],
      [{ k: 1 }, new Set([1, 2])],
    ]),
    new Set(["a", 1, null]),
    new Date(1_700_000_000_123),
    new Date(Number.NaN),
    /ab+c/giu,
    new TypeError("bad", { cause: new Error("inner") }),
    Object.assign(new Error("with props"), { code: "E1", detail: { x: 1 } }),
    new Uint8Array([1, 2, 3]),
    new Float64Array([1.5, -2]),
    new BigInt64Array([1n, -1n]),
    new ArrayBuffer(8),
    new DataView(new ArrayBuffer(4)),
    new DeltaSnapshot({ v: [1, 2] }),
    new Document({ pageContent: "page", metadata: { source: "s" }, id: "d1" }),
    new HumanMessage({ id: "h", content: "hi" }),
    new AIMessage({ id: "a", content: "yo", tool_calls: [{ name: "f", args: { q: 1 }, id: "c1", type: "tool_call" }] }),
    new ToolMessage({ content: "r", tool_call_id: "c1" }),
    new SystemMessage("sys"),
    new Send("node", { arg: 1 }),
  ];
  values.push({ all: [...values] });
  return Promise.all(values.map(async (v) => (await serde.dumpsTyped(v))[1]));
}

/** Random msgpack built from the grammar, biased towards extensions, big headers and odd keys. */
function generate(r: ReturnType<typeof prng>, depth = 0): number[] {
  const leaf = (): number[] => {
    switch (r.int(10)) {
      case 0:
        return [0xc0];
      case 1:
        return [r.pick([0xc2, 0xc3])];
      case 2:
        return [r.int(128)];
      case 3:
        return [0xcb, ...r.bytes(8)];
      case 4: {
        const s = r.pick(["__proto__", "constructor", "prototype", "lc", "lg_name", "a", "toString", "valueOf", "hasOwnProperty", "polluted"]);
        return [0xa0 | s.length, ...Buffer.from(s)];
      }
      case 5: {
        const len = r.int(6);
        return [0xc4, len, ...r.bytes(len)];
      }
      case 6:
        return [r.pick([0xd9, 0xc4, 0xc5, 0xc6, 0xda, 0xdb]), ...r.bytes(r.pick([1, 2, 4]))]; // a length header, often lying
      case 7: {
        const len = r.pick([1, 2, 4, 8, 16]);
        const code = { 1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8 }[len]!;
        return [code, (r.int(20) - 2) & 0xff, ...r.bytes(len)];
      }
      case 8:
        return [0xd3, ...r.bytes(8)];
      default:
        return [0xe0 | r.int(32)];
    }
  };
  if (depth > 6 || r.next() < 0.35) return leaf();
  const kind = r.int(4);
  const count = r.int(4);
  const children = (k: number) => Array.from({ length: k }, () => generate(r, depth + 1)).flat();
  if (kind === 0) return [0x90 | count, ...children(count)];
  if (kind === 1) return [0x80 | count, ...children(count * 2)];
  // An extension whose payload is itself generated msgpack.
  const payload = generate(r, depth + 1);
  const type = r.pick([-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 100, -128]);
  return payload.length < 256 ? [0xc7, payload.length, type & 0xff, ...payload] : [0xc8, payload.length >> 8, payload.length & 0xff, type & 0xff, ...payload];
}

function mutate(r: ReturnType<typeof prng>, input: Uint8Array, other: Uint8Array): Uint8Array {
  const out = Array.from(input);
  const edits = 1 + r.int(4);
  for (let e = 0; e < edits; e++) {
    const at = r.int(Math.max(1, out.length));
    switch (r.int(7)) {
      case 0:
        out[at] = (out[at] ?? 0) ^ (1 << r.int(8));
        break;
      case 1:
        out[at] = r.pick([0x00, 0xff, 0x7f, 0x80, 0xc1, 0xc0, 0xdc, 0xdd, 0xde, 0xdf, 0xc7, 0xc8, 0xc9, 0xd4, 0xd8, 0xdb, 0xc6]);
        break;
      case 2:
        out.splice(at, 0, ...r.bytes(1 + r.int(4)));
        break;
      case 3:
        out.splice(at, 1 + r.int(8));
        break;
      case 4: {
        const from = r.int(Math.max(1, other.length));
        out.splice(at, r.int(8), ...other.subarray(from, from + 1 + r.int(32)));
        break;
      }
      case 5:
        out.splice(at, 0, ...out.slice(at, at + 1 + r.int(16))); // duplicate a run
        break;
      default:
        // A length field: overwrite 4 bytes with a huge number.
        out.splice(at, 4, 0xff, 0xff, 0xff, r.int(256));
        break;
    }
  }
  return Uint8Array.from(out);
}

const ext = (type: number, data: Uint8Array): number[] =>
  data.length < 256 ? [0xc7, data.length, type & 0xff, ...data] : [0xc9, ...u32(data.length), type & 0xff, ...data];
const u32 = (x: number) => [(x >>> 24) & 0xff, (x >>> 16) & 0xff, (x >>> 8) & 0xff, x & 0xff];
const str = (s: string) => {
  const b = Buffer.from(s);
  return b.length < 32 ? [0xa0 | b.length, ...b] : [0xd9, b.length, ...b];
};

// ---------------------------------------------------------------------------

describe(`fuzzing MsgpackSerializer.loadsTyped (seed ${SEED})`, () => {
  it("random bytes", async () => {
    const r = prng(SEED);
    for (let i = 0; i < n(5_000); i++) {
      const input = r.bytes(r.int(r.next() < 0.9 ? 48 : 1_024));
      await check("random bytes", msgpack(input), input);
    }
  });

  it("random frames from the msgpack grammar (extensions, lying headers, odd keys)", async () => {
    const r = prng(SEED + 1);
    for (let i = 0; i < n(8_000); i++) {
      const input = Uint8Array.from(generate(r));
      await check("generated frames", msgpack(input), input);
    }
  });

  it("mutations of valid encodings of every supported type", async () => {
    const r = prng(SEED + 2);
    const valid = await corpus();
    for (const v of valid) await check("valid corpus", msgpack(v), v);
    for (let i = 0; i < n(10_000); i++) {
      const input = mutate(r, r.pick(valid), r.pick(valid));
      await check("mutations", msgpack(input), input);
    }
  });

  it("every truncation of every valid encoding", async () => {
    const valid = await corpus();
    for (const v of valid) {
      for (let len = 0; len < v.length; len++) {
        const input = v.subarray(0, len);
        await check("truncations", msgpack(input), input);
      }
    }
  });

  it("deep nesting (arrays, maps, extensions) stops at the depth limit, without a stack overflow", async () => {
    const cases: number[][] = [
      new Array<number>(200_000).fill(0x91),
      Array.from({ length: 50_000 }, () => [0x81, 0xa1, 0x61]).flat(),
      Array.from({ length: 50_000 }, () => [0x81, ...str("__proto__")]).flat(),
    ];
    // Extensions nested inside extensions: Set(Set(Set(...))), Map, Error cause, LangGraph objects.
    for (const type of [1, 2, 5, 7, 8, 11]) {
      let payload: number[] = [0xc0];
      for (let i = 0; i < 600; i++) payload = type === 2 || type === 8 ? ext(type, Uint8Array.from([0x91, ...payload])) : ext(type, Uint8Array.from([0x92, ...str("k"), ...payload]));
      cases.push(payload);
    }
    for (const c of cases) {
      const input = Uint8Array.from(c);
      const { ms } = await cpuTime(() => check("deep nesting", msgpack(input), input));
      expect(ms).toBeLessThan(2_000);
    }
    await expect(serde.loadsTyped("msgpack", Uint8Array.from(cases[0]!))).rejects.toThrow(/nested deeper than 512/);
  });

  it("huge length headers allocate nothing and fail fast", async () => {
    const rss = process.memoryUsage().rss;
    const heads = [
      [0xdd, ...u32(0xffffffff)],
      [0xdc, 0xff, 0xff],
      [0xdf, ...u32(0xffffffff)],
      [0xde, 0xff, 0xff],
      [0xdb, ...u32(0xffffffff)],
      [0xda, 0xff, 0xff],
      [0xc6, ...u32(0xffffffff)],
      [0xc9, ...u32(0xffffffff), 0x01],
      [0xc9, ...u32(0x7fffffff), 0x09],
      [0xc8, 0xff, 0xff, 0x02],
    ];
    for (const head of heads) {
      for (const tail of [[], [0x01], Array.from(randomBytes(64))]) {
        // Alone, and inside containers and extension payloads.
        for (const wrap of [(x: number[]) => x, (x: number[]) => [0x91, ...x], (x: number[]) => [0x81, ...str("k"), ...x], (x: number[]) => ext(2, Uint8Array.from([0x91, ...x]))]) {
          const input = Uint8Array.from(wrap([...head, ...tail]));
          const { ms } = await cpuTime(() => check("huge lengths", msgpack(input), input));
          // Microseconds of work; a garbage collection may land in any case. Honouring a 4 GiB
          // header (allocating or looping) would take seconds.
          expect(ms).toBeLessThan(500);
        }
      }
    }
    expect(process.memoryUsage().rss - rss).toBeLessThan(256 * 1024 * 1024);
  });

  it("every extension type outside the table, with assorted payloads, is refused", async () => {
    const known = new Set([-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    for (let type = -128; type < 128; type++) {
      for (const data of [new Uint8Array(), Uint8Array.from([0xc0]), Uint8Array.from([0x90]), randomBytes(17)]) {
        const input = Uint8Array.from([0x91, ...ext(type, data)]);
        if (known.has(type)) {
          await check("known extension types, random payloads", msgpack(input), input);
        } else {
          await expect(serde.loadsTyped("msgpack", input)).rejects.toThrow(new RegExp(`Unknown msgpack extension type ${type}`));
          await check("unknown extension types", msgpack(input), input);
        }
      }
    }
  });

  it("__proto__ / constructor / prototype keys never reach a prototype", async () => {
    const keys = ["__proto__", "constructor", "prototype"];
    const evil = [0x81, ...str("polluted"), 0xc3]; // { polluted: true }
    const frames: number[][] = [];
    for (const k of keys) {
      frames.push([0x81, ...str(k), ...evil]); // { k: { polluted: true } }
      frames.push([0x81, ...str(k), 0x81, ...str("prototype"), ...evil]); // { k: { prototype: {...} } }
      frames.push([0x82, ...str("a"), 0x01, ...str(k), ...evil]);
      frames.push([0x91, 0x81, ...str(k), ...evil]); // inside an array
      frames.push(ext(11, Uint8Array.from([0x92, ...str(k), ...evil]))); // the __proto__-key object extension
      frames.push(ext(1, Uint8Array.from([0x92, ...str(k), ...evil]))); // Map with that key
      frames.push(ext(5, Uint8Array.from([0x94, ...str("Error"), ...str("m"), 0xc0, 0x81, ...str(k), ...evil]))); // Error props
      frames.push(ext(5, Uint8Array.from([0x94, ...str(k), ...str("m"), 0xc0, 0xc0]))); // Error named __proto__
      frames.push(ext(6, Uint8Array.from([0x92, 0x93, ...str("langchain_core"), ...str("messages"), ...str(k), 0x80]))); // LangChain id
      frames.push(ext(6, Uint8Array.from([0x92, 0x93, ...str("langchain_core"), ...str("messages"), ...str("HumanMessage"), 0x82, ...str("content"), ...str("x"), ...str(k), ...evil])));
      frames.push(ext(13, Uint8Array.from([0x93, ...str("p"), 0x81, ...str(k), ...evil, 0xc0]))); // Document metadata
      frames.push(ext(7, Uint8Array.from([0x81, ...str(k), ...evil]))); // LangGraph object
    }
    for (const f of frames) {
      const input = Uint8Array.from(f);
      await check("prototype keys", msgpack(input), input);
      const value = await serde.loadsTyped("msgpack", input).catch((e: unknown) => e);
      if (value instanceof DeserializationError) continue;
      // Whatever came back: own data properties only, on ordinary prototypes.
      expect(disallowed(value)).toBeUndefined();
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(([] as unknown as Record<string, unknown>).polluted).toBeUndefined();
    }
  });

  it("LangChain ids outside the allowlist build nothing (no constructor runs)", async () => {
    const ids = [
      ["langchain_core", "prompts", "PromptTemplate"],
      ["langchain_core", "runnables", "RunnableLambda"],
      ["langchain_core", "messages", "BaseMessage"],
      ["langchain", "schema", "HumanMessage"],
      ["langchain_core", "messages"],
      ["__proto__"],
      ["constructor"],
      [],
    ];
    for (const id of ids) {
      const input = Uint8Array.from(ext(6, encode([id, { content: "x", template: "{x}", input_variables: ["x"] }])));
      await expect(serde.loadsTyped("msgpack", input)).rejects.toBeInstanceOf(DeserializationError);
    }
  });

  it("random and hostile type tags", async () => {
    const r = prng(SEED + 3);
    const tags = ["", "pickle", "MSGPACK", "msgpack ", "json\u0000", "__proto__", "constructor", "enc:k1:msgpack", "bytes:", "𝓂𝓈𝑔"];
    for (let i = 0; i < n(1_000); i++) {
      const tag = r.next() < 0.5 ? r.pick(tags) : String.fromCharCode(...Array.from({ length: r.int(12) }, () => r.int(0x3000)));
      const input = r.bytes(r.int(16));
      if (tag === "bytes" || tag === "json" || tag === "msgpack") continue;
      await check("type tags", () => serde.loadsTyped(tag, input), input);
    }
  });

  it('type "json" rows (read for compatibility) build no class outside the allowlist', async () => {
    // LangGraph's JsonPlusSerializer revives {lc: 1, type: "constructor"} through
    // @langchain/core/load, which can build any class of @langchain/core.
    const revive = (id: string[]) =>
      new TextEncoder().encode(JSON.stringify({ v: { lc: 1, type: "constructor", id, kwargs: { template: "{x}", input_variables: ["x"], content: "x" } } }));
    for (const id of [
      ["langchain_core", "prompts", "PromptTemplate"],
      ["langchain_core", "prompts", "prompt", "PromptTemplate"],
      ["langchain_core", "runnables", "RunnablePassthrough"],
    ]) {
      await check("json rows", () => serde.loadsTyped("json", revive(id)), id.join("."));
    }
    // Messages (the allowlist) still come back as their classes.
    const message = await serde.loadsTyped("json", revive(["langchain_core", "messages", "HumanMessage"]));
    expect(message.v).toBeInstanceOf(HumanMessage);
  });
});

describe(`fuzzing EncryptedSerializer.loadsTyped (seed ${SEED})`, () => {
  const key = randomBytes(32);
  const enc = new EncryptedSerializer({ keys: { k1: key }, current: "k1" });

  it("random bytes under the encrypted tag, mutated ciphertexts, and plaintext under any tag: typed errors only", async () => {
    const r = prng(SEED + 4);
    const valid = await Promise.all((await corpus()).slice(0, 20).map(async (_, i) => (await enc.dumpsTyped({ i, s: "secret" }))[1]));
    for (let i = 0; i < n(3_000); i++) {
      const input = r.next() < 0.5 ? r.bytes(r.int(64)) : mutate(r, r.pick(valid), r.pick(valid));
      const tag = r.pick(["enc:k1:msgpack", "enc:k1:json", "enc:k2:msgpack", "enc:k1:", "enc:", "msgpack", "json", "bytes"]);
      await check("encrypted", () => enc.loadsTyped(tag, input), input);
    }
    // Valid ciphertexts still decrypt after all that.
    expect(await enc.loadsTyped("enc:k1:msgpack", valid[3]!)).toEqual({ i: 3, s: "secret" });
  });
});
