/**
 * A deterministic fake embedder for the store's vector tests: each word of a
 * text (lower-cased, letters and digits) adds 1 to a dimension picked by a
 * hash of the word, and the vector is normalized. Texts that share words are
 * close (cosine), texts without a shared word are orthogonal; the same text
 * always gives the same vector. It records every call, as the official
 * store's tests check which texts were embedded.
 *
 * @example
 * ```ts
 * const embed = fakeEmbeddings(64);
 * const store = new PostgresStore(db, { index: { dims: 64, embed } });
 * expect(embed.calls.at(-1)).toContain("a query");
 * ```
 */
import { createHash } from "node:crypto";

export type FakeEmbed = ((texts: string[]) => Promise<number[][]>) & { calls: string[][] };

export function embedText(text: string, dims: number): number[] {
  const v = new Array<number>(dims).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    v[createHash("sha256").update(word).digest().readUInt32BE(0) % dims]! += 1;
  }
  const norm = Math.hypot(...v);
  // A text without words still needs a direction: cosine distance of a zero vector is undefined.
  return norm === 0 ? v.map((_, i) => (i === 0 ? 1 : 0)) : v.map((x) => x / norm);
}

export function fakeEmbeddings(dims: number): FakeEmbed {
  const embed = (async (texts: string[]) => {
    embed.calls.push(texts);
    return texts.map((t) => embedText(t, dims));
  }) as FakeEmbed;
  embed.calls = [];
  return embed;
}
