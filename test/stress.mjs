#!/usr/bin/env node
/**
 * `npm run test:stress [-- vitest args]`: the test suite with CPU hogs running next to it, the way
 * a busy CI machine runs it. Tests must pass here too: they wait for conditions, never for time.
 *
 * Starts STRESS_HOGS (default 2) busy loops, runs `npm test`, always stops the hogs, prints the
 * wall time and exits with the suite's code. A hog also stops by itself once this script is gone
 * (even killed with SIGKILL), so none outlives the run.
 */
import { spawn } from "node:child_process";

const count = Number(process.env.STRESS_HOGS ?? 2);
// The hog checks now and then that its parent is still this script.
const hogCode = `const p = ${process.pid}; for (let i = 1; ; i++) if (i % 5e7 === 0 && process.ppid !== p) process.exit(0);`;
const hogs = Array.from({ length: count }, () => spawn(process.execPath, ["-e", hogCode], { stdio: "ignore" }));
const stopHogs = () => {
  for (const hog of hogs) if (hog.exitCode === null && hog.signalCode === null) hog.kill("SIGKILL");
};
process.on("exit", stopHogs);

const t0 = performance.now();
console.log(`[stress] ${count} CPU hog(s) running (pids ${hogs.map((h) => h.pid).join(", ")}); npm test ${process.argv.slice(2).join(" ")}`);
const suite = spawn("npm", ["test", "--", ...process.argv.slice(2)], { stdio: "inherit" });
// Ctrl-C reaches the suite through the terminal's process group; leave only after it ends.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => suite.kill(signal));
suite.on("exit", (code, signal) => {
  stopHogs();
  const secs = ((performance.now() - t0) / 1000).toFixed(0);
  console.log(`[stress] suite ${code === 0 ? "passed" : `failed (${signal ?? `exit ${code}`})`} in ${secs}s with ${count} CPU hog(s)`);
  process.exit(code ?? 1);
});
