#!/usr/bin/env node
// Runs pi's own prepareCompaction (dist/core/compaction/compaction.js) for sessiontree's tests,
// from the pi install PI_NODE_MODULES holds (pi 1.5.2's @earendil-works package when it is
// there, else pi 0.73.1's @mariozechner one).
//   node compaction_probe.mjs PI_NODE_MODULES < [{file, leaves: [id, ...], keepRecentTokens}, ...]
// For every leaf: the path is SessionManager.getBranch(leaf), the settings pi's defaults with the
// given keepRecentTokens. Prints, per file, {leafId: result | null} where result holds
// prepareCompaction's fields, the file lists, the transcript pi would send to a model, and
// estimateTokens of every message entry on the path.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules] = process.argv.slice(2);
const scope = existsSync(join(modules, "@earendil-works")) ? "@earendil-works" : "@mariozechner";
const core = join(modules, scope, "pi-coding-agent", "dist", "core");
const load = async (...parts) => import(pathToFileURL(join(core, ...parts)).href);
const { SessionManager } = await load("session-manager.js");
const { prepareCompaction, estimateTokens, DEFAULT_COMPACTION_SETTINGS } = await load("compaction", "compaction.js");
const { computeFileLists, serializeConversation } = await load("compaction", "utils.js");
const { convertToLlm } = await load("messages.js");

const sha = (text) => createHash("sha256").update(text, "utf8").digest("hex");
const input = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const spec of input) {
  const sm = SessionManager.open(spec.file);
  const settings = { ...DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: spec.keepRecentTokens };
  const results = {};
  for (const leaf of spec.leaves) {
    const path = sm.getBranch(leaf);
    const prep = prepareCompaction(path, settings);
    const estimates = {};
    // (a message stored with null content is estimated after the context fills it in)
    for (const e of path) if (e.type === "message" && e.message.content != null) estimates[e.id] = estimateTokens(e.message);
    if (!prep) { results[leaf] = { prep: null, estimates }; continue; }
    const files = computeFileLists(prep.fileOps);
    const history = serializeConversation(convertToLlm(prep.messagesToSummarize));
    const prefix = serializeConversation(convertToLlm(prep.turnPrefixMessages));
    results[leaf] = {
      prep: {
        firstKeptEntryId: prep.firstKeptEntryId,
        tokensBefore: prep.tokensBefore,
        isSplitTurn: prep.isSplitTurn,
        messagesToSummarize: prep.messagesToSummarize.map((m) => m.role),
        turnPrefixMessages: prep.turnPrefixMessages.map((m) => m.role),
        previousSummary: prep.previousSummary ?? null,
        readFiles: files.readFiles,
        modifiedFiles: files.modifiedFiles,
        historySha: sha(history),
        historyLength: history.length,
        prefixSha: sha(prefix),
      },
      estimates,
    };
  }
  out.push(results);
}
process.stdout.write(JSON.stringify(out));
