// pi's own SessionManager on one session file: the baseline side of benchmarks/run.py.
//
//   node --expose-gc benchmarks/pi_bench.mjs FILE --dist DIST [--repeat R] [--appends N]
//                                            [--loop N] [--light]
//   node --expose-gc benchmarks/pi_bench.mjs --list DIR --dist DIST [--repeat R]
//
// DIST is the pi package's dist folder (pi 0.73.1 or 1.5.2: SessionManager is imported from its
// core/session-manager.js, which Node 20 loads for both). --loop N: N rounds of appendMessage +
// buildSessionContext (what an agent does each turn) on the scratch copy, after the appends.
// Before the appends, the file is opened again R times in this process (open + context: pi
// reads the whole file each time), then 100 lines are appended as another program would and it
// is opened R times more. --light: open and first buildSessionContext only (huge files).
// --list DIR: SessionManager.list over the folder, timed, with a digest of the rows.
//
// FILE is copied to a scratch folder first (pi rewrites files it migrates, and the append timing
// appends), so it is never changed. Prints one JSON object; times are milliseconds
// (performance.now()), memory MiB. The digests are those of sessiontree.testing.digests, so that
// run.py can check both sides did the same work:
//   context: sha256 over role + "\x1f" + text + "\x1e" for each message of buildSessionContext()
//   tree:    sha256 over id + ":" + depth + "\n" for each node of getTree() in pre-order
//   branch:  sha256 over the ids of getBranch(deepest) joined by "\n" (deepest: greatest distance
//            from its root, the first in file order on ties)
import { createHash } from "node:crypto";
import { appendFileSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

function options(argv) {
	const opts = { file: null, dist: null, repeat: 5, appends: 1000, loop: 0, light: false, list: null };
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i];
		if (arg === "--dist") opts.dist = argv[++i];
		else if (arg === "--repeat") opts.repeat = Number(argv[++i]);
		else if (arg === "--appends") opts.appends = Number(argv[++i]);
		else if (arg === "--loop") opts.loop = Number(argv[++i]);
		else if (arg === "--light") opts.light = true;
		else if (arg === "--list") opts.list = argv[++i];
		else if (opts.file === null) opts.file = arg;
		else throw new Error(`unexpected argument ${arg}`);
	}
	if (!(opts.file || opts.list) || !opts.dist) throw new Error("usage: pi_bench.mjs FILE|--list DIR --dist DIST [--repeat R] [--appends N] [--loop N] [--light]");
	return opts;
}

const MiB = 2 ** 20;
const collect = () => globalThis.gc?.();
const rssMiB = () => process.memoryUsage().rss / MiB;
// This process's own peak (Linux's VmHWM): maxRSS (ru_maxrss) also counts the peak of the process
// that started this one (the kernel carries it over exec), as the Python side's figures do not.
const peakMiB = () => {
	try {
		const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
		if (line) return Number(line.split(/\s+/)[1]) / 1024;
	} catch {}
	return process.resourceUsage().maxRSS / 1024; // KiB on Linux
};

function timed(repeat, run) {
	const runs = [];
	let value;
	for (let i = 0; i < repeat; i++) {
		const start = performance.now();
		value = run();
		runs.push(performance.now() - start);
	}
	const sorted = [...runs].sort((a, b) => a - b);
	return [{ first: runs[0], median: sorted[Math.floor(sorted.length / 2)], min: sorted[0] }, value];
}

const utf8Hash = () => createHash("sha256");

function blockText(block) {
	switch (block?.type) {
		case "text": return block.text ?? "";
		case "thinking": return `[thinking]${block.thinking ?? ""}`;
		case "toolCall": return `[toolCall:${block.name}]${block.id}`;
		case "image": return `[image:${block.mimeType}]`;
		default: return `[${block?.type}]`;
	}
}

function contentText(content) {
	if (typeof content === "string") return content;
	return Array.isArray(content) ? content.map(blockText).join("\n") : "";
}

