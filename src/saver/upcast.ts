/**
 * State-schema evolution. Each checkpoint records the `stateVersion` it was
 * written with; a checkpoint older than the saver's is upcast through the
 * chain N -> N+1 -> ... on read, before LangGraph sees it. Stored rows stay as
 * they are until `upgradeState` rewrites them.
 *
 * Channels an upcaster creates, renames or changes get a new version whose
 * blob does not exist yet (`<counter>.u<N>.<checkpoint id>`). The next `put`
 * of a run continuing from the upcast checkpoint stores those blobs, so the
 * new checkpoint never references a value that was only computed in memory.
 */
import type { CheckpointPendingWrite, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { CheckpointerError, InvalidOptionsError } from "../errors.js";
import { counterText, parseVersion, versionCounter } from "./version.js";
import { StateVersionError } from "../errors.js";

export interface UpcastContext {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  /** The version the values are in. */
  fromVersion: number;
  /** `fromVersion + 1`: the version the function must return. */
  toVersion: number;
}

/** Turns the state channel values of a version-N checkpoint into version N+1's. Must be pure. */
export type UpcastFunction = (values: Record<string, unknown>, ctx: UpcastContext) => Record<string, unknown>;

/**
 * An upcaster: a function, or `rename` (old channel name -> new; applied to
 * values, versions and pending writes) followed by an optional `values` function.
 */
export type Upcaster = UpcastFunction | { rename?: Record<string, string>; values?: UpcastFunction };


export interface StateVersioning {
  stateVersion: number;
  upcasters: Record<number, Upcaster>;
}

/** Validate the saver options; undefined when state versioning is off. */
export function checkVersioning(stateVersion: unknown, upcasters: unknown): StateVersioning | undefined {
  if (stateVersion === undefined) {
    if (upcasters !== undefined) throw new InvalidOptionsError("upcasters", "needs stateVersion");
    return undefined;
  }
  if (!Number.isInteger(stateVersion) || (stateVersion as number) < 1) throw new InvalidOptionsError("stateVersion", "expected a positive integer");
  const map = (upcasters ?? {}) as Record<string, unknown>;
  if (typeof map !== "object" || map === null) throw new InvalidOptionsError("upcasters", "expected an object mapping version N to an upcaster N -> N+1");
  for (const [key, up] of Object.entries(map)) {
    const n = Number(key);
    if (!Number.isInteger(n) || n < 1 || n >= (stateVersion as number)) {
      throw new InvalidOptionsError(`upcasters[${key}]`, `keys are versions 1..${(stateVersion as number) - 1} (an upcaster from N to N+1)`);
    }
    const spec = up as { rename?: unknown; values?: unknown } | null;
    const ok =
      typeof up === "function" ||
      (typeof spec === "object" &&
        spec !== null &&
        (spec.values === undefined || typeof spec.values === "function") &&
        (spec.rename === undefined || (typeof spec.rename === "object" && spec.rename !== null)));
    if (!ok) throw new InvalidOptionsError(`upcasters[${key}]`, "expected a function or { rename?, values? }");
  }
  return { stateVersion: stateVersion as number, upcasters: map as Record<number, Upcaster> };
}

/** LangGraph's own channels (start, branch triggers, tasks, interrupts...) are never shown to upcasters. */
export function isInternalChannel(name: string): boolean {
  return name.startsWith("__") || name.includes(":");
}

/** Long or short counter (saver/version.ts), then `.u<state version>.`: no random part has a dot. */
const SYNTHETIC = /^(\d{32}|-[a-z][0-9a-z]+)\.u\d+\./;

/*
 * Numeric versions (threads adopted from the official JS saver) mark the same
 * thing by their fraction: getNextVersion uses [0, 0.5), an upcast [0.75, 0.95),
 * a version made real by upgradeState [0.5, 0.7).
 */
const fraction = (v: number) => v - Math.floor(v);

/** True for a version made up by an upcast, whose blob the next put must store. */
export function isSyntheticVersion(version: unknown): boolean {
  if (typeof version === "number") return fraction(version) >= 0.75 && fraction(version) < 0.95;
  return typeof version === "string" && SYNTHETIC.test(version);
}

/** The version an upcast one becomes once upgradeState stored its blob; others unchanged. */
export function realVersion(version: string | number): string | number {
  if (!isSyntheticVersion(version)) return version;
  if (typeof version === "number") return Math.floor(version) + 0.5 + Math.random() * 0.2;
  return version.replace(".u", ".r");
}


/**
 * Bring a tuple read at `storedVersion` to `versioning.stateVersion`, in place.
 * Returns the channel renames applied (stored name -> current name). Throws
 * {@link StateVersionError} when that is impossible.
 */
export function upcastTuple(tuple: CheckpointTuple, storedVersion: number | null, versioning: StateVersioning): Map<string, string> {
  const { stateVersion, upcasters } = versioning;
  const from = storedVersion ?? 1;
  const cfg = tuple.config.configurable!;
  const ids = { threadId: cfg.thread_id as string, checkpointNs: cfg.checkpoint_ns as string, checkpointId: cfg.checkpoint_id as string };
  if (from > stateVersion) throw new StateVersionError({ ...ids, storedVersion: from, stateVersion });
  if (from === stateVersion) return new Map();
  for (let v = from; v < stateVersion; v++) {
    if (!upcasters[v]) throw new StateVersionError({ ...ids, storedVersion: from, stateVersion, missingUpcaster: v });
  }
  const cp = tuple.checkpoint;
  const before = { ...cp.channel_values } as Record<string, unknown>;
  let values: Record<string, unknown> = {};
  const internal: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(before)) (isInternalChannel(k) ? internal : values)[k] = val;
  // Where each output channel's value came from (for renames), to keep versions when nothing changed.
  let origin: Record<string, string> = Object.fromEntries(Object.keys(values).map((k) => [k, k]));
  // Stored channel name -> its name now, through every rename of the chain.
  const nameOf = new Map(Object.keys(values).map((k) => [k, k]));
  for (let v = from; v < stateVersion; v++) {
    const up = upcasters[v]!;
    const fn = typeof up === "function" ? up : up.values;
    const rename = typeof up === "function" ? undefined : up.rename;
    if (rename) {
      const renamed: Record<string, unknown> = {};
      const renamedOrigin: Record<string, string> = {};
      for (const [k, val] of Object.entries(values)) {
        const to = rename[k] ?? k;
        renamed[to] = val;
        if (origin[k] !== undefined) renamedOrigin[to] = origin[k]!;
      }
      values = renamed;
      origin = renamedOrigin;
      const currents = new Set(nameOf.values());
      for (const [stored, current] of nameOf) if (rename[current] !== undefined) nameOf.set(stored, rename[current]!);
      // A channel without a value here may still have pending writes under its old name.
      for (const [a, b] of Object.entries(rename)) if (!currents.has(a)) nameOf.set(a, b);
    }
    if (fn) {
      const out = fn({ ...values }, { ...ids, fromVersion: v, toVersion: v + 1 });
      if (typeof out !== "object" || out === null) {
        throw new InvalidOptionsError(`upcasters[${v}]`, "must return an object of channel values");
      }
      const nextOrigin: Record<string, string> = {};
      for (const k of Object.keys(out)) if (out[k] === values[k] && origin[k] !== undefined) nextOrigin[k] = origin[k]!;
      values = out;
      origin = nextOrigin;
    }
  }
  const versions = { ...cp.channel_versions } as Record<string, string | number>;
  const counter = Math.max(0, ...Object.values(versions).map(versionCounter));
  const numeric = Object.values(versions).some((v) => typeof v === "number");
  // In the thread's format: long if any version is (long ones sort after short ones: LangGraph continues from them).
  const format = Object.values(versions).some((v) => typeof v === "string" && parseVersion(v).format === "long") ? "long" : "short";
  const synthetic = numeric ? counter + 0.75 + Math.random() * 0.2 : `${counterText(counter, format)}.u${stateVersion}.${ids.checkpointId}`;
  const newVersions: Record<string, string | number> = {};
  for (const k of Object.keys(versions)) if (isInternalChannel(k)) newVersions[k] = versions[k]!;
  for (const k of Object.keys(values)) {
    const src = origin[k];
    newVersions[k] = src === k && versions[k] !== undefined ? versions[k]! : synthetic;
  }
  cp.channel_values = { ...internal, ...values };
  cp.channel_versions = newVersions;
  const renames = new Map([...nameOf].filter(([a, b]) => a !== b));
  if (renames.size > 0) {
    for (const seen of Object.values(cp.versions_seen ?? {})) {
      for (const [a, b] of renames) {
        if (a in seen) {
          seen[b] = seen[a]!;
          delete seen[a];
        }
      }
    }
    tuple.pendingWrites = tuple.pendingWrites?.map(([task, channel, value]): CheckpointPendingWrite => [task, renames.get(channel) ?? channel, value]);
  }
  return renames;
}
