/**
 * MsgpackSerializer: exact round trips, the allowlist, hostile input, and a real
 * LangGraph run (messages, Send fan-out, interrupt + Command resume). No database.
 */
import { describe, expect, it } from "vitest";
import { encode as rawEncode, ExtData } from "@msgpack/msgpack";
import { DeltaSnapshot, JsonPlusSerializer, MemorySaver, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import {
  AIMessage,
  AIMessageChunk,
  BaseMessage,
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
import { Document } from "@langchain/core/documents";
import { ChatPromptValue } from "@langchain/core/prompt_values";
import { PromptTemplate } from "@langchain/core/prompts";
import { Serializable } from "@langchain/core/load/serializable";
import {
  Annotation,
  Command,
  END,
  interrupt,
  MessagesAnnotation,
  Overwrite,
  Send,
  START,
  StateGraph,
} from "@langchain/langgraph";
import { MAX_DEPTH, MsgpackSerializer } from "../../src/serde/serde.js";
import { DeserializationError, SerializationError } from "../../src/errors.js";
import { cpuTime } from "../helpers/cpu.js";
import { prng } from "../helpers/random.js";

const serde = new MsgpackSerializer();
/** Refuses what would not come back exactly (the default stores its JSON form: test/serde/serde-modes.test.ts). */
const strict = new MsgpackSerializer({ strict: true });

async function roundTrip<T>(value: T, s: MsgpackSerializer = serde): Promise<T> {
  const [type, bytes] = await s.dumpsTyped(value);
  expect(type).toBe("msgpack");
  expect(bytes).toBeInstanceOf(Uint8Array);
  return (await s.loadsTyped(type, bytes)) as T;
}

async function expectDeserializationError(data: Uint8Array | string, type = "msgpack"): Promise<DeserializationError> {
  let caught: unknown;
  try {
    await serde.loadsTyped(type, data);
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected DeserializationError for ${hex(data)}`).toBeInstanceOf(DeserializationError);
  return caught as DeserializationError;
}

async function expectSerializationError(value: unknown, s: MsgpackSerializer = serde): Promise<SerializationError> {
  let caught: unknown;
  try {
    await s.dumpsTyped(value);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(SerializationError);
  return caught as SerializationError;
}

function hex(data: Uint8Array | string): string {
  if (typeof data === "string") return JSON.stringify(data);
  return Buffer.from(data.subarray(0, 24)).toString("hex") + (data.length > 24 ? "…" : "");
}

const ext = (type: number, payload: unknown): ExtData => new ExtData(type, rawEncode(payload));

describe("MsgpackSerializer: primitives and plain data", () => {
  it("always answers type msgpack, also for Uint8Array", async () => {
    expect((await serde.dumpsTyped(new Uint8Array([1, 2])))[0]).toBe("msgpack");
    expect((await serde.dumpsTyped("x"))[0]).toBe("msgpack");
    expect((await serde.dumpsTyped(undefined))[0]).toBe("msgpack");
  });

  it.each([
    ["null", null],
    ["undefined", undefined],
    ["true", true],
    ["false", false],
    ["zero", 0],
    ["negative zero", -0],
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["-Infinity", Number.NEGATIVE_INFINITY],
    ["small int", 42],
    ["negative int", -33],
    ["int32 min", -(2 ** 31)],
    ["uint32 max", 2 ** 32 - 1],
    ["2^32", 2 ** 32],
    ["max safe", Number.MAX_SAFE_INTEGER],
    ["min safe", Number.MIN_SAFE_INTEGER],
    ["2^60 (unsafe integer)", 2 ** 60],
    ["float", 1.5],
    ["tiny float", 5e-324],
    ["max float", Number.MAX_VALUE],
    ["empty string", ""],
    ["ascii", "hello"],
    ["unicode", "héllo wörld ✓ 日本語 👍🏽"],
    ["NUL", "a\u0000b"],
    ["long string", "x".repeat(100_000)],
    ["lone high surrogate (short)", "a\uD800b"],
    ["lone low surrogate (short)", "\uDC00"],
    ["lone surrogate (long)", `${"é".repeat(300)}\uD83D`],
    ["reversed pair", "\uDC00\uD800"],
  ])("%s round-trips exactly", async (_name, value) => {
    const out = await roundTrip(value);
    expect(Object.is(out, value)).toBe(true);
  });

  it("object keys with lone surrogates: short ones round-trip, long ones are refused (never altered)", async () => {
    const short = { "k\uD800": 1, "\uDC00": { "x\uD83D": 2 } };
    expect(await roundTrip(short)).toStrictEqual(short);
    const error = await expectSerializationError({ [`${"k".repeat(60)}\uD800`]: 1 });
    expect(error.message).toMatch(/lone surrogate/);
    const fine = { [`${"日本".repeat(40)}👍`]: 1 };
    expect(await roundTrip(fine)).toStrictEqual(fine);
  });

  it("keeps undefined distinct from null inside objects and arrays", async () => {
    const value = { a: undefined, b: null, c: [undefined, null, 1], d: { e: undefined } };
    const out = await roundTrip(value);
    expect(out).toStrictEqual(value);
    expect(Object.prototype.hasOwnProperty.call(out, "a")).toBe(true);
    expect(out.a).toBeUndefined();
    expect(out.b).toBeNull();
    expect(out.c).toHaveLength(3);
    expect(out.c[0]).toBeUndefined();
    expect(out.c[1]).toBeNull();
    expect(Object.keys(out.d)).toEqual(["e"]);
  });

  it("keeps -0 and NaN inside containers", async () => {
    const out = await roundTrip({ z: -0, n: Number.NaN, list: [-0, 0, Number.NEGATIVE_INFINITY] });
    expect(Object.is(out.z, -0)).toBe(true);
    expect(Number.isNaN(out.n)).toBe(true);
    expect(Object.is(out.list[0], -0)).toBe(true);
    expect(Object.is(out.list[1], 0)).toBe(true);
    expect(out.list[2]).toBe(Number.NEGATIVE_INFINITY);
  });

  it("round-trips nested arrays and objects, keeping key order", async () => {
    const value = {
      z: 1,
      a: [1, [2, [3, [4, { deep: ["x", { y: [] }] }]]]],
      obj: { "with space": 1, "": 2, "ü": 3, "123": 4 },
      empty: {},
      emptyList: [],
      big: Array.from({ length: 70_000 }, (_, i) => i),
      wide: Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, i])),
    };
    const out = await roundTrip(value);
    expect(out).toStrictEqual(value);
    expect(Object.keys(out)).toEqual(Object.keys(value));
  });

  it("decodes plain objects with Object.prototype (also null-prototype input)", async () => {
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1, b: { c: 2 } });
    const out = await roundTrip(nullProto);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(out).toEqual({ a: 1, b: { c: 2 } });
  });

  it("accepts nesting up to MAX_DEPTH and refuses deeper values", async () => {
    const nest = (levels: number): unknown => {
      let value: unknown = "leaf";
      for (let i = 0; i < levels; i++) value = i % 2 ? { v: value } : [value];
      return value;
    };
    const ok = nest(MAX_DEPTH);
    expect(await roundTrip(ok)).toStrictEqual(ok);
    const error = await expectSerializationError(nest(MAX_DEPTH + 1));
    expect(error.message).toMatch(/deeper than 512/);
  });

  it("returns an independent buffer for every call", async () => {
    const [, first] = await serde.dumpsTyped({ a: "first" });
    const copy = first.slice();
    await serde.dumpsTyped({ b: "second, longer, value".repeat(10) });
    expect(first).toEqual(copy);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => serde.dumpsTyped({ i, s: "x".repeat(i) })));
    const decoded = await Promise.all(results.map(([t, b]) => serde.loadsTyped(t, b)));
    decoded.forEach((value, i) => expect(value).toEqual({ i, s: "x".repeat(i) }));
  });

  it("handles values larger than the retained encoder buffer, then small ones", async () => {
    const big = { blob: new Uint8Array(3 << 20).fill(7), nested: new Map([["k", "v".repeat(2 << 20)]]) };
    const out = await roundTrip(big);
    expect(out.blob).toBeInstanceOf(Uint8Array);
    expect(Buffer.compare(out.blob, big.blob)).toBe(0);
    expect(out.nested.get("k") === big.nested.get("k")).toBe(true);
    expect(await roundTrip({ small: new Map([[1, 2]]) })).toEqual({ small: new Map([[1, 2]]) });
  });

  it("survives reentrant use (a getter that serializes while serializing)", async () => {
    let inner: [string, Uint8Array] | undefined;
    const value = {
      before: new Map([["a", 1]]),
      get during() {
        void serde.dumpsTyped({ inner: new Set([1, 2]) }).then((r) => (inner = r));
        return "d";
      },
      after: new Set(["z"]),
    };
    const out = await roundTrip(value);
    expect(out).toEqual({ before: new Map([["a", 1]]), during: "d", after: new Set(["z"]) });
    expect(inner).toBeDefined();
    expect(await serde.loadsTyped(inner![0], inner![1])).toEqual({ inner: new Set([1, 2]) });
  });
});

describe("MsgpackSerializer.fitsUnder: a bound, never an underestimate (issue 40: small values skip storage by content)", () => {
  const serde = new MsgpackSerializer();
  const UNITS = ["a", "é", "€", "\u{1F600}", "\ud800", "\udfff", "\u0000", "\uffff"];

  it("whenever it says a value takes fewer than N bytes, dumpsTyped writes fewer: strings (ill-formed ones too), numbers, nested arrays", async () => {
    const rng = prng(40);
    const value = (depth: number): unknown => {
      const kind = rng.int(depth < 3 ? 8 : 6);
      if (kind === 0) return Array.from({ length: rng.int(40) }, () => rng.pick(UNITS)).join("");
      if (kind === 1) return rng.pick([0, -0, 1.5, -1, 2 ** 31, 2 ** 53, -(2 ** 63), NaN, Infinity, 127, 128, 65536]);
      if (kind === 2) return rng.next() < 0.5;
      if (kind === 3) return null;
      if (kind === 4) return undefined;
      if (kind === 5) return "x".repeat(rng.int(300));
      return Array.from({ length: rng.int(12) }, () => value(depth + 1));
    };
    let fitted = 0;
    for (let i = 0; i < 3000; i++) {
      const v = value(0);
      const [, bytes] = await serde.dumpsTyped(v);
      for (const limit of [4, 16, 64, 256]) {
        if (serde.fitsUnder(v, limit)) {
          fitted++;
          expect(bytes.byteLength, JSON.stringify(v)).toBeLessThan(limit);
        }
      }
    }
    expect(fitted).toBeGreaterThan(1000);
  });

  it("does not bound what it does not look into: objects, instances, bigints; nor a string whose bound reaches the limit", () => {
    for (const v of [{}, { a: 1 }, [{ a: 1 }], new Date(0), new Map(), 1n, Symbol("s"), () => 1, "x".repeat(100)]) expect(serde.fitsUnder(v, 256)).toBe(false);
    expect(serde.fitsUnder(["n0", "n1"], 256)).toBe(true);
  });
});

describe("MsgpackSerializer: built-in classes", () => {
  it("Uint8Array comes back as a fresh Uint8Array (not a view of the input)", async () => {
    const bytes = new Uint8Array([0, 1, 2, 255]);
    const [type, data] = await serde.dumpsTyped({ bytes });
    const out = await serde.loadsTyped(type, data);
    expect(out.bytes).toBeInstanceOf(Uint8Array);
    expect(Buffer.isBuffer(out.bytes)).toBe(false);
    expect(out.bytes).toEqual(bytes);
    expect(out.bytes.buffer.byteLength).toBe(4);
    data.fill(0);
    expect([...out.bytes]).toEqual([0, 1, 2, 255]);
  });

  it("Buffer, subarrays and empty arrays keep their content", async () => {
    const buf = Buffer.from("hello");
    const out = await roundTrip(buf);
    expect(out).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(out).toString()).toBe("hello");
    const sub = new Uint8Array([9, 8, 7, 6, 5]).subarray(1, 3);
    expect([...(await roundTrip(sub))]).toEqual([8, 7]);
    expect(await roundTrip(new Uint8Array(0))).toEqual(new Uint8Array(0));
  });

  it("Buffer input to loadsTyped works and results do not alias it", async () => {
    const [, data] = await serde.dumpsTyped({ b: new Uint8Array([1, 2, 3]) });
    const out = await serde.loadsTyped("msgpack", Buffer.from(data));
    expect(out.b).toBeInstanceOf(Uint8Array);
    expect(Buffer.isBuffer(out.b)).toBe(false);
    expect([...out.b]).toEqual([1, 2, 3]);
  });

  it.each([
    new Int8Array([-1, 2, -128]),
    new Uint8ClampedArray([0, 255, 3]),
    new Int16Array([-32768, 1, 32767]),
    new Uint16Array([65535, 1]),
    new Int32Array([-(2 ** 31), 7]),
    new Uint32Array([2 ** 32 - 1]),
    new Float32Array([1.5, Number.NaN, -0]),
    new Float64Array([Math.PI, Number.NEGATIVE_INFINITY]),
    new BigInt64Array([-(2n ** 63n), 5n]),
    new BigUint64Array([2n ** 64n - 1n]),
  ])("typed array %s keeps its kind and content", async (array) => {
    const out = await roundTrip(array);
    expect(out.constructor).toBe(array.constructor);
    expect(out).toStrictEqual(array);
  });

  it("typed array views with an offset, ArrayBuffer and DataView", async () => {
    const base = new Int16Array([1, 2, 3, 4, 5]);
    const view = new Int16Array(base.buffer, 2, 2);
    const out = await roundTrip(view);
    expect([...out]).toEqual([2, 3]);
    const buffer = new Uint8Array([1, 2, 3]).buffer;
    const outBuffer = await roundTrip(buffer);
    expect(outBuffer).toBeInstanceOf(ArrayBuffer);
    expect([...new Uint8Array(outBuffer)]).toEqual([1, 2, 3]);
    const dv = new DataView(new Uint8Array([4, 5, 6, 7]).buffer, 1, 2);
    const outDv = await roundTrip(dv);
    expect(outDv).toBeInstanceOf(DataView);
    expect(outDv.byteLength).toBe(2);
    expect(outDv.getUint8(0)).toBe(5);
  });

  it("Date keeps millisecond precision, also before 1970 and far away; invalid Date too", async () => {
    for (const ms of [0, 1, 1_700_000_000_123, -1, -86_400_001, 8.64e15, -8.64e15, 253402300799999]) {
      const out = await roundTrip(new Date(ms));
      expect(out).toBeInstanceOf(Date);
      expect(out.getTime()).toBe(ms);
    }
    const invalid = await roundTrip({ d: new Date(Number.NaN) });
    expect(invalid.d).toBeInstanceOf(Date);
    expect(Number.isNaN(invalid.d.getTime())).toBe(true);
  });

  it("Map with any keys, nested, and Set", async () => {
    const objKey = { k: 1 };
    const map = new Map<unknown, unknown>([
      ["s", 1],
      [1, "one"],
      [objKey, new Map([[null, undefined]])],
      [undefined, [1n, new Date(5)]],
      [new Set([1]), new Set(["a", { b: [] }])],
    ]);
    const out = await roundTrip({ map, empty: new Map(), emptySet: new Set() });
    expect(out.map).toBeInstanceOf(Map);
    expect(out.map).toStrictEqual(map);
    expect([...out.map.keys()][2]).toEqual(objKey);
    expect(out.empty).toStrictEqual(new Map());
    expect(out.emptySet).toStrictEqual(new Set());
  });

  it("bigint of any size and sign", async () => {
    const rand = prng(7).next;
    const values = [0n, 1n, -1n, 255n, 256n, -256n, 2n ** 63n, -(2n ** 64n), 2n ** 1000n + 12345n, -(3n ** 500n)];
    for (let i = 0; i < 50; i++) {
      let v = 0n;
      for (let j = 0; j < 1 + Math.floor(rand() * 10); j++) v = (v << 32n) + BigInt(Math.floor(rand() * 2 ** 32));
      values.push(rand() < 0.5 ? -v : v);
    }
    const out = await roundTrip(values);
    expect(out).toStrictEqual(values);
  });

  it("RegExp keeps source and flags", async () => {
    for (const re of [/a+b/gi, /^\d{3}-\w+$/mu, new RegExp("x/y", "sy"), /(?<name>.)\k<name>/d]) {
      const out = await roundTrip(re);
      expect(out).toBeInstanceOf(RegExp);
      expect(out.source).toBe(re.source);
      expect(out.flags).toBe(re.flags);
    }
  });

  it("Error keeps class (built-ins), name, message, stack, cause and own properties", async () => {
    const plain = new Error("boom");
    const typeError = new TypeError("bad type");
    const withCause = new Error("outer", { cause: new RangeError("inner") });
    class CustomError extends Error {
      code = "E_CUSTOM";
      constructor(message: string) {
        super(message);
        this.name = "CustomError";
      }
    }
    const custom = new CustomError("custom");
    const out = await roundTrip({ plain, typeError, withCause, custom });
    expect(out.plain).toBeInstanceOf(Error);
    expect(out.plain.message).toBe("boom");
    expect(out.plain.name).toBe("Error");
    expect(out.plain.stack).toBe(plain.stack);
    expect(out.typeError).toBeInstanceOf(TypeError);
    expect(out.typeError.message).toBe("bad type");
    expect(out.withCause.cause).toBeInstanceOf(RangeError);
    expect((out.withCause.cause as Error).message).toBe("inner");
    expect(out.custom).toBeInstanceOf(Error);
    expect(out.custom.name).toBe("CustomError");
    expect(out.custom.message).toBe("custom");
    expect((out.custom as unknown as { code: string }).code).toBe("E_CUSTOM");
    expect(out).toEqual({ plain, typeError, withCause, custom: expect.objectContaining({ message: "custom", name: "CustomError" }) });
  });

  it("Document", async () => {
    const doc = new Document({ pageContent: "text", metadata: { source: "a.txt", page: 2, at: new Date(1) }, id: "d1" });
    const out = await roundTrip({ docs: [doc, new Document({ pageContent: "no id" })] });
    expect(out.docs[0]).toBeInstanceOf(Document);
    expect(out.docs[0]).toStrictEqual(doc);
    expect(out.docs[1]).toBeInstanceOf(Document);
    expect(out.docs[1]!.pageContent).toBe("no id");
  });

  it("DeltaSnapshot comes back as DeltaSnapshot", async () => {
    const snap = new DeltaSnapshot({ messages: [new HumanMessage({ content: "x", id: "1" })], n: new Map([[1, 2]]) });
    const out = await roundTrip(snap);
    expect(out).toBeInstanceOf(DeltaSnapshot);
    expect(out.lg_name).toBe("DeltaSnapshot");
    expect(out.value).toStrictEqual(snap.value);
    expect((out.value as { messages: unknown[] }).messages[0]).toBeInstanceOf(HumanMessage);
  });
});

describe("MsgpackSerializer: LangChain messages", () => {
  const toolCall = { name: "search", args: { q: "weather", when: new Date(0) }, id: "call_1", type: "tool_call" as const };
  const cases: Array<[string, BaseMessage]> = [
    ["HumanMessage (string)", new HumanMessage("hi")],
    [
      "HumanMessage (fields)",
      new HumanMessage({
        content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:..." } }],
        id: "h1",
        name: "alice",
        additional_kwargs: { lc: 1, type: "constructor", nested: { __lc_escaped__: 1 } },
        response_metadata: { x: undefined },
      }),
    ],
    [
      "AIMessage with tool_calls and usage",
      new AIMessage({
        content: "calling",
        id: "a1",
        tool_calls: [toolCall],
        invalid_tool_calls: [{ name: "bad", args: "{not json", id: "call_2", error: "parse", type: "invalid_tool_call" }],
        usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_token_details: { cache_read: 3 } },
        response_metadata: { model_name: "m", finish_reason: "tool_calls", created: new Date(1000) },
        additional_kwargs: { raw: new Uint8Array([1, 2]) },
      }),
    ],
    [
      "AIMessageChunk",
      new AIMessageChunk({
        content: "par",
        id: "c1",
        tool_call_chunks: [{ name: "search", args: '{"q":', id: "call_1", index: 0, type: "tool_call_chunk" }],
        usage_metadata: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
      }),
    ],
    ["ToolMessage", new ToolMessage({ content: "sunny", tool_call_id: "call_1", id: "t1", name: "search", artifact: { raw: [1, 2] }, status: "success" })],
    ["ToolMessageChunk", new ToolMessageChunk({ content: "sun", tool_call_id: "call_1" })],
    ["SystemMessage", new SystemMessage({ content: "be nice", id: "s1" })],
    ["SystemMessageChunk", new SystemMessageChunk({ content: "be" })],
    ["HumanMessageChunk", new HumanMessageChunk({ content: "h" })],
    ["ChatMessage", new ChatMessage({ content: "c", role: "critic", id: "x" })],
    ["ChatMessageChunk", new ChatMessageChunk({ content: "c", role: "critic" })],
    ["FunctionMessage", new FunctionMessage({ content: "{}", name: "fn" })],
    ["FunctionMessageChunk", new FunctionMessageChunk({ content: "{", name: "fn" })],
    ["RemoveMessage", new RemoveMessage({ id: "h1" })],
  ];

  it.each(cases)("%s comes back as the same class with equal fields", async (_name, message) => {
    const out = await roundTrip(message);
    expect(out).toBeInstanceOf(message.constructor as new (...args: never[]) => unknown);
    expect(out.constructor).toBe(message.constructor);
    expect(out).toStrictEqual(message);
    expect(out.content).toStrictEqual(message.content);
    expect(out.id).toBe(message.id);
    expect(out.name).toBe(message.name);
    expect(out.additional_kwargs).toStrictEqual(message.additional_kwargs);
    expect(out.response_metadata).toStrictEqual(message.response_metadata);
    expect(out.getType()).toBe(message.getType());
    if (message instanceof AIMessage) {
      expect((out as AIMessage).tool_calls).toStrictEqual(message.tool_calls);
      expect((out as AIMessage).invalid_tool_calls).toStrictEqual(message.invalid_tool_calls);
      expect((out as AIMessage).usage_metadata).toStrictEqual(message.usage_metadata);
    }
    if (message instanceof ToolMessage) {
      expect((out as ToolMessage).tool_call_id).toBe(message.tool_call_id);
      expect((out as ToolMessage).artifact).toStrictEqual(message.artifact);
      expect((out as ToolMessage).status).toBe(message.status);
    }
  });

  it("keeps ids assigned after construction (as LangGraph's reducer does)", async () => {
    const message = new HumanMessage("no id yet");
    message.id = "assigned";
    message.lc_kwargs.id = "assigned";
    const out = await roundTrip([message]);
    expect(out[0]!.id).toBe("assigned");
  });

  it("stores exactly the kwargs toJSON() would (same class ids too)", async () => {
    for (const [, message] of cases) {
      const json = message.toJSON() as { id: string[]; kwargs: Record<string, unknown> };
      const out = await roundTrip(message);
      expect((out.toJSON() as { id: string[] }).id).toEqual(json.id);
      expect(Object.keys(out.toJSON() as object)).toEqual(Object.keys(json));
      expect(Object.keys((out.toJSON() as { kwargs: object }).kwargs).sort()).toEqual(Object.keys(json.kwargs).sort());
    }
  });

  it("a 100-message chat state round-trips", async () => {
    const messages: BaseMessage[] = [];
    for (let i = 0; i < 50; i++) {
      messages.push(new HumanMessage({ content: `q${i}`, id: `h${i}` }));
      messages.push(new AIMessage({ content: `a${i}`, id: `a${i}`, tool_calls: i % 5 ? [] : [{ ...toolCall, id: `c${i}` }] }));
    }
    const out = await roundTrip({ messages });
    expect(out.messages).toStrictEqual(messages);
    out.messages.forEach((m, i) => expect(m.constructor).toBe(messages[i]!.constructor));
  });

  it("strict: refuses LangChain objects outside the allowlist when writing, naming the path", async () => {
    const template = PromptTemplate.fromTemplate("Hello {name}");
    const error = await expectSerializationError({ state: { templates: [template] } }, strict);
    expect(error.message).toContain("langchain_core.prompts.prompt.PromptTemplate");
    expect(error.message).toContain("$.state.templates[0]");
    expect(error.path).toBe("$.state.templates[0]");
  });

  it("default: a LangChain object outside the allowlist is stored as its toJSON() record, plain data that rebuilds nothing", async () => {
    const template = PromptTemplate.fromTemplate("Hello {name}");
    const out = await roundTrip({ template });
    expect(out.template).toEqual(JSON.parse(JSON.stringify(template)));
    expect(out.template).toMatchObject({ lc: 1, type: "constructor", id: ["langchain_core", "prompts", "prompt", "PromptTemplate"] });
    expect(out.template).not.toBeInstanceOf(PromptTemplate);
  });

  it("prompt values are in the built-in allowlist and come back as their class", async () => {
    const prompt = new ChatPromptValue([new HumanMessage({ content: "x", id: "1" }), new AIMessage({ content: "y", id: "2" })]);
    for (const s of [serde, strict]) {
      const out = await roundTrip(prompt, s);
      expect(out).toBeInstanceOf(ChatPromptValue);
      expect(out.messages[0]).toBeInstanceOf(HumanMessage);
      expect(out).toStrictEqual(prompt);
    }
  });

  it("round-trips explicitly registered LangChain classes", async () => {
    class Ticket extends Serializable {
      override lc_namespace = ["tests", "tickets"];
      override lc_serializable = true;
      readonly title: string;
      constructor(fields: { title: string }) {
        super(fields);
        this.title = fields.title;
      }
    }
    const s = new MsgpackSerializer({ langchainClasses: [{ id: ["tests", "tickets", "Ticket"], ctor: Ticket }], strict: true });
    const ticket = new Ticket({ title: "printer on fire" });
    const out = await roundTrip({ ticket }, s);
    expect(out.ticket).toBeInstanceOf(Ticket);
    expect(out.ticket).toStrictEqual(ticket);
    // Another serializer cannot read it: the allowlist is enforced on read too.
    const [type, bytes] = await s.dumpsTyped(ticket);
    const error = await expectDeserializationError(bytes, type);
    expect(error.message).toContain("not in the allowlist");
  });

  it("never interprets plain data that looks like serialized LangChain JSON", async () => {
    const lookalike = { lc: 1, type: "constructor", id: ["langchain_core", "messages", "HumanMessage"], kwargs: { content: "x" } };
    const out = await roundTrip(lookalike);
    expect(out).toStrictEqual(lookalike);
    expect(out).not.toBeInstanceOf(HumanMessage);
  });

  it("refuses, on read, LangChain ids outside the allowlist (no constructor runs)", async () => {
    for (const id of [
      ["langchain_core", "prompts", "PromptTemplate"],
      ["langchain_core", "prompts", "chat", "ChatPromptTemplate"],
      ["langchain", "chat_models", "openai", "ChatOpenAI"],
      ["langchain_core", "messages", "BaseMessage"],
      ["__proto__"],
      ["constructor"],
    ]) {
      const bytes = rawEncode(ext(6, [id, { template: "{x}", inputVariables: ["x"] }]));
      const error = await expectDeserializationError(bytes);
      expect(error.message).toContain("not in the allowlist");
    }
  });
});

describe("MsgpackSerializer: LangGraph objects", () => {
  /** LangGraph's own check (constants.js `_isSendInterface`). */
  const isSendInterface = (x: unknown): boolean =>
    x !== null && x !== undefined && typeof (x as { node?: unknown }).node === "string" && (x as { args?: unknown }).args !== undefined;

  it("Send is stored in its toJSON() form, which LangGraph accepts as a Send", async () => {
    const send = new Send("worker", { topic: "cats", messages: [new HumanMessage({ content: "x", id: "1" })] });
    const out = (await roundTrip({ sends: [send] })).sends[0] as unknown as Record<string, unknown>;
    expect(isSendInterface(out)).toBe(true);
    expect(out.lg_name).toBe("Send");
    expect(out.node).toBe("worker");
    expect((out.args as { messages: unknown[] }).messages[0]).toBeInstanceOf(HumanMessage);
    // Rebuilding a real Send from it, as LangGraph does when it reads pending sends.
    const rebuilt = new Send(out.node as string, out.args);
    expect(rebuilt.args).toStrictEqual(send.args);
  });

  it("Command and Overwrite come back in their toJSON() form", async () => {
    const command = new Command({ resume: { answer: 42 }, goto: [new Send("n", { a: 1 })], update: { k: new Set([1]) } });
    const out = (await roundTrip(command)) as unknown as Record<string, unknown>;
    expect(out.lg_name).toBe("Command");
    expect(out.resume).toEqual({ answer: 42 });
    expect(out.update).toEqual({ k: new Set([1]) });
    expect(isSendInterface((out.goto as unknown[])[0])).toBe(true);
    const overwrite = (await roundTrip({ v: new Overwrite([1, 2]) })).v as unknown as Record<string, unknown>;
    expect(overwrite).toEqual({ __overwrite__: [1, 2] });
  });

  it("interrupts are plain objects and round-trip as such", async () => {
    const pending = { id: "abc", value: { question: "ok?", when: new Date(3) } };
    expect(await roundTrip([pending])).toStrictEqual([pending]);
  });
});

describe("MsgpackSerializer: prototype pollution", () => {
  it("keys __proto__, constructor, prototype become own data properties", async () => {
    const value = JSON.parse(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "prototype": 1, "nested": [{"__proto__": null}]}',
    ) as Record<string, unknown>;
    const out = await roundTrip(value);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(["__proto__", "constructor", "prototype", "nested"]);
    expect(Object.getOwnPropertyDescriptor(out, "__proto__")?.value).toEqual({ polluted: true });
    expect((out as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.prototype.hasOwnProperty.call(out, "constructor")).toBe(true);
    expect(out.prototype).toBe(1);
    const nested = (out.nested as object[])[0]!;
    expect(Object.getPrototypeOf(nested)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(nested, "__proto__")?.value).toBeNull();
    // (toStrictEqual would compare the two own "constructor" properties as classes.)
    expect(JSON.stringify(out)).toBe(JSON.stringify(value));
  });

  it("also inside Maps, Errors, messages and null-prototype objects", async () => {
    const evil = JSON.parse('{"__proto__": {"isAdmin": true}}') as object;
    const nullProto = Object.create(null) as Record<string, unknown>;
    nullProto["__proto__"] = { isAdmin: true };
    const message = new AIMessage({ content: "x", id: "1", additional_kwargs: evil as Record<string, unknown> });
    const out = await roundTrip({ map: new Map([["k", evil]]), message, nullProto });
    expect(Object.getPrototypeOf(out.map.get("k"))).toBe(Object.prototype);
    expect((out.map.get("k") as { isAdmin?: unknown }).isAdmin).toBeUndefined();
    expect((out.message.additional_kwargs as { isAdmin?: unknown }).isAdmin).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(out.message.additional_kwargs, "__proto__")?.value).toEqual({ isAdmin: true });
    expect(Object.getOwnPropertyDescriptor(out.nullProto, "__proto__")?.value).toEqual({ isAdmin: true });
    expect(({} as { isAdmin?: unknown }).isAdmin).toBeUndefined();
  });

  it("a raw msgpack map with a __proto__ key is refused, never applied", async () => {
    const bytes = Uint8Array.from([0x81, 0xa9, ...Buffer.from("__proto__"), 0x81, 0xa1, 0x78, 0x01]);
    await expectDeserializationError(bytes);
    expect(({} as { x?: unknown }).x).toBeUndefined();
  });
});

describe("MsgpackSerializer (strict): values that cannot be written", () => {
  class Point {
    constructor(
      readonly x: number,
      readonly y: number,
    ) {}
  }

  it.each([
    ["a function", { values: { foo: [1, 2, () => 1] } }, "$.values.foo[2]", /function/],
    ["a named function", { cb: function handler() {} }, "$.cb", /function \(handler\)/],
    ["a symbol", { s: [Symbol("tag")] }, "$.s[0]", /symbol/],
    ["a class instance", { p: new Point(1, 2) }, "$.p", /instance of Point/],
    ["a class instance in a Map value", { m: new Map([["key", new Point(1, 2)]]) }, "$.m.get(\"key\")", /Point/],
    ["a class instance in a Set", { s: new Set([1, new Point(1, 2)]) }, "$.s.values()[1]", /Point/],
    ["a WeakMap", { w: new WeakMap() }, "$.w", /WeakMap/],
    ["a Promise", { p: Promise.resolve(1) }, "$.p", /Promise/],
    ["a URL", { "odd key": new URL("https://example.com") }, '$["odd key"]', /URL/],
    ["a function in message kwargs", { m: [new AIMessage({ content: "x", additional_kwargs: { f: () => 1 } })] }, "$.m[0].additional_kwargs.f", /function/],
    ["a function inside Send args", { s: new Send("n", { cb: () => 1 }) }, "$.s.args.cb", /function/],
    ["a function as Error cause", { e: new Error("x", { cause: () => 1 }) }, "$.e.cause", /function/],
  ])("%s → SerializationError naming the path", async (_name, value, path, reason) => {
    const error = await expectSerializationError(value, strict);
    expect(error.message).toContain(path);
    expect(error.path).toBe(path);
    expect(error.message).toMatch(reason);
    expect(error.code).toBe("SERIALIZATION_FAILED");
  });

  it("a top-level function, in either mode", async () => {
    expect((await expectSerializationError(() => 1, strict)).message).toMatch(/function at \$$/);
    expect((await expectSerializationError(() => 1)).message).toMatch(/function at \$$/);
  });

  it("circular references fail cleanly", async () => {
    const a: Record<string, unknown> = { name: "a" };
    a.self = a;
    expect((await expectSerializationError({ a }, strict)).message).toMatch(/circular/);
    // Through a Map or a Set, in either mode (JsonPlusSerializer cannot write these either).
    const m = new Map<string, unknown>();
    m.set("m", m);
    for (const s of [strict, serde]) expect((await expectSerializationError(m, s)).message).toMatch(/deeper than/);
    const arr: unknown[] = [];
    arr.push(new Set([arr]));
    await expectSerializationError(arr, strict);
    await expectSerializationError(arr);
  });

  it("LangChain objects that are not serializable", async () => {
    const { RunnableLambda } = await import("@langchain/core/runnables");
    const runnable = RunnableLambda.from((x: number) => x);
    await expectSerializationError({ r: runnable }, strict);
    // Default: the record toJSON() gives it, as JsonPlusSerializer would store.
    expect(await roundTrip({ r: runnable })).toEqual({ r: { lc: 1, type: "not_implemented", id: ["langchain_core", "runnables", "RunnableLambda"] } });
  });

  it("a failed write leaves the serializer usable", async () => {
    await expectSerializationError({ a: new Map([["x", () => 1]]) }, strict);
    expect(await roundTrip({ a: new Map([["x", 1]]) }, strict)).toEqual({ a: new Map([["x", 1]]) });
  });
});

describe("MsgpackSerializer: corrupt and hostile input", () => {
  const rich = {
    messages: [new HumanMessage({ content: "hi", id: "1" }), new AIMessage({ content: "yo", id: "2", tool_calls: [{ name: "f", args: { a: 1 }, id: "c", type: "tool_call" }] })],
    map: new Map<unknown, unknown>([[1, new Set([2n ** 70n])]]),
    date: new Date(123),
    bad: new Date(Number.NaN),
    re: /x/g,
    err: new TypeError("t"),
    bytes: new Uint8Array([1, 2, 3]),
    f32: new Float32Array([1]),
    undef: undefined,
    str: "a\uD800",
    doc: new Document({ pageContent: "p" }),
    snap: new DeltaSnapshot([1]),
    send: new Send("n", { x: 1 }),
    proto: JSON.parse('{"__proto__": 1}') as unknown,
    nested: { deep: [[[{ x: "y".repeat(300) }]]] },
  };

  it("every truncation of a valid encoding → DeserializationError", async () => {
    const [, bytes] = await serde.dumpsTyped(rich);
    expect(await serde.loadsTyped("msgpack", bytes)).toBeDefined();
    for (let length = 0; length < bytes.length; length++) {
      await expectDeserializationError(bytes.slice(0, length));
    }
  });

  it("random bytes and bit flips → a value or DeserializationError, nothing else", async () => {
    const rand = prng(42).next;
    const [, valid] = await serde.dumpsTyped(rich);
    const inputs: Uint8Array[] = [];
    for (let i = 0; i < 400; i++) {
      const length = Math.floor(rand() * 64);
      inputs.push(Uint8Array.from({ length }, () => Math.floor(rand() * 256)));
    }
    for (let i = 0; i < 400; i++) {
      const mutated = valid.slice();
      for (let j = 0; j < 1 + Math.floor(rand() * 4); j++) mutated[Math.floor(rand() * mutated.length)] = Math.floor(rand() * 256);
      inputs.push(mutated);
    }
    // Biased towards our extension headers with random payloads.
    for (let i = 0; i < 200; i++) {
      const payload = Uint8Array.from({ length: Math.floor(rand() * 20) }, () => Math.floor(rand() * 256));
      inputs.push(Uint8Array.from([0xc7, payload.length, Math.floor(rand() * 16) - 1, ...payload]));
    }
    let decoded = 0;
    const { ms } = await cpuTime(async () => {
      for (const input of inputs) {
        try {
          await serde.loadsTyped("msgpack", input);
          decoded++;
        } catch (error) {
          if (!(error instanceof DeserializationError)) throw new Error(`${hex(input)} threw ${String(error)}`);
        }
      }
    });
    expect(decoded).toBeGreaterThan(0);
    expect(ms).toBeLessThan(5_000);
  });

  it.each([
    ["empty input", []],
    ["reserved byte 0xc1", [0xc1]],
    ["trailing bytes", [0x01, 0x02]],
    ["array32 claiming 4G items", [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]],
    ["array16 claiming 65535 items", [0xdc, 0xff, 0xff, 0x01, 0x02]],
    ["map32 claiming 4G entries", [0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 0x61, 0x01]],
    ["str32 claiming 4 GB", [0xdb, 0xff, 0xff, 0xff, 0xff, 0x61]],
    ["bin32 claiming 4 GB", [0xc6, 0xff, 0xff, 0xff, 0xff, 0x61]],
    ["ext32 claiming 4 GB", [0xc9, 0xff, 0xff, 0xff, 0xff, 0x01, 0x61]],
    ["map with an integer-array key", [0x81, 0x91, 0x01, 0x02]],
    ["bad undefined ext", [0xd4, 0x00, 0x01]],
    ["bad timestamp size", [0xd5, 0xff, 0x00, 0x00]],
    ["bigint with bad sign", [0xd4, 0x03, 0x07]],
    ["bigint with no data", [0xc7, 0x00, 0x03]],
    ["invalid date with data", [0xd4, 0x0c, 0x00]],
    ["typed array unknown kind", [0xd5, 0x0a, 0x63, 0x00]],
    ["typed array bad length", [0xd5, 0x0a, 0x03, 0x00]],
    ["ill-formed string odd length", [0xd4, 0x0e, 0x00]],
  ])("%s → DeserializationError", async (_name, bytes) => {
    await expectDeserializationError(Uint8Array.from(bytes));
  });

  it.each([
    ["Map with odd entries", ext(1, [1, 2, 3])],
    ["Map payload not an array", ext(1, { a: 1 })],
    ["Set payload not an array", ext(2, "x")],
    ["RegExp with bad pattern", ext(4, ["(", ""])],
    ["RegExp with bad flags", ext(4, ["a", "zz"])],
    ["Error payload wrong shape", ext(5, ["Error"])],
    ["Error with non-string message", ext(5, ["Error", 1, null, null])],
    ["LangChain payload wrong shape", ext(6, { id: 1 })],
    ["LangChain id not strings", ext(6, [[1, 2], {}])],
    ["LangChain kwargs not an object", ext(6, [["langchain_core", "messages", "HumanMessage"], [1]])],
    ["LangGraph payload not an object", ext(7, [1])],
    ["Document with bad metadata", ext(13, ["p", 5, null])],
    ["proto-key object with non-string key", ext(11, [1, 2])],
    ["payload with trailing bytes", new ExtData(2, Uint8Array.from([0x90, 0x01]))],
  ])("%s → DeserializationError", async (_name, value) => {
    await expectDeserializationError(rawEncode(value));
  });

  it("unknown extension types → DeserializationError naming the type", async () => {
    for (const type of [15, 42, 127, -2, -128]) {
      const error = await expectDeserializationError(rawEncode({ x: new ExtData(type, Uint8Array.from([1, 2])) }));
      expect(error.message).toContain(`type ${type}`);
    }
  });

  it("nesting deeper than MAX_DEPTH (plain or through extensions) → DeserializationError, no stack overflow", async () => {
    await expectDeserializationError(Uint8Array.from([...new Array<number>(100_000).fill(0x91), 0xc0]));
    // MAX_DEPTH + 1 nested maps {a: {a: ...}}.
    await expectDeserializationError(Uint8Array.from([...new Array<number>(MAX_DEPTH + 1).fill(0).flatMap(() => [0x81, 0xa1, 0x61]), 0xc0]));
    // Exactly MAX_DEPTH is fine.
    expect(await serde.loadsTyped("msgpack", Uint8Array.from([...new Array<number>(MAX_DEPTH).fill(0).flatMap(() => [0x81, 0xa1, 0x61]), 0xc0]))).toBeDefined();
    let nested: unknown = 1;
    for (let i = 0; i < 2_000; i++) nested = ext(2, [nested]);
    const error = await expectDeserializationError(rawEncode(nested, { maxDepth: 10_000 }));
    expect(error.message).toMatch(/deeper than 512/);
  });

  it("decoding stays within the depth a valid write may reach", async () => {
    let value: unknown = 1;
    for (let i = 0; i < 200; i++) value = new Set([value]); // 400 levels: Set + its array
    expect(await roundTrip(value)).toStrictEqual(value);
  });

  it("type tags: unknown → DeserializationError naming it; msgpack as a string → DeserializationError", async () => {
    const error = await expectDeserializationError(new Uint8Array([0xc0]), "pickle");
    expect(error.message).toContain('"pickle"');
    await expectDeserializationError("\u0081", "msgpack");
  });
});

describe("MsgpackSerializer: reading JsonPlusSerializer rows", () => {
  const jsonPlus = new JsonPlusSerializer();

  it("reads type json exactly as JsonPlusSerializer does", async () => {
    const value = {
      messages: [new HumanMessage({ content: "hi", id: "1" }), new AIMessage({ content: "yo", id: "2", tool_calls: [{ name: "f", args: { a: 1 }, id: "c", type: "tool_call" }] })],
      set: new Set([1, 2]),
      map: new Map([["a", 1]]),
      re: /x/g,
      undef: undefined,
      n: 1.5,
      s: "str",
      nested: { list: [1, "two", null] },
    };
    const [type, bytes] = await jsonPlus.dumpsTyped(value);
    expect(type).toBe("json");
    const ours = await serde.loadsTyped(type, bytes);
    const theirs = await jsonPlus.loadsTyped(type, bytes);
    expect(ours).toStrictEqual(theirs);
    expect(ours.messages[0]).toBeInstanceOf(HumanMessage);
    expect(ours.messages[1]).toBeInstanceOf(AIMessage);
    expect(ours.messages[1].tool_calls).toEqual((value.messages[1] as AIMessage).tool_calls);
    expect(ours.set).toEqual(new Set([1, 2]));
    expect(ours.map).toEqual(new Map([["a", 1]]));
    // Also from a string.
    expect(await serde.loadsTyped("json", new TextDecoder().decode(bytes))).toStrictEqual(theirs);
  });

  it("reads type bytes", async () => {
    const [type, bytes] = await jsonPlus.dumpsTyped(new Uint8Array([1, 2, 3]));
    expect(type).toBe("bytes");
    expect(await serde.loadsTyped(type, bytes)).toEqual(new Uint8Array([1, 2, 3]));
  });

  it("corrupt json → DeserializationError", async () => {
    await expectDeserializationError(new TextEncoder().encode("{not json"), "json");
  });
});

describe("MsgpackSerializer inside LangGraph", () => {
  /**
   * MemorySaver (1.2.2) keeps only the bytes of `dumpsTyped` and always calls
   * `loadsTyped("json", bytes)`; this adapter supplies the tag it dropped.
   */
  class TaggedForMemorySaver implements SerializerProtocol {
    dumps = 0;
    loads = 0;
    constructor(private readonly inner: MsgpackSerializer) {}
    async dumpsTyped(data: unknown): Promise<[string, Uint8Array]> {
      this.dumps++;
      const [type, bytes] = await this.inner.dumpsTyped(data);
      expect(type).toBe("msgpack");
      return [type, bytes];
    }
    async loadsTyped(_type: string, data: Uint8Array | string): Promise<unknown> {
      this.loads++;
      return this.inner.loadsTyped("msgpack", data);
    }
  }

  const State = Annotation.Root({
    ...MessagesAnnotation.spec,
    topics: Annotation<string[]>({ reducer: (_a, b) => b, default: () => [] }),
    results: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    extras: Annotation<Map<string, Set<number>>>({ reducer: (_a, b) => b, default: () => new Map() }),
    approved: Annotation<string | undefined>({ reducer: (_a, b) => b, default: () => undefined }),
  });

  function buildGraph(checkpointer: MemorySaver) {
    return new StateGraph(State)
      .addNode("plan", (state) => ({
        messages: [
          new AIMessage({
            content: "planning",
            id: "ai-plan",
            tool_calls: [{ name: "fan_out", args: { topics: state.topics }, id: "call-1", type: "tool_call" }],
            usage_metadata: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
          }),
        ],
        extras: new Map([["seen", new Set([1, 2])]]),
      }))
      .addNode("worker", (args: { topic: string; index: number }) => ({
        results: [`result for ${args.topic}`],
        messages: [new ToolMessage({ content: `done ${args.topic}`, tool_call_id: "call-1", id: `tool-${args.index}` })],
      }))
      .addNode("review", (state) => {
        const answer = interrupt({ question: "Approve?", count: state.results.length, at: new Date(0) }) as { verdict: string };
        return { approved: answer.verdict, messages: [new HumanMessage({ content: `verdict: ${answer.verdict}`, id: "human-verdict" })] };
      })
      .addEdge(START, "plan")
      .addConditionalEdges("plan", (state) => state.topics.map((topic, index) => new Send("worker", { topic, index })), ["worker"])
      .addEdge("worker", "review")
      .addEdge("review", END)
      .compile({ checkpointer });
  }

  async function run(checkpointer: MemorySaver) {
    const graph = buildGraph(checkpointer);
    const config = { configurable: { thread_id: "t1" } };
    const first = await graph.invoke(
      { messages: [new HumanMessage({ content: "research these", id: "human-1" })], topics: ["cats", "dogs", "birds"] },
      config,
    );
    const interrupted = await graph.getState(config);
    const final = await graph.invoke(new Command({ resume: { verdict: "yes" } }), config);
    const state = await graph.getState(config);
    const history = [];
    for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
    return { first, interrupted, final, state, history };
  }

  it("messages, Send fan-out and interrupt/resume give the same result as the default serializer", async () => {
    const adapter = new TaggedForMemorySaver(new MsgpackSerializer());
    const ours = await run(new MemorySaver(adapter));
    const reference = await run(new MemorySaver());

    expect(adapter.dumps).toBeGreaterThan(0);
    expect(adapter.loads).toBeGreaterThan(0);

    // Interrupted with the interrupt payload intact.
    const interrupts = (ours.first as Record<string, unknown>).__interrupt__ as Array<{ value: unknown }>;
    expect(interrupts).toHaveLength(1);
    expect(interrupts[0]!.value).toEqual({ question: "Approve?", count: 3, at: new Date(0) });
    expect(ours.interrupted.next).toEqual(["review"]);
    expect(ours.interrupted.tasks[0]?.interrupts[0]?.value).toEqual({ question: "Approve?", count: 3, at: new Date(0) });

    // Same final state as with the default serializer, with real message classes.
    expect(ours.final).toStrictEqual(reference.final);
    expect(ours.state.values).toStrictEqual(reference.state.values);
    const values = ours.state.values as typeof State.State;
    expect(values.approved).toBe("yes");
    expect(values.results).toEqual(["result for cats", "result for dogs", "result for birds"]);
    expect(values.extras).toBeInstanceOf(Map);
    expect(values.extras.get("seen")).toEqual(new Set([1, 2]));
    expect(values.messages.map((m) => m.constructor)).toEqual([HumanMessage, AIMessage, ToolMessage, ToolMessage, ToolMessage, HumanMessage]);
    expect((values.messages[1] as AIMessage).tool_calls).toEqual(reference.state.values.messages[1].tool_calls);
    expect(ours.state.next).toEqual([]);

    // Same checkpoint history shape.
    expect(ours.history.map((s) => s.next)).toEqual(reference.history.map((s) => s.next));
    expect(ours.history.map((s) => s.values)).toStrictEqual(reference.history.map((s) => s.values));
  });
});
