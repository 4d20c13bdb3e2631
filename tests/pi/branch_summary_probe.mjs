#!/usr/bin/env node
// What pi 0.73.1 does when the branch being left holds no message, for sessiontree's tests.
//   node branch_summary_probe.mjs PI_NODE_MODULES < {file, leaf, target}
// Collects the entries pi would summarize when moving from `leaf` to `target`
// (collectEntriesForBranchSummary), runs pi's generateBranchSummary on them (it answers before
// calling any model when there are no messages; the model given has no API), and returns the
// result, the entry types, and convertToLlm of the file's context from `leaf`.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules] = process.argv.slice(2);
const core = join(modules, "@mariozechner", "pi-coding-agent", "dist", "core");
const load = async (...parts) => import(pathToFileURL(join(core, ...parts)).href);
const { SessionManager } = await load("session-manager.js");
const { collectEntriesForBranchSummary, generateBranchSummary } =
  await load("compaction", "branch-summarization.js");
const { convertToLlm } = await load("messages.js");

const spec = JSON.parse(readFileSync(0, "utf8"));
const sm = SessionManager.open(spec.file);
const { entries } = collectEntriesForBranchSummary(sm, spec.leaf, spec.target);
const model = { id: "none", provider: "none", api: "none", contextWindow: 128000, maxTokens: 1 };
const result = await generateBranchSummary(entries, { model, apiKey: "", signal: undefined });
sm.branch(spec.leaf);
const llm = convertToLlm(sm.buildSessionContext().messages);
console.log(JSON.stringify({ result, types: entries.map((e) => e.type), llm }));