function messageText(message) {
	switch (message.role) {
		case "user": case "custom": case "assistant": return contentText(message.content);
		case "toolResult": return `[${message.toolCallId}]${contentText(message.content)}`;
		case "bashExecution": return `$ ${message.command}\n${message.output}`;
		case "compactionSummary": case "branchSummary": return message.summary ?? "";
		default: return "";
	}
}

function contextDigest(context) {
	const hash = utf8Hash();
	for (const message of context.messages) hash.update(`${message.role}\x1f${messageText(message)}\x1e`, "utf8");
	return { digest: hash.digest("hex"), messages: context.messages.length };
}

function treeDigest(roots) {
	const hash = utf8Hash();
	let nodes = 0;
	const stack = roots.map((root) => [root, 0]).reverse();
	while (stack.length > 0) {
		const [node, depth] = stack.pop();
		nodes++;
		hash.update(`${node.entry.id}:${depth}\n`, "utf8");
		for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i], depth + 1]);
	}
	return { digest: hash.digest("hex"), nodes, roots: roots.length };
}

function deepestEntry(entries) {
	const byId = new Map(entries.map((entry) => [entry.id, entry]));
	const depth = new Map();
	let best = null;
	let bestDepth = -1;
	for (const entry of entries) {
		const chain = [];
		const seen = new Set();
		let node = entry;
		while (node && !depth.has(node.id) && !seen.has(node.id)) {
			seen.add(node.id);
			chain.push(node.id);
			node = node.parentId ? byId.get(node.parentId) : undefined;
		}
		let d = node && depth.has(node.id) ? depth.get(node.id) : -1;
		for (let i = chain.length - 1; i >= 0; i--) depth.set(chain[i], ++d);
		if (depth.get(entry.id) > bestDepth) {
			bestDepth = depth.get(entry.id);
			best = entry.id;
		}
	}
	return best;
}

// The rows of a listing as sessiontree.testing.digests.listing_digest hashes them.
function listingDigest(rows) {
	const hash = utf8Hash();
	for (const r of rows) {
		hash.update(`${r.id}\x1f${r.modified.getTime()}\x1f${r.messageCount}\x1f${r.name ?? ""}\x1f${r.firstMessage}\x1e`, "utf8");
	}
	return hash.digest("hex");
}

// The whole folder: pi 1.x's list(cwd, dir) keeps the sessions of cwd only, its listAll(dir)
// takes the folder whole; pi 0.73.1's list never filtered (and its listAll took no folder).
function listWhole(SessionManager, opts) {
	const { version } = JSON.parse(readFileSync(join(opts.dist, "..", "package.json"), "utf8"));
	return Number(version.split(".")[0]) >= 1 ? SessionManager.listAll(opts.list) : SessionManager.list("/", opts.list);
}

async function list(opts, SessionManager) {
	const runs = [];
	let rows;
	for (let i = 0; i < opts.repeat; i++) {
		const start = performance.now();
		rows = await listWhole(SessionManager, opts);
		runs.push(performance.now() - start);
	}
	const sorted = [...runs].sort((a, b) => a - b);
	process.stdout.write(`${JSON.stringify({
		list_ms: { first: runs[0], median: sorted[Math.floor(sorted.length / 2)], min: sorted[0] },
		sessions: rows.length, digest: listingDigest(rows), peak_rss_mib: peakMiB(),
	})}\n`);
}

// n user messages appended the way another program would write them (one write each).
function foreignAppend(file, parentId, n) {
	let parent = parentId;
	for (let i = 0; i < n; i++) {
		const id = `z${String(i).padStart(7, "0")}`; // (never one of pi's hex ids)
		const entry = { type: "message", id, parentId: parent, timestamp: new Date(Date.UTC(2030, 0, 1, 0, 0, i)).toISOString(),
			message: { role: "user", content: [{ type: "text", text: `a line another program appended, #${i}` }], timestamp: 1893456000000 + i * 1000 } };
		appendFileSync(file, `${JSON.stringify(entry)}\n`);
		parent = id;
	}
}

