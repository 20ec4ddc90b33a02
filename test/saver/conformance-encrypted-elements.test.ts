/**
 * The official conformance suite, in full, plus its delta-channel suite, with
 * lists stored by their elements under an encrypting serializer: each element
 * sealed for its own row, hashes keyed, refs values authenticated (issue 26).
 */
import { randomBytes } from "node:crypto";
import { EncryptedSerializer } from "../../src/index.js";
import { conformance } from "../helpers/conformance.js";

const serde = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });
conformance("langgraph-checkpoint-pg (encrypted elements)", "conformance_encrypted_elements", { elementStorage: true, serde });
