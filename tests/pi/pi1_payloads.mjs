#!/usr/bin/env node
// pi-ai 1.5.2's own request bodies (@earendil-works/pi-ai dist/api), for comparison with the
// request builders of sessiontree.providers.
//   node pi1_payloads.mjs PI_NODE_MODULES < {target, cases: [{system, tools, messages, midConvo, compat}]}
//       -> [{chat, responses, anthropic, current, collapsed}, ...]  (a body pi-ai fails to build is
//          {error: message}); `current` = getCurrentSystemMessage(messages) (null without one),
//          `collapsed` = collapseSystemMessages(context).messages (pi-ai's utils/transcript.js)
// Each body is the params the provider's `stream` hands to `onPayload` (captured, then the
// request is stopped) for context = normalizeContext({systemPrompt: system, tools, messages});
// `midConvo` sets the model's compat.supportsMidConvoSystemMessages (pi's default is false);
// `compat` adds other compat flags (supportsAdditionalTools, supportsToolSearch,
// supportsMidConvoToolChanges).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules] = process.argv.slice(2);
const dist = join(modules, "@earendil-works", "pi-ai", "dist");
const load = (name) => import(pathToFileURL(join(dist, name)).href);
const { normalizeContext, collapseSystemMessages, getCurrentSystemMessage } = await load("utils/transcript.js");
const streams = {
  chat: ["openai-completions", (await load("api/openai-completions.js")).stream],
  responses: ["openai-responses", (await load("api/openai-responses.js")).stream],
  anthropic: ["anthropic-messages", (await load("api/anthropic-messages.js")).stream],
};
const { target, cases } = JSON.parse(readFileSync(0, "utf8"));

async function capture([api, stream], context, midConvo, compat) {
  const model = {
    id: target[api].model, provider: target[api].provider, api, name: "probe",
    baseUrl: "http://127.0.0.1:9", reasoning: false, input: ["text", "image"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 200000,
    maxTokens: 24576, compat: { supportsMidConvoSystemMessages: midConvo, ...compat },
  };
  let params = null;
  const events = stream(model, context, {
    apiKey: "sk-probe", cacheRetention: "none",
    onPayload: (body) => { params = body; throw new Error("captured"); },
  });
  let failure = null;
  for await (const event of events) if (event.type === "error") failure = event.error.errorMessage;
  return params ?? { error: failure ?? "no payload" };
}

const out = [];
for (const { system, tools, messages, midConvo, compat } of cases) {
  const context = normalizeContext({ systemPrompt: system ?? undefined, tools: tools ?? undefined, messages });
  const row = { current: getCurrentSystemMessage(messages) ?? null, collapsed: collapseSystemMessages(context).messages };
  for (const [key, entry] of Object.entries(streams)) row[key] = await capture(entry, context, !!midConvo, compat ?? {});
  out.push(row);
}
process.stdout.write(JSON.stringify(out));
