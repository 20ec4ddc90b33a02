-- One put, today: lock the head row, compare-and-set it, insert the checkpoint (one statement, like src/saver/sql/put.ts put).
\set t random(1, :threads)
WITH h AS (SELECT checkpoint_id, row_version FROM fold_heads.checkpoint_heads
            WHERE thread_id = 't' || :t AND checkpoint_ns = '' FOR UPDATE),
     id AS (SELECT lpad(nextval('public.fold_ids')::text, 20, '0') AS id),
     moved AS (UPDATE fold_heads.checkpoint_heads AS x
                  SET checkpoint_id = id.id, row_version = x.row_version + 1, moved_at = now(), has_pending_tasks = false
                 FROM h, id
                WHERE x.thread_id = 't' || :t AND x.checkpoint_ns = '' AND x.row_version = h.row_version
               RETURNING h.checkpoint_id AS parent, id.id)
INSERT INTO fold_heads.checkpoints (thread_id, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT 't' || :t, moved.id, moved.parent,
       (SELECT jsonb_object_agg('channel_' || c, repeat('x', 60)) FROM generate_series(1, 12) c),
       jsonb_build_object('source', 'loop', 'step', 1, 'parents', '{}'::jsonb)
  FROM moved;
