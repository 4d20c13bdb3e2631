#!/usr/bin/env node
// pi's own HTML export of a session file, timed: node pi_export_html.mjs NODE_MODULES IN OUT
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, input, output] = process.argv.slice(2);
const pkg = join(modules, "@mariozechner", "pi-coding-agent", "dist", "core", "export-html", "index.js");
const { exportFromFile } = await import(pathToFileURL(pkg).href);
const started = performance.now();
await exportFromFile(input, { outputPath: output });
process.stdout.write(JSON.stringify({ export_ms: performance.now() - started }));
