// pi-ai's own request conversions, for comparison with sessiontree.providers.
// Usage: node pi_payloads.mjs <node_modules>; stdin: {messages, system, tools, target}
// (messages as pi's convertToLlm gives them); prints {chat, responses, anthropic}.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const modules = process.argv[2];
const dist = path.join(modules, "@mariozechner", "pi-ai", "dist", "providers");
const load = (name) => import(pathToFileURL(path.join(dist, name)).href);
const { convertMessages } = await load("openai-completions.js");
const { convertResponsesMessages } = await load("openai-responses-shared.js");
const { streamAnthropic } = await load("anthropic.js");

const input = JSON.parse(readFileSync(0, "utf-8"));
const context = { systemPrompt: input.system, messages: input.messages, tools: input.tools };
const model = (api) => ({
  id: input.target[api].model, provider: input.target[api].provider, api, name: "probe",
  baseUrl: "http://127.0.0.1:9", reasoning: false, input: ["text", "image"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 200000, maxTokens: 24576,
});

const chat = convertMessages(model("openai-completions"), context, {});
const responses = convertResponsesMessages(model("openai-responses"), context,
  new Set(["openai", "openai-codex", "opencode"]));

let anthropic = null;
const stream = streamAnthropic(model("anthropic-messages"), context, {
  apiKey: "sk-ant-probe", cacheRetention: "none",
  onPayload: (params) => { anthropic = params; throw new Error("captured"); },
});
for await (const _event of stream) { /* drain until the captured error ends it */ }
process.stdout.write(JSON.stringify({ chat, responses, anthropic }));
