/**
 * The README's serialization table, row by row, through a real saver: each
 * value is put as a channel value and read back with getTuple, by the default
 * serializer and by the strict one. Where the README says "as
 * JsonPlusSerializer", the default result is compared with what LangGraph's
 * JSON serializer itself returns for the same value.
 */
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Document } from "@langchain/core/documents";
import { ChatPromptValue, StringPromptValue } from "@langchain/core/prompt_values";
import { PromptTemplate } from "@langchain/core/prompts";
import { Command, Overwrite, Send } from "@langchain/langgraph";
import { DeltaSnapshot, JsonPlusSerializer, uuid6 } from "@langchain/langgraph-checkpoint";
import { beforeAll, describe, expect, it } from "vitest";
import { migrate, MsgpackSerializer, PostgresSaver, SerializationError } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("serde_modes");
let savers: { default: PostgresSaver; strict: PostgresSaver };

beforeAll(async () => {
  await migrate({ pool: db.pool });
  savers = {
    default: new PostgresSaver(db.pool),
    strict: new PostgresSaver(db.pool, { serde: new MsgpackSerializer({ strict: true }) }),
  };
});

/** put `value` as channel "v" of a new thread, read it back. */
async function store(mode: keyof typeof savers, value: unknown): Promise<unknown> {
  const saver = savers[mode];
  const cp = makeCheckpoint({ v: value }, { v: "1.5" });
  const config = await saver.put({ configurable: { thread_id: uuid6(-3), checkpoint_ns: "" } }, cp, meta(-1), { v: "1.5" });
  const tuple = await saver.getTuple(config);
  return tuple!.checkpoint.channel_values.v;
}

async function refused(mode: keyof typeof savers, value: unknown): Promise<SerializationError> {
  const err = await store(mode, value).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SerializationError);
  return err as SerializationError;
}

const jsonPlus = new JsonPlusSerializer();
/** What LangGraph's JSON serializer returns after a round trip. */
async function viaJsonPlus(value: unknown): Promise<unknown> {
  const [type, bytes] = await jsonPlus.dumpsTyped(value);
  return jsonPlus.loadsTyped(type, bytes);
}

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
  norm(): number {
    return Math.hypot(this.x, this.y);
  }
}

class Money {
  constructor(
    readonly cents: number,
    readonly currency: string,
  ) {}
  toJSON() {
    return `${(this.cents / 100).toFixed(2)} ${this.currency}`;
  }
}

class NotFound extends Error {
  override name = "NotFound";
}

class Tagged extends Map<string, number> {}

