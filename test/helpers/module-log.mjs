/**
 * A loader hook that writes the URL of every module a process loads, one a
 * line, to the file named by MODULE_LOG: how a test sees what a command
 * loads at start (no timing involved). Given to the child as
 * NODE_OPTIONS=--import=<this file's URL> (see modulesLoadedBy in cli.ts).
 * Plain JavaScript: the child may run without tsx.
 */
import { appendFileSync } from "node:fs";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

// In the process itself: install the hooks (this same file, run again in the hooks' own thread).
if (isMainThread) register(import.meta.url);

export async function load(url, context, next) {
  if (process.env.MODULE_LOG) appendFileSync(process.env.MODULE_LOG, `${url}\n`);
  return next(url, context);
}
