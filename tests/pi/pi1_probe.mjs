#!/usr/bin/env node
// Runs pi 1.5.2's own SessionManager and pi-ai's transcript functions (npm
// @earendil-works/pi-coding-agent) for sessiontree's pi 1.x tests. One node process per batch,
// JSON on stdin, JSON on stdout:
//
//   node pi1_probe.mjs PI_NODE_MODULES read   < {"files": [...], "full": bool}
//       -> [{leaf, tree, unchanged, at: {id: {context, projection, system}}}, ...]
//
// `leaf` is getLeafId() after SessionManager.open(file); `tree` is getTree() in pre-order as
// [id, depth, label|null]; `at` holds, for every entry id (the leaf moved there with branch(id)):
//   context    JSON.stringify(buildSessionContext())
//   projection JSON.stringify(buildSessionProjection().entries as [sourceEntry.id, messages])
//   system     JSON.stringify(getCurrentSystemMessage(buildSessionProjection().messages) ?? null)
// With `full` false each value is the SHA-256 (hex) of that JSON text's UTF-8 bytes instead, so
// that large sessions can be compared entry by entry without printing every context.
// `unchanged` says whether pi left the file's bytes alone.
//
//   node pi1_probe.mjs PI_NODE_MODULES apply  < [{dir, cwd, ops} | {file, ops}, ...]
//       -> [{file, results: [{ok: entry} | {error: message}, ...]}, ...]
//
// pi writes through its own API (SessionManager.create(cwd, dir), or open(file) to go on):
//   ["message", messageObject] ["edit", ref, replacement] ["branch", ref]
//   ["usage", kind, provider, model, usage, note] ["compaction", summary, ref|null, tokens, usage?]
// A ref is an index into the entries appended so far or an entry id string. Each result is
// the entry written (without id, parentId and timestamp) or the error pi raised.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, mode] = process.argv.slice(2);
const scope = join(modules, "@earendil-works");
const { SessionManager } = await import(
  pathToFileURL(join(scope, "pi-coding-agent", "dist", "core", "session-manager.js")).href);
const { getCurrentSystemMessage } = await import(
  pathToFileURL(join(scope, "pi-ai", "dist", "utils", "transcript.js")).href);
const input = JSON.parse(readFileSync(0, "utf8"));

const digest = (text) => createHash("sha256").update(text, "utf8").digest("hex");

function read(file, full) {
  const before = readFileSync(file);
  const sm = SessionManager.open(file);
  const leaf = sm.getLeafId();
  const shown = full ? (text) => text : digest;
  const at = {};
  for (const entry of sm.getEntries()) {
    sm.branch(entry.id);
    const projection = sm.buildSessionProjection();
    at[entry.id] = {
      context: shown(JSON.stringify(sm.buildSessionContext())),
      projection: shown(JSON.stringify(projection.entries.map((e) => [e.sourceEntry.id, e.messages]))),
      system: shown(JSON.stringify(getCurrentSystemMessage(projection.messages) ?? null)),
    };
  }
  if (leaf) sm.branch(leaf);
  const tree = [];
  const stack = sm.getTree().map((n) => [n, 0]).reverse();
  while (stack.length) {
    const [node, depth] = stack.pop();
    tree.push([node.entry.id, depth, node.label ?? null]);
    for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i], depth + 1]);
  }
  return { leaf, tree, at, unchanged: before.equals(readFileSync(file)) };
}

function apply(spec) {
  const sm = spec.file ? SessionManager.open(spec.file) : SessionManager.create(spec.cwd, spec.dir);
  const ids = [];
  const ref = (r) => (typeof r === "number" ? ids[r] : r);
  const results = [];
  for (const [kind, ...a] of spec.ops) {
    try {
      let id;
      if (kind === "message") id = sm.appendMessage(a[0]);
      else if (kind === "edit") id = sm.appendContextEdit(ref(a[0]), a[1]);
      else if (kind === "usage") id = sm.appendUsage(a[0], a[1], a[2], a[3], a[4] ?? undefined).id;
      else if (kind === "compaction") id = sm.appendCompaction(a[0], a[1] === null ? undefined : ref(a[1]), a[2], undefined, undefined, a[3] ?? undefined);
      else if (kind === "branch") { sm.branch(ref(a[0])); results.push({ ok: null }); continue; }
      else throw new Error(`unknown op ${kind}`);
      ids.push(id);
      const { id: _i, parentId: _p, timestamp: _t, ...rest } = sm.getEntry(id);
      results.push({ ok: JSON.parse(JSON.stringify(rest)) });
    } catch (error) {
      results.push({ error: String(error.message ?? error) });
    }
  }
  return { file: sm.getSessionFile(), results };
}

const out = mode === "read" ? input.files.map((f) => read(f, input.full))
  : mode === "apply" ? input.map(apply) : null;
if (out === null) throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(out));
