-- Hand-written: the tombstone check of a put (src/saver/tombstones.ts has the rule and why), apart from the
-- writes' (checkpointer_thread_gate of 0007, which stays theirs, and older code's). Issue 37: with "exit"
-- durability LangGraph puts a subgraph's checkpoint before the root checkpoint it names in metadata.parents, so a
-- new conversation on a deleted thread id had its subgraph checkpoint refused ('thread': nothing had started the
-- thread yet), silently. The put's caller now says whether it starts a lineage; the checkpoints of enclosing
-- graphs it names are checked against the deleted history; and a refused put takes along what was stored under
-- it while it was on its way.
CREATE FUNCTION "checkpointer_put_gate"(lock_name text, p_thread text, p_ns text, p_id text, p_parent text, p_ancestors jsonb, p_starts boolean)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $gate$
DECLARE
  last_id text;
  refused text;
  named text[];
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtext(lock_name), pg_catalog.hashtext(p_thread));
  SELECT t.last_checkpoint_id INTO last_id FROM checkpoint_tombstones t WHERE t.thread_id = p_thread;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- 'history': the checkpoint, its parent or a checkpoint of an enclosing graph it names (metadata.parents, by
  -- namespace) is of the deleted history (<= last_id) and not stored now.
  IF EXISTS (SELECT 1 FROM (SELECT p_ns, p_id
                            UNION ALL SELECT p_ns, p_parent
                            UNION ALL SELECT a.key, a.value
                                        FROM pg_catalog.jsonb_each_text(CASE WHEN pg_catalog.jsonb_typeof(p_ancestors) = 'object'
                                                                             THEN p_ancestors ELSE '{}'::jsonb END) AS a) AS n(ns, id)
              WHERE n.id COLLATE "C" <= last_id
                AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = p_thread AND c.checkpoint_ns = n.ns AND c.checkpoint_id = n.id)) THEN
    refused := 'history';
  -- 'thread': no lineage of the thread has a head (nothing started it again) and the put does not start one.
  ELSIF NOT p_starts AND NOT EXISTS (SELECT 1 FROM checkpoint_heads h WHERE h.thread_id = p_thread) THEN
    refused := 'thread';
  ELSE
    RETURN NULL;
  END IF;
  -- The refused checkpoint is never stored: what was stored under it while its put was on its way goes too (the
  -- namespaces of checkpoints naming it, which only its tasks use, and pending writes keyed to it).
  PERFORM pg_catalog.set_config('langgraph_checkpoint_pg.elements', 'known', true);
  SELECT pg_catalog.array_agg(DISTINCT c.checkpoint_ns) INTO named
    FROM checkpoints c WHERE c.thread_id = p_thread AND c.metadata -> 'parents' ->> p_ns = p_id;
  DELETE FROM checkpoint_writes w
   WHERE w.thread_id = p_thread AND ((w.checkpoint_ns = p_ns AND w.checkpoint_id = p_id) OR w.checkpoint_ns = ANY (named));
  IF named IS NOT NULL THEN
    DELETE FROM checkpoint_heads h WHERE h.thread_id = p_thread AND h.checkpoint_ns = ANY (named);
    DELETE FROM checkpoint_blobs b WHERE b.thread_id = p_thread AND b.checkpoint_ns = ANY (named);
    DELETE FROM checkpoints c WHERE c.thread_id = p_thread AND c.checkpoint_ns = ANY (named);
  END IF;
  RETURN refused;
END
$gate$;--> statement-breakpoint
-- Hand-written: roles granted the writes' gate (0007, or grants) get this one too.
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee
             FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) AS a
            WHERE p.oid = 'checkpointer_thread_gate(text, text, text, text[], boolean)'::regprocedure
              AND a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE'
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION checkpointer_put_gate(text, text, text, text, text, jsonb, boolean) TO %s', g.grantee);
  END LOOP;
END $$;
