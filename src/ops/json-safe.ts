/**
 * Decoded values as JSON for people and tools (`show`, `export --decoded`,
 * the CLI's value columns). A module of its own: it needs no serializer, so
 * the CLI's tables load it without the decoding machinery (@langchain/*).
 */

/**
 * A decoded value as JSON, keeping what JSON cannot say in tagged objects:
 * `{"$type":"undefined"}`, `{"$type":"bigint","value":"12"}`,
 * `{"$type":"Date","value":"2026-01-01T00:00:00.000Z"}`, `{"$type":"Map","entries":[[k,v]]}`,
 * `{"$type":"Set","values":[...]}`, `{"$type":"Uint8Array","base64":"..."}`,
 * `{"$type":"number","value":"NaN"}` (also `Infinity`, `-Infinity`, `-0`),
 * `{"$type":"RegExp","source","flags"}`, `{"$type":"Error","name","message"}`,
 * `{"$type":"lc","id":[...],"kwargs":{...}}` (LangChain objects such as messages),
 * `{"$type":"<Class>","value":{...}}` (other class instances). A plain object
 * that itself has a `$type` key is wrapped as `{"$type":"object","value":{...}}`.
 *
 * @example
 * ```ts
 * toJsonSafe({ seen: new Set([1]), at: new Date(0) });
 * // { seen: { $type: "Set", values: [1] }, at: { $type: "Date", value: "1970-01-01T00:00:00.000Z" } }
 * ```
 */
export function toJsonSafe(value: unknown): unknown {
  return jsonSafe(value, 0);
}

function jsonSafe(value: unknown, depth: number): unknown {
  if (depth > 600) return { $type: "truncated" };
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (Object.is(value, -0)) return { $type: "number", value: "-0" };
      return Number.isFinite(value) ? value : { $type: "number", value: String(value) };
    case "bigint":
      return { $type: "bigint", value: value.toString() };
    case "undefined":
      return { $type: "undefined" };
    case "symbol":
    case "function":
      return { $type: typeof value, value: String(value) };
  }
  if (value === null) return null;
  const next = (v: unknown) => jsonSafe(v, depth + 1);
  if (Array.isArray(value)) return Array.from(value, next);
  if (value instanceof Date) return { $type: "Date", value: Number.isNaN(value.getTime()) ? null : value.toISOString() };
  if (value instanceof Map) return { $type: "Map", entries: [...value].map(([k, v]) => [next(k), next(v)]) };
  if (value instanceof Set) return { $type: "Set", values: [...value].map(next) };
  if (value instanceof Uint8Array && (value.constructor === Uint8Array || Buffer.isBuffer(value))) {
    return { $type: "Uint8Array", base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  }
  if (value instanceof ArrayBuffer) return { $type: "ArrayBuffer", base64: Buffer.from(value).toString("base64") };
  if (value instanceof DataView) return { $type: "DataView", base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  if (ArrayBuffer.isView(value)) return { $type: value.constructor.name, values: Array.from(value as unknown as ArrayLike<unknown>, next) };
  if (value instanceof RegExp) return { $type: "RegExp", source: value.source, flags: value.flags };
  if (value instanceof Error) {
    const out: Record<string, unknown> = { $type: "Error", name: value.name, message: value.message };
    if (value.stack !== undefined) out.stack = value.stack;
    if ("cause" in value) out.cause = next(value.cause);
    return out;
  }
  const obj = value as Record<string, unknown>;
  if (obj.lc_serializable === true && typeof obj.toJSON === "function") {
    const json = (obj.toJSON as () => { id?: unknown; kwargs?: unknown })();
    return { $type: "lc", id: json.id, kwargs: next(json.kwargs) };
  }
  const entries: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) entries[k] = next(v);
  const proto = Object.getPrototypeOf(obj) as object | null;
  if (proto !== Object.prototype && proto !== null) return { $type: (proto.constructor as { name?: string } | undefined)?.name || "object", value: entries };
  return Object.prototype.hasOwnProperty.call(obj, "$type") ? { $type: "object", value: entries } : entries;
}
