/**
 * End-to-end graphs: a 10-node sequential StateGraph (each node appends to a list
 * channel) and a one-node chat graph for the storage measurement.
 */
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Annotation, END, MessagesAnnotation, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { text } from "./workload.js";

export const NODES = 10;
export const EXPECTED_ITEMS = Array.from({ length: NODES }, (_, i) => `n${i}`);

const ListState = Annotation.Root({
  items: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

export type Durability = "async" | "sync" | "exit";

export interface TenNodeGraph {
  invoke(threadId: string, durability: Durability): Promise<{ items: string[] }>;
}

/** The 10-node graph compiled with `checkpointer` (none when undefined). */
export function tenNodeGraph(checkpointer: BaseCheckpointSaver | undefined): TenNodeGraph {
  // Node names are built in a loop, which StateGraph's literal-typed builder cannot follow.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const builder: any = new StateGraph(ListState);
  for (let i = 0; i < NODES; i++) builder.addNode(`n${i}`, () => ({ items: [`n${i}`] }));
  builder.addEdge(START, "n0");
  for (let i = 1; i < NODES; i++) builder.addEdge(`n${i - 1}`, `n${i}`);
  builder.addEdge(`n${NODES - 1}`, END);
  const graph = builder.compile(checkpointer ? { checkpointer } : {});
  return {
    invoke: (threadId, durability) =>
      graph.invoke({ items: [] }, { configurable: { thread_id: threadId }, durability }) as Promise<{ items: string[] }>,
  };
}

/** A chat graph (one "agent" node answering each user message) for the growing-thread storage test. */
export function chatGraph(checkpointer: BaseCheckpointSaver) {
  const graph = new StateGraph(MessagesAnnotation)
    .addNode("agent", (state: typeof MessagesAnnotation.State) => {
      const n = state.messages.length;
      return {
        messages: [
          new AIMessage({
            id: `ai-${n}`,
            content: text(n, 150 + ((n * 53) % 300)),
            response_metadata: { model_name: "gpt-4o-mini-2024-07-18", finish_reason: "stop" },
            usage_metadata: { input_tokens: 40 + n * 12, output_tokens: 30 + (n % 40), total_tokens: 70 + n * 12 + (n % 40) },
          }),
        ],
      };
    })
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer });
  return {
    turn: (threadId: string, i: number) =>
      graph.invoke({ messages: [new HumanMessage({ id: `user-${i}`, content: text(i, 60 + ((i * 37) % 120)) })] }, { configurable: { thread_id: threadId } }),
  };
}
