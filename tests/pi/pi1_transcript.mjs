#!/usr/bin/env node
// pi-ai 1.5.2's own transcript functions (@earendil-works/pi-ai dist/utils), for comparison with
// sessiontree's replayed system prompt and the request builders of sessiontree.providers.
//   node pi1_transcript.mjs PI_NODE_MODULES < [{system, tools, messages}, ...]
//       -> [{collapsed, prompt, tools, current}, ...]
// For each: context = normalizeContext({systemPrompt: system, tools, messages});
// `collapsed` = collapseSystemMessages(context).messages, `prompt` = getSystemMessageText of its
// head (null without one), `tools` = the head's toolsAdded (or []), `current` =
// getCurrentSystemMessage(messages) (null without one).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules] = process.argv.slice(2);
const utils = join(modules, "@earendil-works", "pi-ai", "dist", "utils");
const { normalizeContext, collapseSystemMessages, getCurrentSystemMessage } = await import(
  pathToFileURL(join(utils, "transcript.js")).href);
const { getSystemMessageText } = await import(pathToFileURL(join(utils, "text.js")).href);
const input = JSON.parse(readFileSync(0, "utf8"));
const out = input.map(({ system, tools, messages }) => {
  const context = normalizeContext({ systemPrompt: system ?? undefined, tools: tools ?? undefined, messages });
  const collapsed = collapseSystemMessages(context).messages;
  const head = collapsed[0]?.role === "system" ? collapsed[0] : null;
  return {
    collapsed,
    prompt: head ? getSystemMessageText(head) : null,
    tools: head?.toolsAdded ?? [],
    current: getCurrentSystemMessage(messages) ?? null,
  };
});
process.stdout.write(JSON.stringify(out));
