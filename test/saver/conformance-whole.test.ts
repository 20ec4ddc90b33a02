/**
 * The official conformance suite, in full, plus its delta-channel suite, with
 * every value stored whole (`elementStorage: false`); conformance.test.ts runs
 * it with the default, values stored by content (stored.ts).
 */
import { conformance } from "../helpers/conformance.js";

conformance("langgraph-checkpoint-pg (whole values)", "conformance_whole", { elementStorage: false });
