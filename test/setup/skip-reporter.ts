/**
 * Ends every run with the skipped tests and why they skipped, grouped: the default reporter only
 * counts them. The reason is the skip note (`ctx.skip(note)`), else the name of the skipped suite
 * (see test/helpers/requirements.ts: `[skipped: ...]`), else "no reason given".
 * Runs filtered with -t or .only skip the rest on purpose and are not listed.
 */
import type { Reporter, TestCase, TestModule, Vitest } from "vitest/node";

export default class SkipReporter implements Reporter {
  #ctx!: Vitest;

  onInit(ctx: Vitest): void {
    this.#ctx = ctx;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    if (this.#ctx.config.testNamePattern) return;
    const groups = new Map<string, number>();
    for (const module of testModules) {
      for (const test of module.children.allTests("skipped")) {
        const where = `${module.relativeModuleId}: ${reason(test)}`;
        groups.set(where, (groups.get(where) ?? 0) + 1);
      }
    }
    if (groups.size === 0) return;
    const total = [...groups.values()].reduce((a, b) => a + b, 0);
    const lines = [...groups].map(([where, n]) => `  ${String(n).padStart(5)}  ${where}`);
    this.#ctx.logger.log(`\n Skipped ${total} test(s), and why:\n${lines.join("\n")}\n`);
  }
}

function reason(test: TestCase): string {
  const result = test.result();
  if (result.state === "skipped" && result.note) return `${test.fullName} [${result.note}]`;
  if (test.options.mode === "todo") return `todo: ${test.fullName}`;
  // The outermost suite that was skipped as a whole names the reason for all of its tests.
  let outer: string | undefined;
  for (let s = test.parent; s.type === "suite"; s = s.parent) if (s.options.mode === "skip") outer = s.name;
  if (outer) return outer;
  return `${test.fullName} (no reason given)`;
}
