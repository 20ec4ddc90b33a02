/**
 * `npm run embedded:snapshot`: rebuilds embedded/initdb.tar.br, the data
 * folder PGlite's initdb makes (nothing else: no migration), brotli-compressed,
 * and embedded/initdb.json, which names the PGlite version it belongs to. A new
 * embedded folder starts from it instead of running initdb (see
 * src/db/snapshot.ts). Rerun it after upgrading PGlite: with any other version
 * the snapshot is not used (initdb runs), and test/db/pglite.test.ts fails
 * until it is rebuilt.
 */
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants } from "node:zlib";
import { PGlite } from "@electric-sql/pglite";
import { SNAPSHOT_FILE, SNAPSHOT_INFO, installedPGlite, type SnapshotInfo } from "../src/db/snapshot.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const db = new PGlite();
const { rows } = await db.query<{ v: string; id: string }>("SELECT current_setting('server_version') AS v, system_identifier::text AS id FROM pg_control_system()");
const tar = Buffer.from(await (await db.dumpDataDir("none")).arrayBuffer());
await db.close();
// A 16 MiB window spans the three near-identical databases initdb makes: 39 MB become about 1.3 MB.
const packed = brotliCompressSync(tar, {
  params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_LGWIN]: 24, [constants.BROTLI_PARAM_SIZE_HINT]: tar.length },
});
const info: SnapshotInfo = { pglite: installedPGlite()!, postgres: rows[0]!.v, systemIdentifier: rows[0]!.id };
writeFileSync(join(root, SNAPSHOT_FILE), packed);
writeFileSync(join(root, SNAPSHOT_INFO), `${JSON.stringify(info, null, 2)}\n`);
console.log(`${SNAPSHOT_FILE}: PGlite ${info.pglite} (Postgres ${info.postgres}), ${tar.length} bytes as ${packed.length}`);
