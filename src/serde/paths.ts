/**
 * The path (`$.items[2].link`) of a value the msgpack serializer cannot
 * write, for its error message. Runs only after a write failed.
 */
import { Document } from "@langchain/core/documents";
import { MAX_DEPTH } from "./ext.js";
import type { LcLike } from "./langchain.js";

/** What the path search asks of the codec: the children it would write for a LangChain object. */
interface LangChainParts {
  langChainParts(obj: LcLike): [readonly string[], Record<string, unknown>];
}

export const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
export const MAX_PATH_SEGMENTS = 12;

export function formatKey(key: unknown): string {
  if (typeof key === "string") return IDENTIFIER.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  if (typeof key === "number" || typeof key === "boolean" || key === null || key === undefined) return `[${String(key)}]`;
  return "[…]";
}

export function formatMapKey(key: unknown): string {
  if (typeof key === "string") return JSON.stringify(key);
  if (typeof key === "number" || typeof key === "boolean" || key === null || key === undefined) return String(key);
  if (typeof key === "bigint") return `${key}n`;
  return "…";
}

/** The children the encoder visits, with their path segments. */
export function childrenOf(value: unknown, engine: LangChainParts): Array<[string, unknown]> {
  if (value === null || typeof value !== "object") return [];
  if (Array.isArray(value)) return value.map((item, i) => [`[${i}]`, item]);
  const proto = Object.getPrototypeOf(value) as unknown;
  const record = value as Record<string, unknown>;
  if (proto === Object.prototype || proto === null) return Object.keys(record).map((key) => [formatKey(key), record[key]]);
  try {
    if (value instanceof Map) {
      const out: Array<[string, unknown]> = [];
      let i = 0;
      for (const [key, item] of value) {
        out.push([`.keys()[${i++}]`, key], [`.get(${formatMapKey(key)})`, item]);
      }
      return out;
    }
    if (value instanceof Set) return [...value].map((item, i) => [`.values()[${i}]`, item]);
    if (value instanceof Error) return Object.keys(record).map((key) => [formatKey(key), record[key]] as [string, unknown]).concat("cause" in value ? [[".cause", value.cause]] : []);
    if (record.lg_name === "DeltaSnapshot") return [[".value", record.value]];
    if (typeof record.lg_name === "string" && typeof record.toJSON === "function") {
      const json = (record.toJSON as () => unknown).call(value);
      return json !== null && typeof json === "object" ? Object.entries(json).map(([key, item]) => [formatKey(key), item]) : [];
    }
    if ("lc_serializable" in record) {
      const [, kwargs] = engine.langChainParts(record);
      return Object.keys(kwargs).map((key) => [formatKey(key), kwargs[key]]);
    }
    if (value.constructor === Document) return [[".metadata", (value as Document).metadata]];
  } catch {
    return [];
  }
  return [];
}

/** Path (from `$`) of `target` inside `root`, or of the first value nested too deep. */
export function findPath(root: unknown, target: unknown, tooDeep: boolean, engine: LangChainParts): string | undefined {
  const stack: Array<{ value: unknown; path: string[] }> = [{ value: root, path: [] }];
  let visited = 0;
  while (stack.length > 0 && visited++ < 1_000_000) {
    const { value, path } = stack.pop()!;
    if (tooDeep ? path.length >= MAX_DEPTH : Object.is(value, target)) {
      const shown = path.length > MAX_PATH_SEGMENTS ? [...path.slice(0, MAX_PATH_SEGMENTS), `…(${path.length - MAX_PATH_SEGMENTS} more)`] : path;
      return `$${shown.join("")}`;
    }
    if (path.length > MAX_DEPTH) continue;
    const children = childrenOf(value, engine);
    for (let i = children.length - 1; i >= 0; i--) {
      const [segment, child] = children[i]!;
      stack.push({ value: child, path: [...path, segment] });
    }
  }
  return undefined;
}
