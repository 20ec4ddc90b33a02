/**
 * Linear mode refuses, by design, any put whose parent is not the lineage head.
 * The conformance suite writes several roots into one thread in exactly two
 * places; those tests (and nothing else) must fail. Runs the suite's differential
 * (test/linear/conformance.suite.ts) in a child vitest against the same server
 * and compares the set of failures.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, inject, it } from "vitest";

/** Each writes a second root into a non-empty lineage; see README "Concurrency". */
export const REJECTED_BY_DESIGN = [
  // Three roots in one thread, to check that only versioned channels are stored.
  "langgraph-checkpoint-pg (linear)#put should only store channel_values that have changed (based on newVersions)",
  // Both namespace groups write a root into the fixed thread "thread-1" on one checkpointer.
  "langgraph-checkpoint-pg (linear)#getTuple namespace: child should migrate pending sends",
];

it("the conformance suite in linear mode fails exactly the tests rejected by design", async () => {
  const dir = mkdtempSync(join(tmpdir(), "linear-conformance-"));
  const out = join(dir, "report.json");
  try {
    await promisify(execFile)(
      join(process.cwd(), "node_modules/.bin/vitest"),
      ["run", "--config", "test/linear/vitest.config.ts", "--reporter=json", `--outputFile=${out}`],
      { cwd: process.cwd(), env: { ...process.env, TEST_DATABASE_URL: inject("pgAdminUrl") }, maxBuffer: 64 * 1024 * 1024 },
    ).catch((err: { code?: number }) => {
      // vitest exits 1 when tests fail: expected here; anything else is not.
      if (err.code !== 1) throw err;
    });
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      numTotalTests: number;
      numPassedTests: number;
      numPendingTests: number;
      testResults: { assertionResults: { status: string; ancestorTitles: string[]; title: string }[] }[];
    };
    const failed = report.testResults
      .flatMap((f) => f.assertionResults)
      .filter((a) => a.status === "failed")
      .map((a) => [...a.ancestorTitles.slice(1), a.title].join(" "));
    expect(failed.sort()).toEqual([...REJECTED_BY_DESIGN].sort());
    expect(report.numPassedTests).toBe(report.numTotalTests - REJECTED_BY_DESIGN.length);
    expect(report.numPassedTests).toBeGreaterThan(100); // the differential ran, not an empty file
    expect(report.numPendingTests).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 180_000);
