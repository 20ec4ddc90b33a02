import pg from "pg";
import { DelayProxy } from "../bench/netproxy.ts";
import { ChatThread } from "../bench/workload.ts";
import { PostgresSaver } from "../src/index.ts";
const url = "postgres://postgres@127.0.0.1:55433/postgres";
const admin = new pg.Client({ connectionString: url }); await admin.connect();
await admin.query("DROP DATABASE IF EXISTS rtt_probe"); await admin.query("CREATE DATABASE rtt_probe");
const db = url.replace(/postgres$/, "rtt_probe");
await (async () => { const s = PostgresSaver.fromConnString(db); await s.setup(); await s.end(); })();
for (const down of [0, 1]) {
  const net = await DelayProxy.start("127.0.0.1", 55433, { requestDelayMs: 1, responseDelayMs: down });
  const pool = new pg.Pool({ connectionString: net.url(db), max: 2 });
  const saver = new PostgresSaver(pool);
  const t = new ChatThread(saver, `t-${down}`);
  for (let i = 0; i < 5; i++) await t.put(i);
  await net.reset();
  const times: number[] = [];
  for (let i = 5; i < 45; i++) { const t0 = performance.now(); await t.put(i); times.push(performance.now() - t0); }
  const c = await net.snapshot();
  const w: number[] = [];
  for (let i = 5; i < 45; i++) { const t0 = performance.now(); await t.putWrites(i); w.push(performance.now() - t0); }
  const c2 = await net.snapshot();
  times.sort((a, b) => a - b); w.sort((a, b) => a - b);
  console.log(`down=${down} put p50 ${times[20]!.toFixed(2)} ms; per put: rt ${(c.roundTrips / 40).toFixed(2)} turns ${(c.turns / 40).toFixed(2)} up ${(c.bytesUp / 40).toFixed(0)} B down ${(c.bytesDown / 40).toFixed(0)} B | putWrites p50 ${w[20]!.toFixed(2)}; turns ${((c2.turns - c.turns) / 40).toFixed(2)}`);
  await pool.end(); await net.close();
}
await admin.end();
