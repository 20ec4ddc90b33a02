/**
 * The commands that rewrite stored values with the application's code:
 * upgrade-state (its upcasters) and reencrypt (its EncryptedSerializer). They
 * decode values, so this module loads the serializer and @langchain/*; the
 * schema commands (commands-migrate.ts) do without.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { isEncryptedSerializer, reencrypt, type ReencryptResult } from "../ops/reencrypt.js";
import { PostgresSaver } from "../ops/postgres-saver.js";
import type { Upcaster } from "../saver/upcast.js";
import { EXIT, NotFoundError } from "./exit.js";
import { progress } from "./format.js";
import { json, withConnection, type Common, type Io } from "./context.js";
import { loadModule } from "./module.js";

/**
 * Rewrite checkpoints older than the state version into the current shape.
 * The upcasters are code: they come from a module the user names, which
 * exports `stateVersion` and `upcasters` (the same values the app's saver
 * uses), and `serde` when the saver has its own serializer.
 */
export async function upgradeStateCommand(c: Common & { module: string; batchSize: number }, io: Io): Promise<number> {
  const spec = await loadModule(c.module, "upcasters", "stateVersion");
  return withConnection(c, false, async (conn) => {
    const saver = new PostgresSaver(conn.pool, {
      schema: c.schema,
      stateVersion: spec.stateVersion as number,
      upcasters: spec.upcasters as Record<number, Upcaster>,
      ...(spec.serde === undefined ? {} : { serde: spec.serde as SerializerProtocol }),
    });
    const bar = progress();
    let result: { rewritten: number };
    try {
      result = await saver.upgradeState({ batchSize: c.batchSize, onProgress: (p) => bar.update(`upgrade-state: ${p.rewritten} checkpoints rewritten`) });
    } finally {
      bar.done();
    }
    if (c.json) io.out(json({ database: conn.label, schema: c.schema, stateVersion: spec.stateVersion, ...result }));
    else io.out(`Rewrote ${result.rewritten} checkpoint(s) to state version ${String(spec.stateVersion)} in schema ${JSON.stringify(c.schema)} of ${conn.label}.`);
    return EXIT.OK;
  });
}

/** Rewrite encrypted values into the serializer's current form (see src/ops/reencrypt.ts); the serializer comes from a module. */
export async function reencryptCommand(c: Common & { module: string; batchSize: number; dryRun: boolean }, io: Io): Promise<number> {
  const spec = await loadModule(c.module, "serializer", "serde");
  if (!isEncryptedSerializer(spec.serde)) throw new NotFoundError(`the module ${JSON.stringify(c.module)} does not export serde, an EncryptedSerializer`);
  const serde = spec.serde;
  return withConnection(c, false, async (conn) => {
    const bar = progress();
    let result: ReencryptResult;
    try {
      result = await reencrypt({
        pool: conn.pool,
        schema: c.schema,
        serde,
        batchSize: c.batchSize,
        dryRun: c.dryRun,
        onProgress: (p) => bar.update(`reencrypt: ${p.byContent} values by content, ${p.blobs} blobs, ${p.writes} writes, ${p.checkpoints} checkpoints`),
      });
    } finally {
      bar.done();
    }
    if (c.json) io.out(json({ database: conn.label, schema: c.schema, ...result }));
    else {
      const rekey = result.byContent > 0 ? `re-key ${result.byContent} value(s) stored by content (lists by their elements, large values, objects holding lists) and ` : "";
      const counts = `${result.blobs} blob(s), ${result.writes} write(s) and the values of ${result.checkpoints} checkpoint(s)`;
      const where = `in schema ${JSON.stringify(c.schema)} of ${conn.label}`;
      io.out(c.dryRun ? `Would ${rekey}rewrite ${counts} ${where}.` : `${rekey ? `Re-keyed ${result.byContent} value(s) stored by content and rewrote` : "Rewrote"} ${counts} ${where}.`);
    }
    return EXIT.OK;
  });
}
