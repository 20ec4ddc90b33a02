-- One put, folded: lock the head checkpoint row (found through the partial unique index), clear its
-- flag with a compare-and-set on its row_version, insert the new head (one statement, as heads.sql).
\set t random(1, :threads)
WITH h AS (SELECT checkpoint_id, row_version FROM fold_flag.checkpoints
            WHERE thread_id = 't' || :t AND checkpoint_ns = '' AND is_head FOR UPDATE),
     id AS (SELECT lpad(nextval('public.fold_ids')::text, 20, '0') AS id),
     moved AS (UPDATE fold_flag.checkpoints AS x SET is_head = false, row_version = x.row_version + 1
                 FROM h, id
                WHERE x.thread_id = 't' || :t AND x.checkpoint_ns = '' AND x.checkpoint_id = h.checkpoint_id
                  AND x.row_version = h.row_version
               RETURNING h.checkpoint_id AS parent, id.id)
INSERT INTO fold_flag.checkpoints (thread_id, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, is_head)
SELECT 't' || :t, moved.id, moved.parent,
       (SELECT jsonb_object_agg('channel_' || c, repeat('x', 60)) FROM generate_series(1, 12) c),
       jsonb_build_object('source', 'loop', 'step', 1, 'parents', '{}'::jsonb), true
  FROM moved;
