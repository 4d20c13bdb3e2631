// pi's own SessionManager for the storage benchmark (benchmarks/bench_storage.py): the JSONL
// baseline measured in the same run.
//
//   node benchmarks/pi_storage.mjs context FILE LEAF_ID --pi NODE_MODULES [--repeat R]
//       open + buildSessionContext at LEAF_ID, R times (FILE is copied first: never changed)
//   node benchmarks/pi_storage.mjs list DIR N --pi NODE_MODULES [--repeat R]
//       SessionManager.list over DIR, the N newest kept
//   node benchmarks/pi_storage.mjs append FILE N --pi NODE_MODULES
//       prints "ready", waits for a line on stdin, appends N user messages, prints the end time
//
// Prints one JSON object; times in milliseconds (the context's messages are printed so that the
// benchmark compares their digest with ours).
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const at = args.indexOf("--pi");
const pi = args[at + 1];
const rep = args.indexOf("--repeat");
const repeat = rep >= 0 ? Number(args[rep + 1]) : 5;
const [mode, target, extra] = args;
const { SessionManager } = await import(
	pathToFileURL(join(pi, "@mariozechner", "pi-coding-agent", "dist", "index.js")).href);

function median(runs) {
	const sorted = [...runs].sort((a, b) => a - b);
	return sorted[Math.floor(sorted.length / 2)];
}

if (mode === "context") {
	const scratch = mkdtempSync(join(tmpdir(), "sessiontree-pi-storage-"));
	const copy = join(scratch, basename(target));
	copyFileSync(target, copy);
	const runs = [];
	let context;
	for (let i = 0; i < repeat; i++) {
		const start = performance.now();
		const manager = SessionManager.open(copy);
		manager.branch(extra);
		context = manager.buildSessionContext();
		runs.push(performance.now() - start);
	}
	rmSync(scratch, { recursive: true, force: true });
	process.stdout.write(`${JSON.stringify({ median_ms: median(runs), messages: context.messages })}\n`);
} else if (mode === "list") {
	const runs = [];
	let newest;
	for (let i = 0; i < repeat; i++) {
		const start = performance.now();
		const all = await SessionManager.list("/", target);
		all.sort((a, b) => b.modified - a.modified);
		newest = all.slice(0, Number(extra));
		runs.push(performance.now() - start);
	}
	process.stdout.write(`${JSON.stringify({ median_ms: median(runs), count: newest.length, first: newest[0]?.id })}\n`);
} else if (mode === "append") {
	const manager = SessionManager.open(target);
	process.stdout.write("ready\n");
	const lines = createInterface({ input: process.stdin });
	for await (const _ of lines) break;
	for (let i = 0; i < Number(extra); i++) {
		manager.appendMessage({ role: "user", content: [{ type: "text", text: `writer append #${i}` }], timestamp: Date.now() });
	}
	process.stdout.write(`${JSON.stringify({ end: Date.now() / 1000 })}\n`);
	process.exit(0);
} else {
	throw new Error(`unknown mode ${mode}`);
}
