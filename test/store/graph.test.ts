/**
 * The store under a real LangGraph graph: `compile({ checkpointer, store })`,
 * nodes reading and writing memories through `config.store` (LangGraph wraps
 * it in its batching store, which calls `batch`), across threads.
 */
import { Annotation, END, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PostgresSaver, PostgresStore } from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("store-graph");
let store: PostgresStore;
let checkpointer: PostgresSaver;
beforeAll(async () => {
  checkpointer = new PostgresSaver(db.pool);
  await checkpointer.setup({ adopt: false });
  store = new PostgresStore(db.pool);
  await store.setup({ adopt: false });
});
afterAll(() => store.stop());

it("a memory written on one thread is read on another, through config.store", async () => {
  const State = Annotation.Root({ user: Annotation<string>, fact: Annotation<string | undefined>, recalled: Annotation<string[]> });
  const graph = new StateGraph(State)
    .addNode("remember", async (s, config: LangGraphRunnableConfig) => {
      if (s.fact) await config.store!.put(["users", s.user, "memories"], `m${s.fact.length}`, { text: s.fact });
      return {};
    })
    .addNode("recall", async (s, config: LangGraphRunnableConfig) => {
      const items = await config.store!.search(["users", s.user]);
      return { recalled: items.map((i) => i.value.text as string).sort() };
    })
    .addEdge(START, "remember")
    .addEdge("remember", "recall")
    .addEdge("recall", END)
    .compile({ checkpointer, store });
  await graph.invoke({ user: "u1", fact: "likes tea" }, { configurable: { thread_id: "a" } });
  await graph.invoke({ user: "u1", fact: "lives in Oslo" }, { configurable: { thread_id: "b" } });
  const out = await graph.invoke({ user: "u1", fact: undefined }, { configurable: { thread_id: "c" } });
  expect(out.recalled).toEqual(["likes tea", "lives in Oslo"]);
  const other = await graph.invoke({ user: "u2", fact: undefined }, { configurable: { thread_id: "d" } });
  expect(other.recalled).toEqual([]);
});
