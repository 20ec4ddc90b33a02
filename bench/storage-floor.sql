-- The storage floor of issue 27's workload (README "Performance", "Not reached: the 3x"): the leanest
-- rows this data model could have for a 200-turn chat with LangGraph's default durability, with the
-- content cut to what it must carry. Run in an empty scratch database:
--   psql "$DATABASE_URL" -f bench/storage-floor.sql
-- 600 checkpoint rows (ids, a small channel_versions JSONB, 70 bytes of the rest, metadata),
-- 400 element rows with each message compressed to 330 bytes, 400 list versions as 32-byte deltas,
-- 200 inputs of 40 bytes, 600 pending writes of 16 bytes; primary keys only; against 190,313 bytes of text.
DROP TABLE IF EXISTS floor_checkpoints, floor_blobs, floor_writes;
CREATE TABLE floor_checkpoints (thread_id text COLLATE "C" NOT NULL, checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  checkpoint_id text COLLATE "C" NOT NULL, parent_checkpoint_id text COLLATE "C", cv jsonb NOT NULL, rest bytea,
  metadata jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
INSERT INTO floor_checkpoints SELECT 'chat', '', gen_random_uuid()::text, gen_random_uuid()::text,
  '{"messages": "-bgo.3ovl6w1a", "__start__": "-bgn.2tscew1f", "branch:to:agent": "-bgo.3ovl6w1a"}'::jsonb,
  decode(repeat('ab', 70), 'hex'), '{"step": 598, "source": "loop", "parents": {}}'::jsonb FROM generate_series(1, 600) ORDER BY 3;
CREATE TABLE floor_blobs (thread_id text COLLATE "C" NOT NULL, checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '', channel text COLLATE "C" NOT NULL,
  version text COLLATE "C" NOT NULL, type text NOT NULL, value bytea, PRIMARY KEY (thread_id, checkpoint_ns, channel, version));
INSERT INTO floor_blobs SELECT 'chat', '', '__elements__', md5(i::text), 'msgpack', decode(repeat('ab', 330), 'hex') FROM generate_series(1, 400) i;
INSERT INTO floor_blobs SELECT 'chat', '', 'messages', '-bgo.' || substr(md5(i::text), 1, 8), 'pg:refs', decode(repeat('ab', 32), 'hex') FROM generate_series(1, 400) i;
INSERT INTO floor_blobs SELECT 'chat', '', '__start__', '-bgo.' || substr(md5(i::text), 1, 8), 'pg:obj', decode(repeat('ab', 40), 'hex') FROM generate_series(1, 200) i;
CREATE TABLE floor_writes (thread_id text COLLATE "C" NOT NULL, checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '', checkpoint_id text COLLATE "C" NOT NULL,
  task_id text COLLATE "C" NOT NULL, idx int NOT NULL, channel text COLLATE "C" NOT NULL, type text NOT NULL, value bytea,
  task_path text COLLATE "C" NOT NULL DEFAULT '', PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));
INSERT INTO floor_writes SELECT 'chat', '', gen_random_uuid()::text, gen_random_uuid()::text, 0, 'messages', 'pg:refs', decode(repeat('ab', 16), 'hex'), '~__pregel_pull, agent'
  FROM generate_series(1, 600);
SELECT t AS "table", pg_total_relation_size(t) AS bytes FROM unnest(ARRAY['floor_checkpoints', 'floor_blobs', 'floor_writes']) AS t
UNION ALL
SELECT 'all, against the raw text', round((pg_total_relation_size('floor_checkpoints') + pg_total_relation_size('floor_blobs') + pg_total_relation_size('floor_writes')) / 190313.0, 2);
