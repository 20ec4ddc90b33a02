/**
 * The LangChain classes the msgpack serializer may rebuild: the built-in
 * allowlist (message classes, prompt values), classes a user registers, and
 * the constructor arguments stored for an object of one of them.
 */
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
import { ChatPromptValue, ImagePromptValue, StringPromptValue } from "@langchain/core/prompt_values";
import { InvalidOptionsError } from "../errors.js";

/** A LangChain class the serializer may rebuild: `new ctor(kwargs)`. */
export interface LangChainClassEntry {
  /** The class id written to storage, e.g. `["langchain_core", "prompt_values", "ChatPromptValue"]`. */
  id: readonly string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  ctor: new (kwargs: any) => unknown;
}

/**
 * The built-in allowlist. The ids are part of the on-disk format: they are what
 * `toJSON().id` returned for these classes in @langchain/core 1.x. Keep old ids
 * here if @langchain/core ever changes them, so that old rows stay readable.
 */
export const BUILTIN_LANGCHAIN_CLASSES: readonly (LangChainClassEntry & Pick<ResolvedEntry, "build">)[] = [
  { id: ["langchain_core", "messages", "HumanMessage"], ctor: HumanMessage },
  { id: ["langchain_core", "messages", "HumanMessageChunk"], ctor: HumanMessageChunk },
  { id: ["langchain_core", "messages", "AIMessage"], ctor: AIMessage },
  { id: ["langchain_core", "messages", "AIMessageChunk"], ctor: AIMessageChunk },
  { id: ["langchain_core", "messages", "SystemMessage"], ctor: SystemMessage },
  { id: ["langchain_core", "messages", "SystemMessageChunk"], ctor: SystemMessageChunk },
  { id: ["langchain_core", "messages", "ToolMessage"], ctor: ToolMessage },
  { id: ["langchain_core", "messages", "ToolMessageChunk"], ctor: ToolMessageChunk },
  { id: ["langchain_core", "messages", "ChatMessage"], ctor: ChatMessage },
  { id: ["langchain_core", "messages", "ChatMessageChunk"], ctor: ChatMessageChunk },
  { id: ["langchain_core", "messages", "FunctionMessage"], ctor: FunctionMessage },
  { id: ["langchain_core", "messages", "FunctionMessageChunk"], ctor: FunctionMessageChunk },
  { id: ["langchain_core", "messages", "RemoveMessage"], ctor: RemoveMessage },
  // Prompt values: what a prompt template returns, often kept in state. Their
  // constructors only store the messages / text / image URL they are given.
  { id: ["langchain_core", "prompt_values", "ChatPromptValue"], ctor: ChatPromptValue },
  // Its constructor takes the string itself, not { value }.
  { id: ["langchain_core", "prompt_values", "StringPromptValue"], ctor: StringPromptValue, build: (kwargs) => new StringPromptValue(String(kwargs.value)) },
  { id: ["langchain_core", "prompt_values", "ImagePromptValue"], ctor: ImagePromptValue },
];

export const idKey = (id: readonly string[]): string => id.join("/");

export interface ResolvedEntry {
  readonly id: readonly string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly ctor: new (kwargs: any) => unknown;
  /** Rebuilds the object from its kwargs when the constructor does not take them as they are. */
  readonly build?: (kwargs: Record<string, unknown>) => unknown;
}

/** Allowlist of LangChain classes, by constructor (fast path) and by stored id. */
export class LangChainTable {
  readonly byCtor = new Map<unknown, ResolvedEntry>();
  readonly byKey = new Map<string, ResolvedEntry>();
  /** Constructors resolved through `lc_id` (e.g. a second copy of @langchain/core); null = not allowed. */
  readonly resolved = new WeakMap<object, ResolvedEntry | null>();

  constructor(extra: readonly LangChainClassEntry[]) {
    for (const entry of BUILTIN_LANGCHAIN_CLASSES) this.add(entry);
    extra.forEach((entry, i) => {
      if (
        !entry ||
        !Array.isArray(entry.id) ||
        entry.id.length === 0 ||
        !entry.id.every((part) => typeof part === "string" && part.length > 0)
      ) {
        throw new InvalidOptionsError(`langchainClasses[${i}].id`, "must be a non-empty array of non-empty strings");
      }
      if (typeof entry.ctor !== "function") {
        throw new InvalidOptionsError(`langchainClasses[${i}].ctor`, "must be a class");
      }
      if (this.byKey.has(idKey(entry.id)) || this.byCtor.has(entry.ctor)) {
        throw new InvalidOptionsError(`langchainClasses[${i}]`, `${entry.id.join(".")} is already registered`);
      }
      this.add(entry);
    });
  }

  private add(entry: LangChainClassEntry & Pick<ResolvedEntry, "build">): void {
    const resolved: ResolvedEntry = { id: Object.freeze([...entry.id]), ctor: entry.ctor, build: entry.build };
    this.byCtor.set(entry.ctor, resolved);
    this.byKey.set(idKey(entry.id), resolved);
  }

  /** The entry for a LangChain object being written, or undefined when it is not allowed. */
  lookup(obj: LcLike): ResolvedEntry | undefined {
    const ctor = (obj as { constructor?: unknown }).constructor;
    const direct = this.byCtor.get(ctor);
    if (direct) return direct;
    if (typeof ctor !== "function") return undefined;
    const cached = this.resolved.get(ctor);
    if (cached !== undefined) return cached ?? undefined;
    // Another copy of the same class (duplicate @langchain/core install): match by its id.
    const id = obj.lc_id;
    const byId =
      Array.isArray(id) && id.every((part) => typeof part === "string") ? this.byKey.get(idKey(id)) : undefined;
    this.resolved.set(ctor, byId ?? null);
    return byId;
  }
}

export interface LcLike {
  lc_serializable?: unknown;
  lc_kwargs?: unknown;
  lc_id?: unknown;
  [key: string]: unknown;
}

/**
 * The constructor arguments of a LangChain object: exactly what `Serializable.toJSON()`
 * puts in `kwargs` (current field values for the keys of `lc_kwargs`, plus
 * `lc_attributes`), but without its JSON-specific escaping and key renaming, so
 * values such as Dates or Maps inside survive.
 */
export function langChainKwargs(obj: LcLike): Record<string, unknown> | string {
  const source = obj.lc_kwargs;
  if (source === null || typeof source !== "object" || Array.isArray(source)) return "it has no lc_kwargs object";
  const kwargs = Object.create(null) as Record<string, unknown>;
  for (const key of Object.keys(source)) {
    kwargs[key] = key in obj ? obj[key] : (source as Record<string, unknown>)[key];
  }
  for (let proto = Object.getPrototypeOf(obj) as object | null; proto; proto = Object.getPrototypeOf(proto) as object | null) {
    const secrets: unknown = Reflect.get(proto, "lc_secrets", obj);
    if (secrets && typeof secrets === "object" && Object.keys(secrets).length > 0) {
      return "its class declares lc_secrets, which are never stored";
    }
    const attributes: unknown = Reflect.get(proto, "lc_attributes", obj);
    if (attributes && typeof attributes === "object") Object.assign(kwargs, attributes);
  }
  return kwargs;
}
