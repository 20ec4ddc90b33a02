/**
 * A namespace's checkpoints as a tree: the line that leads to the head runs
 * straight down; every other child of a checkpoint (a fork: time travel,
 * `updateState` on an old checkpoint) hangs off it, indented.
 */
import type { HistoryEntry, Lineage } from "../ops/inspect.js";
import { formatTime, type Style } from "./format.js";

export function renderLineage(lineage: Lineage, style: Style): string[] {
  const byId = new Map(lineage.checkpoints.map((c) => [c.checkpointId, c]));
  // The head's ancestors: the main line at every branch point.
  const onHeadPath = new Set<string>();
  for (let id = lineage.head; id !== null && !onHeadPath.has(id); ) {
    onHeadPath.add(id);
    id = byId.get(id)?.parentCheckpointId ?? null;
  }
  const roots = lineage.checkpoints.filter((c) => c.parentCheckpointId === null || !byId.has(c.parentCheckpointId));
  const lines: [prefix: string, entry: HistoryEntry][] = [];
  const seen = new Set<string>();
  const chain = (start: HistoryEntry, first: string, rest: string) => {
    let cur: HistoryEntry | undefined = start;
    let prefix = first;
    while (cur && !seen.has(cur.checkpointId)) {
      seen.add(cur.checkpointId);
      lines.push([prefix, cur]);
      prefix = rest;
      const kids: HistoryEntry[] = cur.children.map((id) => byId.get(id)).filter((k): k is HistoryEntry => k !== undefined);
      const main: HistoryEntry | undefined = kids.find((k) => onHeadPath.has(k.checkpointId)) ?? kids[kids.length - 1];
      for (const k of kids) if (k !== main) chain(k, `${rest}├─`, `${rest}│ `);
      cur = main;
    }
  };
  // Roots off the head's line first, so the main line ends the listing at the head.
  roots.sort((a, b) => Number(onHeadPath.has(a.checkpointId)) - Number(onHeadPath.has(b.checkpointId)));
  for (const root of roots) chain(root, "", "");
  const idWidth = Math.max(0, ...lines.map(([p, e]) => [...p].length + e.checkpointId.length));
  const sourceWidth = Math.max(0, ...lines.map(([, e]) => (e.source ?? "").length));
  const stepWidth = Math.max(0, ...lines.map(([, e]) => String(e.step ?? "").length));
  return lines.map(([prefix, e]) => {
    const idCell = `${style.dim(prefix)}● ${e.checkpointId}`.padEnd(idWidth + 2 + (style.dim(prefix).length - prefix.length));
    const orphan = e.parentCheckpointId !== null && !byId.has(e.parentCheckpointId) ? style.yellow(`  (parent ${e.parentCheckpointId} not stored)`) : "";
    const head = e.isHead ? `  ${style.green("← head")}` : "";
    return `${idCell}  ${(e.source ?? "").padEnd(sourceWidth)}  step ${String(e.step ?? "").padStart(stepWidth)}  ${style.dim(formatTime(e.createdAt))}${head}${orphan}`;
  });
}
