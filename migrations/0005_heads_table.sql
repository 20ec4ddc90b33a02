CREATE TABLE "checkpoint_heads" (
	"thread_id" text COLLATE "C" NOT NULL,
	"checkpoint_ns" text COLLATE "C" DEFAULT '' NOT NULL,
	"checkpoint_id" text COLLATE "C" NOT NULL,
	"row_version" bigint DEFAULT 1 NOT NULL,
	"moved_at" timestamp with time zone DEFAULT now() NOT NULL,
	"has_pending_tasks" boolean DEFAULT false NOT NULL,
	CONSTRAINT "checkpoint_heads_pkey" PRIMARY KEY("thread_id","checkpoint_ns")
);
--> statement-breakpoint
-- Hand-written: every put updates its lineage's row; room on each page keeps those updates HOT.
ALTER TABLE "checkpoint_heads" SET (fillfactor = 70);--> statement-breakpoint
-- Hand-written: the current heads move from checkpoints.is_head to checkpoint_heads.
INSERT INTO "checkpoint_heads" ("thread_id", "checkpoint_ns", "checkpoint_id", "moved_at", "has_pending_tasks")
SELECT "thread_id", "checkpoint_ns", "checkpoint_id", "created_at", "has_pending_tasks" FROM "checkpoints" WHERE "is_head";--> statement-breakpoint
-- Hand-written: roles granted rows of checkpoints (see grantStatements) get the same on checkpoint_heads,
-- so an application running as a least-privilege role keeps working after this migration.
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee, a.privilege_type
             FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
            WHERE c.oid = 'checkpoints'::regclass AND a.grantee <> c.relowner
              AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
  LOOP
    EXECUTE format('GRANT %s ON TABLE checkpoint_heads TO %s', g.privilege_type, g.grantee);
  END LOOP;
END $$;--> statement-breakpoint
DROP INDEX "checkpoints_one_head_per_lineage";--> statement-breakpoint
ALTER TABLE "checkpoints" DROP COLUMN "is_head";