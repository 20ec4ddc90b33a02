/**
 * An older release of this package, from git history: the `src/` and
 * `migrations/` of the commit just before the one that added a migration,
 * extracted (once) into `.releases/<commit>/` at the top of the repository
 * (git-ignored; inside it so its imports resolve to this node_modules), to
 * run in a child process (test/helpers/writer.ts) with tsx.
 *
 * @example
 * ```ts
 * const prev = releaseBefore(loadMigrations().at(-1)!.name); // the release before the newest migration
 * const w = startWriter(`release:${prev.dir}`, db.url, "app", ["t1"]);
 * ```
 */
import { execFileSync, execSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./cli.js";

export interface Release {
  /** Where its src/ and migrations/ are. */
  dir: string;
  commit: string;
  /** Its code level: the number of migrations it ships. */
  level: number;
}

const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();

export function releaseBefore(migrationTag: string): Release {
  return releaseBeforeAdding(`migrations/${migrationTag}.sql`);
}

/**
 * The code of the commit just before the one that added `path` (e.g. `src/saver/elements.ts`: the
 * release before element storage).
 */
export function releaseBeforeAdding(path: string): Release {
  let added: string;
  try {
    added = git("log", "--diff-filter=A", "--format=%H", "-1", "--", path);
  } catch (err) {
    throw new Error(`releaseBefore needs the repository's git history (git log failed: ${String(err)})`);
  }
  if (!added) throw new Error(`releaseBefore: no commit adds ${path} in this clone's history (a shallow clone?)`);
  const commit = git("rev-parse", `${added}^`);
  const dir = join(ROOT, ".releases", commit.slice(0, 12));
  if (!existsSync(dir)) {
    // Extract beside, then rename: a concurrent extraction never sees half a tree.
    const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
    mkdirSync(tmp, { recursive: true });
    try {
      // With its tsconfig.json, which src/tsconfig.json extends (what a transform of its files reads).
      execSync(`git archive --format=tar ${commit} src migrations tsconfig.json | tar -x -C "${tmp}"`, { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
      // The release's migrations are found beside the package.json that names the package (src/db/migrations.ts):
      // without one, it would walk up to this clone's and apply the newer migrations.
      writeFileSync(join(tmp, "package.json"), `${JSON.stringify({ name: "langgraph-checkpoint-pg", private: true, type: "module" })}\n`);
      renameSync(tmp, dir);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      if (!existsSync(dir)) throw err;
    }
  }
  const journal = JSON.parse(readFileSync(join(dir, "migrations", "meta", "_journal.json"), "utf8")) as { entries: unknown[] };
  return { dir, commit, level: journal.entries.length };
}
