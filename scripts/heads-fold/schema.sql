-- Two designs side by side, in their own schemas. Columns, keys and indexes as in
-- src/db/schema.ts (the fold: as migrations/0000_init.sql had it, before 0005_heads_table).
DROP SCHEMA IF EXISTS fold_heads CASCADE;
DROP SCHEMA IF EXISTS fold_flag CASCADE;
CREATE SCHEMA fold_heads;
CREATE SCHEMA fold_flag;
CREATE SEQUENCE public.fold_ids START 1000000000; -- above any history id

-- Today: checkpoints insert-only; the head is a small row of its own, moved in place.
CREATE TABLE fold_heads.checkpoints (
  thread_id text COLLATE "C" NOT NULL, checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  checkpoint_id text COLLATE "C" NOT NULL, parent_checkpoint_id text COLLATE "C",
  checkpoint jsonb NOT NULL, metadata jsonb NOT NULL DEFAULT '{}', metadata_raw bytea,
  row_version bigint NOT NULL DEFAULT 1, created_at timestamptz NOT NULL DEFAULT now(),
  ttl_seconds integer, state_version integer, has_pending_tasks boolean NOT NULL DEFAULT false,
  unversioned_type text, unversioned_values bytea,
  CONSTRAINT checkpoints_pkey PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
CREATE INDEX checkpoints_lineage_created_at ON fold_heads.checkpoints (thread_id, checkpoint_ns, created_at);
CREATE TABLE fold_heads.checkpoint_heads (
  thread_id text COLLATE "C" NOT NULL, checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  checkpoint_id text COLLATE "C" NOT NULL, row_version bigint NOT NULL DEFAULT 1,
  moved_at timestamptz NOT NULL DEFAULT now(), has_pending_tasks boolean NOT NULL DEFAULT false,
  CONSTRAINT checkpoint_heads_pkey PRIMARY KEY (thread_id, checkpoint_ns)) WITH (fillfactor = 70);

-- The fold: the head is a flag on its checkpoint row, one head per lineage by a partial unique index.
CREATE TABLE fold_flag.checkpoints (LIKE fold_heads.checkpoints INCLUDING ALL);
ALTER TABLE fold_flag.checkpoints ADD COLUMN is_head boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX checkpoints_one_head_per_lineage ON fold_flag.checkpoints (thread_id, checkpoint_ns) WHERE is_head;

-- History to write next to: :threads lineages of :history checkpoints each, the last one the head.
INSERT INTO fold_heads.checkpoints (thread_id, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT 't' || t, lpad(i::text, 20, '0'), CASE WHEN i > 1 THEN lpad((i - 1)::text, 20, '0') END,
       (SELECT jsonb_object_agg('channel_' || c, repeat('x', 60)) FROM generate_series(1, 12) c),
       jsonb_build_object('source', 'loop', 'step', i, 'parents', '{}'::jsonb)
  FROM generate_series(1, :threads) t, generate_series(1, :history) i;
INSERT INTO fold_heads.checkpoint_heads (thread_id, checkpoint_id)
SELECT 't' || t, lpad(:history::text, 20, '0') FROM generate_series(1, :threads) t;
INSERT INTO fold_flag.checkpoints SELECT c.*, c.checkpoint_id = lpad(:history::text, 20, '0') FROM fold_heads.checkpoints c;
VACUUM ANALYZE fold_heads.checkpoints, fold_heads.checkpoint_heads, fold_flag.checkpoints;
