/**
 * The package as it is published, for test/tarball.long.test.ts: its manifest and
 * what it declares, the packages a built file imports, a project that
 * installs the packed tarball offline (its lock file made from the
 * repository's), and where psql is.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./cli.js";

export const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  name: string;
  version: string;
  license: string;
  dependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  bin: Record<string, string>;
  engines: Record<string, string>;
};

/**
 * An empty project that depends on the tarball and `direct` (the packages the
 * README has users install, and tools), with a lock
 * file holding exactly what the repository's package-lock.json resolved them
 * to: `npm ci --offline` then needs no registry (npm install would fetch
 * package metadata to resolve them).
 */
export function writeProject(dir: string, tgz: string, direct: readonly string[]): void {
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };
  const ours: LockEntry = {
    version: pkg.version,
    resolved: `file:${tgz}`,
    integrity: `sha512-${createHash("sha512").update(readFileSync(tgz)).digest("base64")}`,
    license: pkg.license,
    dependencies: pkg.dependencies,
    optionalDependencies: pkg.optionalDependencies,
    peerDependencies: pkg.peerDependencies,
    peerDependenciesMeta: pkg.peerDependenciesMeta,
    bin: pkg.bin,
    engines: pkg.engines,
  };
  const packages: Record<string, LockEntry> = { ...lock.packages, [`node_modules/${pkg.name}`]: ours };
  const picked: Record<string, LockEntry> = {};
  // Node's lookup over the lock's paths: nested node_modules first, then upwards.
  const find = (from: string, name: string): string | undefined => {
    for (let at = from; ; at = at.includes("/node_modules/") ? at.slice(0, at.lastIndexOf("/node_modules/")) : "") {
      const key = `${at ? `${at}/` : ""}node_modules/${name}`;
      if (packages[key]) return key;
      if (!at) return undefined;
    }
  };
  const visit = (key: string) => {
    if (picked[key]) return;
    const { dev, devOptional, peer, ...entry } = packages[key]!;
    picked[key] = entry;
    // Optional peers (drizzle, pgvector for PGlite) are the user's choice: not installed. Optional dependencies are (PGlite).
    const peers = Object.keys(entry.peerDependencies ?? {}).filter((n) => !entry.peerDependenciesMeta?.[n]?.optional);
    for (const name of [...Object.keys({ ...entry.dependencies, ...entry.optionalDependencies }), ...peers]) {
      const found = find(key, name);
      if (found) visit(found);
      else if (!(name in (entry.optionalDependencies ?? {}))) throw new Error(`package-lock.json has no ${name} for ${key}`);
    }
  };
  for (const name of [pkg.name, ...direct]) visit(`node_modules/${name}`);
  const dependencies = { [pkg.name]: `file:${tgz}`, ...Object.fromEntries(direct.map((n) => [n, picked[`node_modules/${n}`]!.version!])) };
  const root = { name: "app", version: "1.0.0", private: true, dependencies };
  writeFileSync(join(dir, "package.json"), JSON.stringify(root, null, 2));
  writeFileSync(join(dir, "package-lock.json"), JSON.stringify({ ...root, lockfileVersion: 3, requires: true, packages: { "": root, ...picked } }, null, 2));
}

export interface LockEntry {
  version?: string;
  resolved?: string;
  integrity?: string;
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  license?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  bin?: Record<string, string>;
  engines?: Record<string, string>;
}

/**
 * The packages a built file imports by name (`from "x"`, `import("x")`, `import "x"`, `require("x")`):
 * each package name once, without node: builtins or the package itself; comments (its examples) aside.
 */
export function bareImports(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  // A package name right after the keyword: not a word that merely ends in "from" or a string reading "from".
  const names = [...code.matchAll(/(?:(?<![\w.$"'`])from\s*|(?<![\w.$])import\s*\(\s*|(?<![\w.$])import\s+|(?<![\w.$])require\s*\(\s*)["']([@a-z0-9][\w./@-]*)["']/g)].map(([, spec]) =>
    spec!.startsWith("@") ? spec!.split("/").slice(0, 2).join("/") : spec!.split("/")[0]!,
  );
  return [...new Set(names)].filter((n) => !n.startsWith("node:") && n !== pkg.name);
}

/** Declared as a dependency, an optional dependency or a peer: what an installer lets the package import. */
export function isDeclared(name: string): boolean {
  return name in pkg.dependencies || name in (pkg.optionalDependencies ?? {}) || name in pkg.peerDependencies;
}

/** Where psql may be (Debian's server packages; .ci/run installs postgresql-15). */
export function psqlDirs(): string[] {
  const base = "/usr/lib/postgresql";
  return existsSync(base) ? readdirSync(base).map((v) => join(base, v, "bin")) : [];
}
