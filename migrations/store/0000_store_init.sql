CREATE TABLE "store_items" (
	"ns_key" text COLLATE "C" NOT NULL,
	"key" text COLLATE "C" NOT NULL,
	"value" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone,
	"ttl_minutes" double precision,
	CONSTRAINT "store_items_pkey" PRIMARY KEY("ns_key","key")
);
--> statement-breakpoint
CREATE INDEX "store_items_expires_at" ON "store_items" USING btree ("expires_at");