async function main() {
	const opts = options(process.argv.slice(2));
	const { SessionManager } = await import(pathToFileURL(join(opts.dist, "core", "session-manager.js")).href);
	if (opts.list) return list(opts, SessionManager);
	collect();
	const rssBaseline = rssMiB();

	const scratch = mkdtempSync(join(tmpdir(), "sessiontree-pi-bench-"));
	const copy = join(scratch, basename(opts.file));
	copyFileSync(opts.file, copy);
	try {
		const out = { file_bytes: statSync(copy).size };
		let start = performance.now();
		const manager = SessionManager.open(copy);
		out.load_ms = performance.now() - start;
		out.peak_rss_after_load_mib = peakMiB();
		const entries = manager.getEntries();
		out.entries = entries.length;
		collect();
		out.mem_after_load_delta = { rss_mib: rssMiB() - rssBaseline };

		let context, roots, branch;
		[out.build_context_ms, context] = timed(opts.repeat, () => manager.buildSessionContext());
		out.context = contextDigest(context);
		if (opts.light) {
			out.peak_rss_after_context_mib = peakMiB();
			process.stdout.write(`${JSON.stringify(out)}\n`);
			return;
		}
		[out.get_tree_ms, roots] = timed(opts.repeat, () => manager.getTree());
		out.tree = treeDigest(roots);
		const deepest = deepestEntry(entries);
		[out.get_branch_ms, branch] = timed(opts.repeat, () => manager.getBranch(deepest));
		out.branch = {
			digest: utf8Hash().update(branch.map((entry) => entry.id).join("\n"), "utf8").digest("hex"),
			length: branch.length,
		};

		const reopen = () => {
			const again = SessionManager.open(copy);
			return again.buildSessionContext();
		};
		[out.reopen_ms] = timed(opts.repeat, reopen);
		foreignAppend(copy, manager.getLeafId(), 100);
		let grownContext;
		[out.reopen_grown_ms, grownContext] = timed(opts.repeat, reopen);
		out.grown_context = contextDigest(grownContext);
		const writer = SessionManager.open(copy); // (it appends after the foreign lines)

		if (opts.appends > 0) {
			const before = writer.getEntries().length;
			const each = [];
			start = performance.now();
			for (let i = 0; i < opts.appends; i++) {
				const one = performance.now();
				writer.appendMessage({
					role: "user",
					content: [{ type: "text", text: `bench append #${i}: please continue with the next step of the refactor and run the tests.` }],
					timestamp: Date.now(),
				});
				each.push((performance.now() - one) * 1000);
			}
			out[`append_${opts.appends}_ms`] = performance.now() - start;
			out.append_per_entry_us = (out[`append_${opts.appends}_ms`] * 1000) / opts.appends;
			each.sort((a, b) => a - b);
			out.append_median_us = each[Math.floor(each.length / 2)];
			out.append_mean_us = each.reduce((a, b) => a + b, 0) / each.length;
			out.append_persisted = SessionManager.open(copy).getEntries().length === before + opts.appends;
		}
		if (opts.loop > 0) {
			start = performance.now();
			let last;
			for (let i = 0; i < opts.loop; i++) {
				writer.appendMessage({
					role: "user",
					content: [{ type: "text", text: `agent loop turn #${i}: read the failing test and fix it.` }],
					timestamp: Date.now(),
				});
				last = writer.buildSessionContext();
			}
			out[`loop_ms`] = performance.now() - start;
			out.loop_per_round_us = (out.loop_ms * 1000) / opts.loop;
			out.loop_context = contextDigest(last);
		}
		process.stdout.write(`${JSON.stringify(out)}\n`);
	} finally {
		rmSync(scratch, { recursive: true, force: true });
	}
}

await main();
