/**
 * One thread's root-namespace history, checked in SQL: one head (a
 * `checkpoint_heads` row naming an existing checkpoint), one chain
 * from it to a root holding every row (no orphan, no branch), steps
 * contiguous, and every version a checkpoint names of a state channel present
 * in the blobs (a trigger LangGraph consumes, `__start__` or `branch:to:*`,
 * has no row at a version where it holds no value). Used by the fault tests
 * and by the soak run (no vitest import).
 */
import type pg from "pg";

export interface ChainAudit {
  heads: number;
  rows: number;
  chain: number;
  roots: number;
  gaps: number;
  missing_blobs: number;
  min_step: number;
  last_step: number;
}

export async function chainAudit(db: Pick<pg.Pool, "query">, threadId: string): Promise<ChainAudit> {
  const { rows } = await db.query(
    `WITH RECURSIVE chain AS (
       SELECT c.checkpoint_id, c.parent_checkpoint_id, (c.metadata->>'step')::int AS step, c.checkpoint
         FROM checkpoint_heads h JOIN checkpoints c USING (thread_id, checkpoint_ns, checkpoint_id)
        WHERE h.thread_id = $1 AND h.checkpoint_ns = ''
       UNION ALL
       SELECT c.checkpoint_id, c.parent_checkpoint_id, (c.metadata->>'step')::int, c.checkpoint
         FROM chain JOIN checkpoints c ON c.thread_id = $1 AND c.checkpoint_ns = '' AND c.checkpoint_id = chain.parent_checkpoint_id
     )
     SELECT (SELECT count(*) FROM checkpoint_heads h JOIN checkpoints c USING (thread_id, checkpoint_ns, checkpoint_id)
              WHERE h.thread_id = $1 AND h.checkpoint_ns = '')::int AS heads,
            (SELECT count(*) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '')::int AS rows,
            (SELECT count(*) FROM chain)::int AS chain,
            (SELECT count(*) FROM chain WHERE parent_checkpoint_id IS NULL)::int AS roots,
            (SELECT count(*) FROM chain a JOIN chain b ON b.checkpoint_id = a.parent_checkpoint_id WHERE a.step <> b.step + 1)::int AS gaps,
            (SELECT count(*) FROM chain CROSS JOIN LATERAL jsonb_each_text(chain.checkpoint -> 'channel_versions') cv(channel, version)
              WHERE cv.channel <> '__start__' AND cv.channel NOT LIKE 'branch:to:%'
                AND NOT EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = $1 AND b.checkpoint_ns = ''
                                 AND b.channel = cv.channel AND b.version = cv.version))::int AS missing_blobs,
            (SELECT min(step) FROM chain)::int AS min_step,
            (SELECT max(step) FROM chain)::int AS last_step`,
    [threadId],
  );
  return rows[0] as ChainAudit;
}
