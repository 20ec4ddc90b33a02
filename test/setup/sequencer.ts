/**
 * Longest files first, so a run does not end with one worker on a long file and the other idle.
 * Vitest orders by the durations it cached on earlier runs; a fresh clone (CI) has none, and
 * its fallback order left prune and pglite for last. These files spawn processes, run PGlite or
 * write thousand-step threads; list a new file here if it takes as long.
 */
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

const LONGEST = [
  // npm run test:long
  "tarball.long",
  "ops/prune-long-thread.long",
  "docs.long",
  "db/pglite.long",
  "saver/strings.long",
  "cli/embedded.long",
  "db/failover.long",
  "store/vector-cli.long",
  "cli/hints.long",
  "cli/transfer.long",
  // npm test, longest first as a run on a busy 2-core machine measured them
  "cli/cli",
  "ops/prune",
  "ops/import",
  "ops/adopt",
  "db/pglite",
  "store/vector",
  "saver/reused-thread",
].map((name) => `test/${name}.test.ts`);

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const cached = sorted.every((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${relative(this.ctx.config.root, f.moduleId)}`));
    if (cached) return sorted;
    const rank = (f: TestSpecification) => {
      const i = LONGEST.findIndex((name) => f.moduleId.endsWith(name));
      return i === -1 ? LONGEST.length : i;
    };
    return sorted.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f);
  }
}
