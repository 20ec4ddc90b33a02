-- Hand-written: element rows (checkpoint_blobs rows of the channel __elements__, src/saver/elements.ts) are
-- deleted only by code that knows what names them (issue 26, row 5): the release before element storage
-- deleted every one of them in its prune, as blobs no checkpoint names. This package's prune, deleteThread,
-- copyThread and adoption bridge say they know them (langgraph_checkpoint_pg.elements = 'known', local to
-- their transaction or function); any other delete of such a row is refused. compat.ts: code before this
-- migration refuses the schema.
CREATE FUNCTION "checkpointer_guard_elements"() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $guard$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'LGE01',
    MESSAGE = 'langgraph-checkpoint-pg: element rows (checkpoint_blobs, channel __elements__) are deleted only by code that knows what refers to them',
    HINT = 'an older release of langgraph-checkpoint-pg, or a hand-written delete, ran against this schema: upgrade it, or delete threads with deleteThread or the CLI (threads delete)';
END
$guard$;--> statement-breakpoint
REVOKE ALL ON FUNCTION "checkpointer_guard_elements"() FROM PUBLIC;--> statement-breakpoint
CREATE TRIGGER "checkpointer_guard_elements" BEFORE DELETE ON "checkpoint_blobs" FOR EACH ROW
  WHEN (OLD."channel" = '__elements__' AND pg_catalog.current_setting('langgraph_checkpoint_pg.elements', true) IS DISTINCT FROM 'known')
  EXECUTE FUNCTION "checkpointer_guard_elements"();
