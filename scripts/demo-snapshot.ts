/**
 * `npm run demo:snapshot`: rebuilds scripts/demo-pgdata.tar.br, the data folder
 * of a new PGlite database with this package's migrations applied to schema
 * "public", brotli-compressed. `npm run demo` starts a new embedded folder from
 * it instead of running initdb and the migrations, which took most of a first
 * run. It belongs to one PGlite version and one set of migrations
 * (scripts/demo-pgdata.json): with any other the demo does without it, and
 * test/cli/demo.test.ts fails until this is rerun.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants } from "node:zlib";
import { PGlite } from "@electric-sql/pglite";
import { loadMigrations, migrate } from "../src/db/migrate.js";

const here = dirname(fileURLToPath(import.meta.url));
// Its package.json is not exported: read it next to the resolved entry point.
let dir = dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
while (!existsSync(join(dir, "package.json"))) dir = dirname(dir);
const version = (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string }).version;

const db = new PGlite();
await migrate({ pool: db });
const postgres = (await db.query<{ server_version: string }>("SHOW server_version")).rows[0]!.server_version;
const tar = Buffer.from(await (await db.dumpDataDir("none")).arrayBuffer());
await db.close();
// A 16 MiB window spans the three near-identical databases initdb makes: 39 MB become about 1.4 MB.
const packed = brotliCompressSync(tar, {
  params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_LGWIN]: 24, [constants.BROTLI_PARAM_SIZE_HINT]: tar.length },
});
writeFileSync(join(here, "demo-pgdata.tar.br"), packed);
const migrations = loadMigrations().map((m) => ({ name: m.name, sha256: m.sha256 }));
writeFileSync(join(here, "demo-pgdata.json"), `${JSON.stringify({ pglite: version, postgres, migrations }, null, 2)}\n`);
console.log(`scripts/demo-pgdata.tar.br: PGlite ${version} (Postgres ${postgres}), ${tar.length} bytes as ${packed.length}`);