describe("the same in both modes: values that come back exactly", () => {
  const rows: [string, () => unknown][] = [
    ["plain data", () => ({ s: "x", n: 1.5, b: true, z: null, list: [1, "a", [2]], nested: { k: { j: [] } } })],
    ["undefined, as a value, object value and array item", () => ({ a: undefined, list: [undefined, 1] })],
    ["NaN, Infinity, -0", () => [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0]],
    ["Date (also invalid)", () => [new Date("2024-04-19T17:19:07.952Z"), new Date(Number.NaN)]],
    ["Map and Set", () => ({ m: new Map<unknown, unknown>([["k", 1], [2, new Set([3])]]), s: new Set(["x"]) })],
    ["bigint", () => [123456789012345678901234567890n, -1n]],
    ["Uint8Array", () => new Uint8Array([0, 1, 255])],
    ["other typed arrays, ArrayBuffer, DataView", () => [new Int32Array([-1, 2]), new Float64Array([0.5]), new Uint16Array([7]).buffer, new DataView(new ArrayBuffer(2))]],
    ["RegExp", () => /a+b/giu],
    ["Error of a built-in class", () => new TypeError("bad", { cause: "why" })],
    ["objects with own __proto__ / constructor keys", () => JSON.parse('{"__proto__": {"x": 1}, "constructor": 2}')],
    ["strings with lone surrogates", () => ["\uD800", "a\uDC00b"]],
    ["strings that start with U+FEFF, of any length", () => ["\ufeff", "\ufeff" + "x".repeat(250), "\ufeff\ufeff" + "é".repeat(150), { ["\ufeff" + "k".repeat(300)]: 1 }]],
  ];
  it.each(rows)("%s", async (_name, make) => {
    for (const mode of ["default", "strict"] as const) expect(await store(mode, make()), mode).toStrictEqual(make());
  });

  it("symbol keys are left out (as JSON does)", async () => {
    const value = { a: 1, [Symbol("hidden")]: 2 };
    for (const mode of ["default", "strict"] as const) expect(await store(mode, value), mode).toStrictEqual({ a: 1 });
  });

  it("shared references come back as copies", async () => {
    const shared = { n: 1 };
    for (const mode of ["default", "strict"] as const) {
      const out = (await store(mode, { a: shared, b: shared })) as { a: object; b: object };
      expect(out).toStrictEqual({ a: { n: 1 }, b: { n: 1 } });
      expect(out.a).not.toBe(out.b);
    }
  });

  it("LangChain messages, Document and prompt values come back as their class", async () => {
    const value = {
      messages: [new HumanMessage({ content: "hi", id: "1" }), new AIMessage({ content: "yo", id: "2" })],
      doc: new Document({ pageContent: "text", metadata: { source: "a" }, id: "d1" }),
      prompt: new ChatPromptValue([new HumanMessage("q")]),
      text: new StringPromptValue("plain prompt"),
    };
    for (const mode of ["default", "strict"] as const) {
      const out = (await store(mode, value)) as typeof value;
      expect(out).toStrictEqual(value);
      expect(out.messages[1]).toBeInstanceOf(AIMessage);
      expect(out.doc).toBeInstanceOf(Document);
      expect(out.prompt).toBeInstanceOf(ChatPromptValue);
      expect(out.text).toBeInstanceOf(StringPromptValue);
    }
  });

  it("Send, Command and Overwrite come back in their toJSON() form; DeltaSnapshot as itself", async () => {
    const send = new Send("node", { x: 1 });
    const value = { send, command: new Command({ goto: "n" }), overwrite: new Overwrite([1]), delta: new DeltaSnapshot([1, 2]) };
    for (const mode of ["default", "strict"] as const) {
      const out = (await store(mode, value)) as Record<string, unknown>;
      expect(out.send).toEqual(send.toJSON());
      expect(out.command).toEqual(value.command.toJSON());
      expect(out.overwrite).toEqual(value.overwrite.toJSON());
      expect(out.delta).toStrictEqual(new DeltaSnapshot([1, 2]));
    }
  });

  it("a function as the whole value, and nesting deeper than 512 levels, are refused", async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 600; i++) deep = [deep];
    for (const mode of ["default", "strict"] as const) {
      expect((await refused(mode, () => 1)).path).toBe("$");
      expect((await refused(mode, deep)).message).toContain("deeper than 512");
    }
  });
});

