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

if (mode !== "read") throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(input.files.map((f) => read(f, input.full))));
