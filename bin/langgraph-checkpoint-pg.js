#!/usr/bin/env node
// The `langgraph-checkpoint-pg` command. A file of its own, in the repository, so that npm finds the
// bin before `prepack` has built dist/ (npm checks package.json first and warns on a missing bin).
import "../dist/cli/main.js";
