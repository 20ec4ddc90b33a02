/**
 * Loading a module the user names on the command line (upcasters, a
 * serializer): JavaScript as it is, TypeScript where Node or tsx can.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { NotFoundError } from "./exit.js";

/** Load a user module (upcasters, serializer) by path; its exports may also sit under `default` (found by `marker`). */
export async function loadModule(path: string, what: string, marker: string): Promise<Record<string, unknown>> {
  let mod: Record<string, unknown>;
  try {
    mod = (await importModule(path)) as Record<string, unknown>;
  } catch (err) {
    throw new NotFoundError(`cannot load the ${what} module ${JSON.stringify(path)}: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
  }
  return mod[marker] !== undefined ? mod : ((mod.default ?? {}) as Record<string, unknown>);
}

/**
 * The user's module. A TypeScript one loads as it is where Node strips types
 * (22.6 and later, or a loader such as `node --import tsx`); on Node 20 it is
 * loaded through tsx when the user's project has it.
 */
async function importModule(file: string): Promise<unknown> {
  const url = pathToFileURL(resolve(file)).href;
  try {
    return await import(url);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ERR_UNKNOWN_FILE_EXTENSION" || !/\.[cm]?tsx?$/.test(file)) throw err;
  }
  // tsx from the module's project, else from the working directory's: its ES module API (require
  // would resolve the CommonJS one), found through its package.json's exports.
  for (const from of [dirname(resolve(file)), process.cwd()]) {
    let manifest: string;
    try {
      manifest = createRequire(resolve(from, "noop.js")).resolve("tsx/package.json");
    } catch {
      continue;
    }
    const spec = (JSON.parse(readFileSync(manifest, "utf8")) as { exports?: Record<string, { import?: string | { default?: string } }> }).exports?.["./esm/api"]?.import;
    const entry = typeof spec === "string" ? spec : spec?.default;
    if (!entry) continue;
    const tsx = (await import(pathToFileURL(resolve(dirname(manifest), entry)).href)) as { tsImport?: TsImport };
    if (tsx.tsImport) return tsx.tsImport(url, import.meta.url);
  }
  throw new Error(
    `Node.js ${process.version} cannot load TypeScript by itself: install tsx in your project (npm install -D tsx) and run this again, or pass the compiled .js module`,
  );
}

type TsImport = (specifier: string, parent: string) => Promise<unknown>;
