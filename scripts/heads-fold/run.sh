#!/usr/bin/env bash
# Micro-benchmark: moving a lineage's head in checkpoint_heads (today) against a fold into
# checkpoints (an is_head flag with a partial unique index, as before migration 0005).
# SQL only, no saver: the put's blobs, identical in both designs, are left out.
#   DATABASE_URL=postgres://... scripts/heads-fold/run.sh   [CLIENTS=8 DURATION=30 THREADS=1000 HISTORY=20 ROUNDS=2]
# Creates and drops the schemas fold_heads and fold_flag and the sequence public.fold_ids.
set -euo pipefail
: "${DATABASE_URL:?set DATABASE_URL}"
CLIENTS=${CLIENTS:-8} DURATION=${DURATION:-30} THREADS=${THREADS:-1000} HISTORY=${HISTORY:-20} ROUNDS=${ROUNDS:-2}
here=$(dirname "$0")
q() { psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -At "$@"; }
echo "fsync=$(q -c 'SHOW fsync') clients=$CLIENTS duration=${DURATION}s threads=$THREADS history=$HISTORY rounds=$ROUNDS"
printf '%-6s %8s %9s %9s %9s %10s %11s %11s %10s %8s\n' design tps updates hot_upd dead_tup heap_MB indexes_MB wal_per_put B_per_row forks
for round in $(seq "$ROUNDS"); do
  for design in heads flag; do
    q -c 'SET client_min_messages = warning' -c 'DROP SEQUENCE IF EXISTS public.fold_ids' \
      -v threads="$THREADS" -v history="$HISTORY" -f "$here/schema.sql"
    rel="fold_$design.checkpoints"; heads="fold_$design.checkpoint_heads"
    [ "$design" = flag ] && heads="fold_flag.checkpoints"
    before=$(q -c 'SELECT pg_current_wal_lsn()')
    tps=$(pgbench "$DATABASE_URL" -n -c "$CLIENTS" -j 2 -T "$DURATION" -D threads="$THREADS" -f "$here/$design.sql" 2>/dev/null |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    sleep 1 # the benchmark's backends report their statistics as they exit
    q -v rel="$rel" -v heads="$heads" -v before="$before" -v design="$design" -v tps="$tps" -v history="$HISTORY" -v threads="$THREADS" <<'SQL'
WITH s AS (SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables WHERE relid = :'heads'::regclass),
     n AS (SELECT count(*) - :history * :threads AS puts, count(*) AS rows FROM :rel),
     forks AS (SELECT count(*) AS n FROM (SELECT 1 FROM :rel GROUP BY thread_id, parent_checkpoint_id HAVING count(*) > 1) f)
SELECT format('%-6s %8s %9s %9s %9s %10s %11s %11s %10s %8s', :'design', round(:'tps'::numeric), s.n_tup_upd, s.n_tup_hot_upd, s.n_dead_tup,
              round((pg_relation_size(:'rel') + CASE WHEN :'heads' <> :'rel' THEN pg_relation_size(:'heads') ELSE 0 END) / 1048576.0, 1),
              round((pg_indexes_size(:'rel') + CASE WHEN :'heads' <> :'rel' THEN pg_indexes_size(:'heads') ELSE 0 END) / 1048576.0, 1),
              pg_size_pretty(round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'before') / greatest(n.puts, 1))),
              round(pg_total_relation_size(:'rel') / n.rows::numeric), forks.n)
  FROM s, n, forks;
SQL
  done
done
q -c 'DROP SCHEMA fold_heads CASCADE' -c 'DROP SCHEMA fold_flag CASCADE' -c 'DROP SEQUENCE public.fold_ids' 2>/dev/null
