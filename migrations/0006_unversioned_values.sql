ALTER TABLE "checkpoints" ADD COLUMN "unversioned_type" text;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "unversioned_values" "bytea";