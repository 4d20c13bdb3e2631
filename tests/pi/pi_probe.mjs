#!/usr/bin/env node
// Runs pi's own SessionManager (npm @mariozechner/pi-coding-agent) for sessiontree's interoperability
// tests. One node process per batch of files, JSON on stdin, JSON on stdout:
//
//   node pi_probe.mjs PI_NODE_MODULES read      < ["file.jsonl", ...]
//       -> [{leaf, context, contexts, contextsJson, branches, tree, labels, labelTimestamps, children,
//            lines, name, sessionId, cwd, unchanged, size}, ...]
//   node pi_probe.mjs PI_NODE_MODULES write     < [{dir, cwd, ops}, ...]         -> ["written file", ...]
//   node pi_probe.mjs PI_NODE_MODULES write-ids < [{dir, cwd, ops} | {file, ops}, ...]
//       -> [{file, ids, leaf, exists}, ...]
//
// read: everything pi says about the file. `leaf` is getLeafId() after open, `context` is
// buildSessionContext() for it; `contexts` / `contextsJson` hold buildSessionContext() (parsed, and as
// JSON.stringify prints it) for every leaf (an entry without children), `branches` getBranch(leaf) ids;
// `tree` is getTree() in pre-order as [id, depth, label|null]; `labels` / `labelTimestamps` are the
// resolved labels (getLabel, and getTree's labelTimestamp); `children` is getChildren(id) for every
// entry; `lines` is JSON.stringify of every entry of getEntries(); `unchanged` says whether the file's
// bytes are the same after pi opened and read it.
//
// write / write-ids: pi writes a session through its own API (SessionManager.create(cwd, dir), or
// SessionManager.open(file) to append to an existing one). Ops:
//   ["user", text] ["assistant", text, provider, model] ["tool", callId, text]
//   ["message", messageObject]                       (appendMessage with any message, as given)
//   ["model", provider, modelId] ["thinking", level] ["label", ref, text|null] ["name", text]
//   ["custom", type, data] ["custom_message", type, content, display, details?]
//   ["branch", ref] ["reset"] ["branch_summary", ref|null, summary, details?, fromHook?]
//   ["compaction", summary, ref, tokens, details?, fromHook?]
//   ["checkout", ref|null]  (sessiontree's checkout marker written with pi's appendCustomEntry: a custom
//                            entry "sessiontree.checkout" under the target; none if the target is the
//                            last entry appended)
// A ref is an index into the entries appended so far (0-based, in append order) or an entry id string.
// An argument {"$undefined": true} is passed as undefined (JSON has no undefined; pi omits such keys).
// pi writes lazily: nothing reaches the file until an assistant message exists (`exists` tells).
import { existsSync, readFileSync, statSync } from "node:fs";
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
  const leaves = entries.filter((e) => !hasChild.has(e.id)).map((e) => e.id);
  const contexts = {};
  const contextsJson = {};
  const branches = {};
  // buildSessionContext() uses the current leaf: move it to each leaf, then restore it.
  const leaf = sm.getLeafId();
  const context = leaf ? sm.buildSessionContext() : null;
  for (const id of leaves) {
    sm.branch(id);
    const ctx = sm.buildSessionContext();
    contexts[id] = ctx;
    contextsJson[id] = JSON.stringify(ctx);
    branches[id] = sm.getBranch(id).map((e) => e.id);
  }
  if (leaf) sm.branch(leaf);
  const tree = [];
  const labelTimestamps = {};
  const stack = sm.getTree().map((n) => [n, 0]).reverse();
  while (stack.length) {
    const [node, depth] = stack.pop();
    tree.push([node.entry.id, depth, node.label ?? null]);
    if (node.labelTimestamp !== undefined) labelTimestamps[node.entry.id] = node.labelTimestamp;
    for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i], depth + 1]);
  }
  const labels = {};
  const children = {};
  for (const e of entries) {
    const label = sm.getLabel(e.id);
    if (label !== undefined) labels[e.id] = label;
    children[e.id] = sm.getChildren(e.id).map((c) => c.id);
  }
  const after = readFileSync(file);
  return {
    leaf, context, contexts, contextsJson, branches, tree, labels, labelTimestamps, children,
    lines: entries.map((e) => JSON.stringify(e)), name: sm.getSessionName() ?? null,
    sessionId: sm.getSessionId(), cwd: sm.getCwd(), unchanged: before.equals(after),
    size: statSync(file).size,
  };
}

function write(spec) {
  const sm = spec.file ? SessionManager.open(spec.file) : SessionManager.create(spec.cwd, spec.dir);
  const ids = [];
  const ref = (r) => (typeof r === "string" ? r : ids[r]);
  const undef = (v) => (v !== null && typeof v === "object" && v.$undefined === true ? undefined : v);
  let last = spec.file ? sm.getLeafId() : null; // the last entry appended (the file's last line)
  let clock = 1767225600000;
  const usage = { input: 3, output: 12, cacheRead: 0, cacheWrite: 0, totalTokens: 15,
                  cost: { input: 0.000009, output: 0.00018, cacheRead: 0, cacheWrite: 0, total: 0.000189 } };
  const add = (id) => { ids.push(id); last = id; };
  for (const op of spec.ops) {
    const [kind, ...args] = op;
    const a = args.map(undef);
    clock += 1000;
    if (kind === "user") add(sm.appendMessage({ role: "user", content: [{ type: "text", text: a[0] }], timestamp: clock }));
    else if (kind === "assistant") add(sm.appendMessage({ role: "assistant", content: [{ type: "text", text: a[0] }],
      api: "anthropic-messages", provider: a[1], model: a[2], usage, stopReason: "stop", timestamp: clock }));
    else if (kind === "tool") add(sm.appendMessage({ role: "toolResult", toolCallId: a[0], toolName: "bash",
      content: [{ type: "text", text: a[1] }], isError: false, timestamp: clock }));
    else if (kind === "message") add(sm.appendMessage(a[0]));
    else if (kind === "model") add(sm.appendModelChange(a[0], a[1]));
    else if (kind === "thinking") add(sm.appendThinkingLevelChange(a[0]));
    else if (kind === "label") add(sm.appendLabelChange(ref(a[0]), a[1] ?? undefined));
    else if (kind === "name") add(sm.appendSessionInfo(a[0]));
    else if (kind === "custom") add(sm.appendCustomEntry(a[0], a[1]));
    else if (kind === "custom_message") add(sm.appendCustomMessageEntry(a[0], a[1], a[2], a[3]));
    else if (kind === "branch") sm.branch(ref(a[0]));
    else if (kind === "reset") sm.resetLeaf();
    else if (kind === "branch_summary") add(sm.branchWithSummary(a[0] === null ? null : ref(a[0]), a[1], a[2], a[3]));
    else if (kind === "compaction") add(sm.appendCompaction(a[0], ref(a[1]), a[2], a[3], a[4]));
    else if (kind === "checkout") {
      const target = a[0] === null ? null : ref(a[0]);
      if (target !== null && target === last) sm.branch(target);
      else {
        if (target === null) sm.resetLeaf(); else sm.branch(target);
        add(sm.appendCustomEntry("sessiontree.checkout", { targetId: target }));
      }
    }
    else throw new Error(`unknown op ${kind}`);
  }
  const file = sm.getSessionFile();
  return { file, ids, leaf: sm.getLeafId(), exists: existsSync(file) };
}

const out = mode === "read" ? input.map(read)
  : mode === "write" ? input.map((spec) => write(spec).file)
  : mode === "write-ids" ? input.map(write)
  : null;
if (out === null) throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(out));
