import { entrypoint, task } from "@langchain/langgraph";
import { PostgresSaver as Official } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { PostgresSaver } from "../src/index.ts";

const url = "postgres://postgres@127.0.0.1:55432/postgres";
const admin = new pg.Client({ connectionString: url }); await admin.connect();
for (const d of ["cancel_ours", "cancel_off"]) { await admin.query(`DROP DATABASE IF EXISTS ${d}`); await admin.query(`CREATE DATABASE ${d}`); }
const ours = PostgresSaver.fromConnString(url.replace(/postgres$/, "cancel_ours")); await ours.setup();
const off = Official.fromConnString(url.replace(/postgres$/, "cancel_off")); await off.setup();
async function trial(checkpointer: any, tid: string) {
  let first = 0; let t0 = 0;
  const mapper = task("mapper", async (x: number | string) => { if (!first) first = performance.now(); await new Promise((r) => setTimeout(r, 100)); return `${x}${x}`; });
  const graph = entrypoint({ checkpointer, name: "g" }, async (inputs: number[]) => Promise.all((await Promise.all(inputs.map(mapper))).map(mapper)));
  await graph.invoke([1, 2, 3], { configurable: { thread_id: tid } });
  const g0 = performance.now(); await checkpointer.getTuple({ configurable: { thread_id: tid } }); gt[checkpointer === ours ? "ours" : "off"].push(performance.now() - g0);
  first = 0; t0 = performance.now();
  await graph.invoke([1, 2, 3], { configurable: { thread_id: tid } });
  return first - t0;
}
const res: Record<string, number[]> = { ours: [], off: [] };
const gt: Record<string, number[]> = { ours: [], off: [] };
for (let i = 0; i < 15; i++) { res.ours.push(await trial(ours, `t${i}`)); res.off.push(await trial(off, `t${i}`)); }
for (const [k, v] of [...Object.entries(res), ...Object.entries(gt)]) { v.sort((a, b) => a - b); console.log(k, v.map((x) => x.toFixed(1)).join(" ")); }
await ours.end(); await off.end(); await admin.end();
