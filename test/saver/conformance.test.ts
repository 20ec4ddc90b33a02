/**
 * The official conformance suite, in full, plus its opt-in delta-channel suite,
 * with the default options (lists stored by their elements, stored.ts). The only
 * full run: every other saver, storage form and engine runs its differential
 * (test/helpers/conformance.ts says what it keeps, and why).
 */
import { conformance } from "../helpers/conformance.js";

conformance("langgraph-checkpoint-pg", "conformance");
