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
