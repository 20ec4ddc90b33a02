/** Small builders for checkpoints in tests. */
import { uuid6, type Checkpoint, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";

export function makeCheckpoint(values: Record<string, unknown> = {}, versions?: Record<string, string | number>): Checkpoint {
  return {
    v: 4,
    id: uuid6(-3),
    ts: new Date().toISOString(),
    channel_values: values,
    channel_versions: versions ?? Object.fromEntries(Object.keys(values).map((k) => [k, 1])),
    versions_seen: {},
  };
}

export function meta(step: number, extra: Record<string, unknown> = {}): CheckpointMetadata {
  return { source: step < 0 ? "input" : "loop", step, parents: {}, ...extra } as CheckpointMetadata;
}

/**
 * A text of 300 characters beginning with `label` (texts of different labels differ): what a message
 * or a tool's line holds, long enough that a list of even one of them is stored by its elements.
 * Element storage keeps a list whole unless its elements serialize to BY_CONTENT_MIN_BYTES (256) or
 * more (src/saver/element-names.ts, issue 40), so a test about element rows needs elements of about
 * this size; `["a", "b"]` is stored whole.
 */
export function longText(label: string | number): string {
  return `${label}: `.padEnd(300, "a sentence of the kind a chat message holds, repeated to a realistic length. ");
}
