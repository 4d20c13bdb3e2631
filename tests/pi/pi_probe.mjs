#!/usr/bin/env node
// Runs pi's own SessionManager for sessiontree's interoperability tests. One process per batch:
//   node pi_probe.mjs PI_NODE_MODULES read   < ["file.jsonl", ...]   -> [{leaf, contexts, tree, labels, name, bytes}]
//   node pi_probe.mjs PI_NODE_MODULES write  < [{dir, cwd, ops: [...]}, ...] -> ["written file path", ...]
// Ops for "write": ["user", text] ["assistant", text, provider, model] ["tool", callId, text]
//   ["model", provider, modelId] ["thinking", level] ["label", entryIndex, text|null] ["name", text]
//   ["custom", type, data] ["custom_message", type, content, display] ["branch", entryIndex]
//   ["reset"] ["branch_summary", entryIndex|null, summary] ["compaction", summary, entryIndex, tokens]
// entryIndex counts the entries appended so far (0-based, in append order).
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, mode] = process.argv.slice(2);
const pkg = join(modules, "@mariozechner", "pi-coding-agent", "dist", "core", "session-manager.js");
const { SessionManager } = await import(pathToFileURL(pkg).href);
const input = JSON.parse(readFileSync(0, "utf8"));

function read(file) {
  const before = readFileSync(file);
  const sm = SessionManager.open(file);
  const entries = sm.getEntries();
  const hasChild = new Set(entries.map((e) => e.parentId).filter((p) => p));
  const contexts = {};
  for (const e of entries) {
    if (!hasChild.has(e.id)) contexts[e.id] = null;
  }
  // buildSessionContext() uses the current leaf: move it for each leaf, then restore.
  const leaf = sm.getLeafId();
  for (const id of Object.keys(contexts)) { sm.branch(id); contexts[id] = sm.buildSessionContext(); }
  if (leaf) sm.branch(leaf);
  const tree = [];
  const stack = sm.getTree().map((n) => [n, 0]).reverse();
  while (stack.length) {
    const [node, depth] = stack.pop();
    tree.push([node.entry.id, depth, node.label ?? null]);
    for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i], depth + 1]);
  }
  const labels = {};
  for (const e of entries) {
    const label = sm.getLabel(e.id);
    if (label !== undefined) labels[e.id] = label;
  }
  const after = readFileSync(file);
  return {
    leaf, context: leaf ? sm.buildSessionContext() : null, contexts, tree, labels,
    name: sm.getSessionName() ?? null, unchanged: before.equals(after), size: statSync(file).size,
  };
}

function write(spec) {
  const sm = SessionManager.create(spec.cwd, spec.dir);
  const ids = [];
  let clock = 1767225600000;
  const usage = { input: 3, output: 12, cacheRead: 0, cacheWrite: 0, totalTokens: 15,
                  cost: { input: 0.000009, output: 0.00018, cacheRead: 0, cacheWrite: 0, total: 0.000189 } };
  for (const op of spec.ops) {
    const [kind, ...a] = op;
    clock += 1000;
    if (kind === "user") ids.push(sm.appendMessage({ role: "user", content: [{ type: "text", text: a[0] }], timestamp: clock }));
    else if (kind === "assistant") ids.push(sm.appendMessage({ role: "assistant", content: [{ type: "text", text: a[0] }],
      api: "anthropic-messages", provider: a[1], model: a[2], usage, stopReason: "stop", timestamp: clock }));
    else if (kind === "tool") ids.push(sm.appendMessage({ role: "toolResult", toolCallId: a[0], toolName: "bash",
      content: [{ type: "text", text: a[1] }], isError: false, timestamp: clock }));
    else if (kind === "model") ids.push(sm.appendModelChange(a[0], a[1]));
    else if (kind === "thinking") ids.push(sm.appendThinkingLevelChange(a[0]));
    else if (kind === "label") ids.push(sm.appendLabelChange(ids[a[0]], a[1] ?? undefined));
    else if (kind === "name") ids.push(sm.appendSessionInfo(a[0]));
    else if (kind === "custom") ids.push(sm.appendCustomEntry(a[0], a[1]));
    else if (kind === "custom_message") ids.push(sm.appendCustomMessageEntry(a[0], a[1], a[2]));
    else if (kind === "branch") sm.branch(ids[a[0]]);
    else if (kind === "reset") sm.resetLeaf();
    else if (kind === "branch_summary") ids.push(sm.branchWithSummary(a[0] === null ? null : ids[a[0]], a[1]));
    else if (kind === "compaction") ids.push(sm.appendCompaction(a[0], ids[a[1]], a[2]));
    else throw new Error(`unknown op ${kind}`);
  }
  return sm.getSessionFile();
}

const out = mode === "read" ? input.map(read) : mode === "write" ? input.map(write) : null;
if (out === null) throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(out));
