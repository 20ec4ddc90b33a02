CREATE TABLE "checkpoint_blobs" (
	"thread_id" text COLLATE "C" NOT NULL,
	"checkpoint_ns" text COLLATE "C" DEFAULT '' NOT NULL,
	"channel" text COLLATE "C" NOT NULL,
	"version" text COLLATE "C" NOT NULL,
	"type" text NOT NULL,
	"value" "bytea",
	"row_version" bigint DEFAULT 1 NOT NULL,
	CONSTRAINT "checkpoint_blobs_pkey" PRIMARY KEY("thread_id","checkpoint_ns","channel","version")
);
--> statement-breakpoint
CREATE TABLE "checkpoint_writes" (
	"thread_id" text COLLATE "C" NOT NULL,
	"checkpoint_ns" text COLLATE "C" DEFAULT '' NOT NULL,
	"checkpoint_id" text COLLATE "C" NOT NULL,
	"task_id" text COLLATE "C" NOT NULL,
	"idx" integer NOT NULL,
	"channel" text COLLATE "C" NOT NULL,
	"type" text NOT NULL,
	"value" "bytea",
	"task_path" text COLLATE "C" DEFAULT '' NOT NULL,
	"row_version" bigint DEFAULT 1 NOT NULL,
	CONSTRAINT "checkpoint_writes_pkey" PRIMARY KEY("thread_id","checkpoint_ns","checkpoint_id","task_id","idx")
);
--> statement-breakpoint
CREATE TABLE "checkpoints" (
	"thread_id" text COLLATE "C" NOT NULL,
	"checkpoint_ns" text COLLATE "C" DEFAULT '' NOT NULL,
	"checkpoint_id" text COLLATE "C" NOT NULL,
	"parent_checkpoint_id" text COLLATE "C",
	"checkpoint" jsonb NOT NULL,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"metadata_raw" "bytea",
	"is_head" boolean DEFAULT false NOT NULL,
	"row_version" bigint DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "checkpoints_pkey" PRIMARY KEY("thread_id","checkpoint_ns","checkpoint_id")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "checkpoints_one_head_per_lineage" ON "checkpoints" USING btree ("thread_id","checkpoint_ns") WHERE is_head;