describe("default: as JsonPlusSerializer, where msgpack has no better form; strict: refused", () => {
  const cyclic = () => {
    const a: Record<string, unknown> = { name: "a" };
    a.self = a;
    a.list = [a];
    return a;
  };
  const rows: [string, () => unknown, string][] = [
    ["a URL (its toJSON(): the href)", () => ({ link: new URL("https://example.com/a?b=c") }), "$.link"],
    ["an instance with toJSON()", () => ({ price: new Money(1250, "EUR") }), "$.price"],
    ["a plain object with toJSON()", () => ({ o: { secret: 1, toJSON: () => ({ shown: 2 }) } }), "$.o.toJSON"],
    ["a class instance (own enumerable properties)", () => ({ p: new Point(3, 4) }), "$.p"],
    ["a class instance inside a Map (JSON form inside)", () => new Map([["origin", new Point(0, 0)]]), '$.get("origin")'],
    ["a boxed primitive", () => ({ s: new String("x"), n: new Number(2), b: new Boolean(false) }), "$.s"],
    ["functions and symbols in an object (left out)", () => ({ keep: 1, fn: () => 1, sym: Symbol("s") }), "$.fn"],
    ["functions and symbols in an array (null)", () => [1, () => 1, Symbol("s")], "$[1]"],
    ["a circular reference (the string [Circular])", cyclic, "$.self"],
  ];
  it.each(rows)("%s", async (_name, make, path) => {
    const out = await store("default", make());
    expect(out).toStrictEqual(await viaJsonPlus(make()));
    const err = await refused("strict", make());
    // A cycle is found by its depth: the path goes round it (e.g. $.self.self...).
    expect(err.path?.startsWith(path)).toBe(true);
    expect(err.field).toBe('put checkpoint.channel_values["v"]');
    expect(err.message).toMatch(/^put checkpoint\.channel_values\["v"\]: Cannot serialize /);
  });

  it("the JSON forms, spelled out", async () => {
    expect(await store("default", { link: new URL("https://example.com/a?b=c") })).toStrictEqual({ link: "https://example.com/a?b=c" });
    expect(await store("default", { p: new Point(3, 4) })).toStrictEqual({ p: { x: 3, y: 4 } });
    expect(await store("default", new Money(1250, "EUR"))).toBe("12.50 EUR");
    expect(await store("default", cyclic())).toStrictEqual({ name: "a", self: "[Circular]", list: ["[Circular]"] });
    expect(await store("default", [1, () => 1])).toStrictEqual([1, null]);
    expect(await store("default", new Map([["f", () => 1]]))).toStrictEqual(new Map([["f", null]]));
    const self = { a: 1, toJSON() { return this; } }; // JSON.stringify then writes its own properties
    expect(await store("default", { self })).toStrictEqual(await viaJsonPlus({ self }));
    expect(await store("default", { self })).toStrictEqual({ self: { a: 1 } });
    // toJSON() is called once per value, not again on what it returned.
    class Wrapper {
      constructor(readonly n: number) {}
      toJSON() {
        return new Wrapper(this.n + 1);
      }
    }
    expect(await store("default", { w: new Wrapper(1) })).toStrictEqual(await viaJsonPlus({ w: new Wrapper(1) }));
    expect(await store("default", { w: new Wrapper(1) })).toStrictEqual({ w: { n: 2 } });
  });

  it("inside the richer forms too: a message's kwargs, an Error's properties, a Set", async () => {
    const message = new AIMessage({ content: "x", id: "m", additional_kwargs: { link: new URL("https://a.dev") } as Record<string, unknown> });
    const error = Object.assign(new Error("boom"), { at: new Point(1, 2) });
    const out = (await store("default", { message, error, set: new Set([new Point(5, 6)]) })) as { message: AIMessage; error: Error; set: Set<unknown> };
    expect(out.message).toBeInstanceOf(AIMessage);
    expect(out.message.additional_kwargs).toEqual({ link: "https://a.dev/" });
    expect(out.error).toBeInstanceOf(Error);
    expect(out.error).toMatchObject({ message: "boom", at: { x: 1, y: 2 } });
    expect(out.set).toStrictEqual(new Set([{ x: 5, y: 6 }]));
    expect((await refused("strict", { message })).path).toBe("$.message.additional_kwargs.link");
  });

  it("other LangChain objects: their toJSON() record, as plain data (nothing is rebuilt from it)", async () => {
    const template = PromptTemplate.fromTemplate("Hello {name}");
    const out = await store("default", { template });
    expect(out).toEqual({ template: template.toJSON() });
    expect((out as { template: object }).template).not.toBeInstanceOf(PromptTemplate);
    expect((await refused("strict", { template })).path).toBe("$.template");
  });
});

describe("default: a subclass comes back as its base class; strict: refused", () => {
  it("Buffer comes back as Uint8Array", async () => {
    const out = await store("default", Buffer.from("hi"));
    expect(out).toStrictEqual(new Uint8Array([104, 105]));
    expect(Buffer.isBuffer(out)).toBe(false);
    expect((await refused("strict", { b: Buffer.from("hi") })).path).toBe("$.b");
  });

  it("an Error subclass comes back as Error, with its name, message and properties", async () => {
    const err = Object.assign(new NotFound("no such user"), { status: 404 });
    const out = (await store("default", err)) as Error;
    expect(out).toBeInstanceOf(Error);
    expect(out).not.toBeInstanceOf(NotFound);
    expect(out).toMatchObject({ name: "NotFound", message: "no such user", status: 404 });
    expect((await refused("strict", err)).message).toContain("instance of NotFound");
  });

  it("a Map subclass comes back as Map", async () => {
    const tagged = new Tagged([["a", 1]]);
    expect(await store("default", tagged)).toStrictEqual(new Map([["a", 1]]));
    expect((await refused("strict", [tagged])).path).toBe("$[0]");
  });
});

describe("strict mode through putWrites", () => {
  it("names the write's channel and the path inside the value; nothing is written", async () => {
    const cp = makeCheckpoint({ x: 1 });
    const config = await savers.strict.put({ configurable: { thread_id: uuid6(-3), checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
    const err = await savers.strict.putWrites(config, [["ok", 1], ["links", [new URL("https://a.dev")]]], "task-1").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SerializationError);
    expect(err).toMatchObject({ field: 'putWrites writes[1] (channel "links")', path: "$[0]", code: "SERIALIZATION_FAILED" });
    expect((await savers.strict.getTuple(config))?.pendingWrites).toEqual([]);
    // The default serializer stores the write's JSON form.
    await savers.default.putWrites(config, [["links", [new URL("https://a.dev")]]], "task-1");
    expect((await savers.default.getTuple(config))?.pendingWrites).toEqual([["task-1", "links", ["https://a.dev/"]]]);
  });
});
