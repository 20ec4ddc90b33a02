CREATE TABLE "checkpoint_tombstones" (
	"thread_id" text COLLATE "C" NOT NULL,
	"deleted_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_checkpoint_id" text COLLATE "C",
	CONSTRAINT "checkpoint_tombstones_pkey" PRIMARY KEY("thread_id")
);
--> statement-breakpoint
CREATE TABLE "checkpointer_retention" (
	"job" text NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"runs" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "checkpointer_retention_pkey" PRIMARY KEY("job")
);
--> statement-breakpoint
-- Hand-written: the check every put and putWrites makes first (src/saver/tombstones.ts has the rule and why).
-- It waits for a deletion of the thread in progress (a shared lock; deletions take it exclusively), then, with a
-- snapshot newer than its caller's, answers NULL (write) or why not: 'history' (an id of the deleted history that
-- is not stored now) or 'thread' (the thread was deleted and no new conversation has started on it).
CREATE FUNCTION "checkpointer_thread_gate"(lock_name text, p_thread text, p_ns text, p_ids text[], p_starts boolean)
RETURNS text LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $gate$
DECLARE
  last_id text;
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock_shared(pg_catalog.hashtext(lock_name), pg_catalog.hashtext(p_thread));
  SELECT t.last_checkpoint_id INTO last_id FROM checkpoint_tombstones t WHERE t.thread_id = p_thread;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_catalog.unnest(p_ids) AS i(id)
              WHERE i.id COLLATE "C" <= last_id
                AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = i.id)) THEN
    RETURN 'history';
  END IF;
  IF NOT p_starts AND NOT EXISTS (SELECT 1 FROM checkpoint_heads h WHERE h.thread_id = p_thread) THEN
    RETURN 'thread';
  END IF;
  RETURN NULL;
END
$gate$;--> statement-breakpoint
-- Hand-written: roles granted rows of checkpoints (see grantStatements) get what the saver needs of the new
-- tables and the gate, so an application running as a least-privilege role keeps working after this migration.
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee, a.privilege_type
             FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
            WHERE c.oid = 'checkpoints'::regclass AND a.grantee <> c.relowner
              AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
  LOOP
    EXECUTE format('GRANT %s ON TABLE checkpoint_tombstones, checkpointer_retention TO %s', g.privilege_type, g.grantee);
    IF g.privilege_type = 'INSERT' THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION checkpointer_thread_gate(text, text, text, text[], boolean) TO %s', g.grantee);
    END IF;
  END LOOP;
END $$;
