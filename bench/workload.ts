/**
 * The put/read workload: a chat-like thread whose checkpoints have 5 channels
 * (a growing array of LangChain messages plus small strings), of which 2 change
 * per step. Versions come from each saver's own `getNextVersion` (integers for
 * the official and in-memory savers, the counter.random strings for ours).
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  uuid6,
  type BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointMetadata,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";

const WORDS =
  "the order ships tomorrow morning please confirm your address and the delivery window we can also offer express shipping for a small fee or pickup at the nearest store your refund was processed".split(
    " ",
  );

/** Deterministic text of roughly `len` characters. */
export function text(seed: number, len: number): string {
  const out: string[] = [];
  let n = 0;
  for (let k = 0; n < len; k++) {
    const w = WORDS[(seed * 7 + k * 13) % WORDS.length]!;
    out.push(w);
    n += w.length + 1;
  }
  return out.join(" ");
}

/**
 * Text of roughly `len` characters whose words are drawn at random (a generator seeded by `seed`):
 * as compressible as prose (pglz takes it to about half), where {@link text}'s repeating word list
 * compresses many times over.
 */
export function variedText(seed: number, len: number): string {
  let x = (seed * 2654435761 + 1) >>> 0;
  const out: string[] = [];
  for (let n = 0; n < len; ) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const w = WORDS[(x >>> 8) % WORDS.length]!;
    out.push(w);
    n += w.length + 1;
  }
  return out.join(" ");
}

/** Message i of a conversation: even = user, odd = assistant (with usage metadata like a real model reply). */
export function chatMessage(i: number, thread = "t"): BaseMessage {
  if (i % 2 === 0) return new HumanMessage({ id: `${thread}-msg-${i}`, content: text(i, 60 + ((i * 37) % 120)) });
  return new AIMessage({
    id: `${thread}-msg-${i}`,
    content: text(i, 150 + ((i * 53) % 300)),
    response_metadata: { model_name: "gpt-4o-mini-2024-07-18", finish_reason: "stop" },
    usage_metadata: { input_tokens: 40 + i * 12, output_tokens: 30 + (i % 40), total_tokens: 70 + i * 12 + (i % 40) },
  });
}

export const MESSAGE_POOL: BaseMessage[] = Array.from({ length: 64 }, (_, i) => chatMessage(i));
const longer: BaseMessage[] = [...MESSAGE_POOL];

/** The first n messages of the conversation (the pool, then more of the same kind). */
export function messagesUpTo(n: number): BaseMessage[] {
  while (longer.length < n) longer.push(chatMessage(longer.length));
  return longer.slice(0, n);
}

export const CHANNELS = ["messages", "last_intent", "user_id", "locale", "session"] as const;
export const CHANGING = ["messages", "last_intent"] as const;

/** Messages in the conversation at step i: 8..23 (a rolling window, so sizes stay stationary over long runs). */
export const defaultMessageCount = (i: number): number => 8 + (i % 16);

/** Channel values of step i. */
export function valuesAt(i: number, messageCount = defaultMessageCount): Record<string, unknown> {
  return {
    messages: messagesUpTo(messageCount(i)),
    last_intent: `intent-${i % 7}: ${text(i, 24)}`,
    user_id: "user-7f3a2c",
    locale: "en-US",
    session: "sess-2024-11-30-abcdef",
  };
}

/** The 2 pending writes of a task at step i. */
export function writesAt(i: number): PendingWrite[] {
  return [
    ["messages", [MESSAGE_POOL[(i * 2 + 1) % MESSAGE_POOL.length]!]],
    ["last_intent", `intent-${(i + 1) % 7}`],
  ];
}

export interface Written {
  id: string;
  step: number;
  values: Record<string, unknown>;
  writes: { taskId: string; writes: PendingWrite[] }[];
}

/** Writes a chain of checkpoints on one thread through any saver, remembering what it wrote. */
export class ChatThread {
  readonly versions: ChannelVersions = {};
  readonly written: Written[] = [];
  #head: string | undefined;

  /** Keep the values of every checkpoint (for spot checks); off for very long threads. */
  readonly remember: boolean;
  readonly messageCount: (i: number) => number;

  constructor(
    /** Mutable: a thread built through a loader saver can be continued through another. */
    public saver: BaseCheckpointSaver,
    readonly threadId: string,
    options: { remember?: boolean; messageCount?: (i: number) => number } = {},
  ) {
    this.remember = options.remember ?? true;
    this.messageCount = options.messageCount ?? defaultMessageCount;
  }

  get head(): string | undefined {
    return this.#head;
  }

  config(checkpointId?: string): RunnableConfig {
    return { configurable: { thread_id: this.threadId, checkpoint_ns: "", ...(checkpointId ? { checkpoint_id: checkpointId } : {}) } };
  }

  /** put of step i: all 5 channels are new on the first put, then 2 change per step. */
  async put(i: number): Promise<RunnableConfig> {
    const values = valuesAt(i, this.messageCount);
    const changed: readonly string[] = this.#head === undefined ? CHANNELS : CHANGING;
    const newVersions: ChannelVersions = {};
    for (const ch of changed) {
      const v = this.saver.getNextVersion(this.versions[ch] as never) as string | number;
      newVersions[ch] = v;
      this.versions[ch] = v;
    }
    const checkpoint: Checkpoint = {
      v: 4,
      id: uuid6(-1),
      ts: new Date().toISOString(),
      channel_values: values,
      channel_versions: { ...this.versions },
      versions_seen: {
        __input__: {},
        agent: { messages: this.versions.messages!, last_intent: this.versions.last_intent! },
        tools: { messages: this.versions.messages! },
      },
    };
    const metadata = { source: "loop", step: i, parents: {} } as CheckpointMetadata;
    const next = await this.saver.put(this.config(this.#head), checkpoint, metadata, newVersions);
    this.#head = checkpoint.id;
    this.written.push({ id: checkpoint.id, step: i, values: this.remember ? values : {}, writes: [] });
    return next;
  }

  /** 2 pending writes of task `task-i` on the given checkpoint (default: the head). */
  async putWrites(i: number, checkpointId = this.#head!): Promise<void> {
    const writes = writesAt(i);
    const taskId = `task-${i}`;
    await this.saver.putWrites(this.config(checkpointId), writes, taskId);
    const last = this.written[this.written.length - 1];
    const w = last?.id === checkpointId ? last : this.written.find((x) => x.id === checkpointId);
    if (w && this.remember) w.writes.push({ taskId, writes });
  }

  /** Builds `n` checkpoints, each with one task's 2 pending writes. */
  async build(n: number, start = 0): Promise<void> {
    for (let i = start; i < start + n; i++) {
      await this.put(i);
      await this.putWrites(i);
    }
  }
}

/** A comparable projection of channel values: messages as [type, content, id]. */
export function project(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(project);
  if (value && typeof value === "object") {
    const m = value as { getType?: () => string; content?: unknown; id?: unknown };
    if (typeof m.getType === "function") return ["msg", m.getType(), m.content, m.id];
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => [k, project(v)]),
    );
  }
  return value;
}

export function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(project(a)) === JSON.stringify(project(b));
}
