#!/usr/bin/env node
// pi's own session listing for sessiontree's listing tests: JSON on stdout. Works with pi 0.73.1
// (@mariozechner) and pi 1.5.2 (@earendil-works): the package is whichever PI_NODE_MODULES holds.
//
//   node pi_listing.mjs PI_NODE_MODULES list DIR [CWD]  -> SessionManager.list(CWD, DIR) rows; without
//                                                          CWD the whole folder: list("/", DIR) on 0.73.1
//                                                          (it never filters), listAll(DIR) on 1.5.2
//                                                          (its list keeps the sessions of CWD only)
//   node pi_listing.mjs PI_NODE_MODULES recent DIR CWD  -> {mostRecent, continued}: findMostRecentSession(DIR)
//                                                          and continueRecent(CWD, DIR).getSessionFile()
//   node pi_listing.mjs PI_NODE_MODULES new DIR CWD N   -> {ids, files}: N sessions made by
//                                                          SessionManager.create(CWD, DIR) in one process
//   node pi_listing.mjs PI_NODE_MODULES fork FILE LEAF  -> {header, file}: createBranchedSession(LEAF) of
//                                                          SessionManager.open(FILE)
//   node pi_listing.mjs PI_NODE_MODULES forkappend FILE LEAF -> {file, written, lines}: createBranchedSession(LEAF),
//                                                          then a thinking level change ("low") and a user
//                                                          message ("hi", timestamp 1) appended; written: whether
//                                                          the file existed after the fork and after each append
//   node pi_listing.mjs PI_NODE_MODULES forkfrom FILE CWD DIR -> {header, file}: forkFrom(FILE, CWD, DIR)
//   node pi_listing.mjs PI_NODE_MODULES ids ID...        -> [whether assertValidSessionId accepts each ID]
//   node pi_listing.mjs PI_NODE_MODULES context FILE... -> [buildSessionContext().messages] of each FILE
//   node pi_listing.mjs PI_NODE_MODULES usage FILE      -> getUsageCostBreakdown(open(FILE).getEntries())
//                                                          (pi 1.5.2: its session totals by model)
// Dates are printed as epoch milliseconds; a row without an id (a header without one) as id null.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, command, ...args] = process.argv.slice(2);
const scope = existsSync(join(modules, "@earendil-works", "pi-coding-agent")) ? "@earendil-works" : "@mariozechner";
const dist = join(modules, scope, "pi-coding-agent", "dist");
// The session manager's own module: pi 1.5.2's index.js needs a newer node than 20 (fs.globSync).
const { SessionManager, findMostRecentSession, assertValidSessionId } = await import(pathToFileURL(join(dist, "core", "session-manager.js")).href);

const header = (file) => JSON.parse(readFileSync(file, "utf8").split("\n")[0]);

if (command === "list") {
	const [dir, cwd] = args;
	const rows = cwd !== undefined ? await SessionManager.list(cwd, dir)
		: scope === "@earendil-works" ? await SessionManager.listAll(dir) : await SessionManager.list("/", dir);
	const out = rows.map((r) => ({
		path: r.path, id: r.id ?? null, cwd: r.cwd, name: r.name ?? null, parentSessionPath: r.parentSessionPath ?? null,
		created: r.created.getTime(), modified: r.modified.getTime(), messageCount: r.messageCount,
		firstMessage: r.firstMessage,
	}));
	process.stdout.write(JSON.stringify(out));
} else if (command === "recent") {
	const [dir, cwd] = args;
	const continued = SessionManager.continueRecent(cwd, dir);
	process.stdout.write(JSON.stringify({ mostRecent: findMostRecentSession(dir), continued: continued.getSessionFile() }));
} else if (command === "new") {
	const [dir, cwd, n] = args;
	const ids = [];
	for (let i = 0; i < Number(n); i++) ids.push(SessionManager.create(cwd, dir).getSessionId());
	process.stdout.write(JSON.stringify({ ids }));
} else if (command === "fork") {
	const [file, leaf] = args;
	const manager = SessionManager.open(file);
	const forked = manager.createBranchedSession(leaf);
	process.stdout.write(JSON.stringify({ file: forked, header: header(forked) }));
} else if (command === "forkappend") {
	const [file, leaf] = args;
	const manager = SessionManager.open(file);
	const forked = manager.createBranchedSession(leaf);
	const written = [existsSync(forked)];
	manager.appendThinkingLevelChange("low");
	written.push(existsSync(forked));
	manager.appendMessage({ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 1 });
	written.push(existsSync(forked));
	const lines = readFileSync(forked, "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
	process.stdout.write(JSON.stringify({ file: forked, written, lines }));
} else if (command === "forkfrom") {
	const [file, cwd, dir] = args;
	const forked = SessionManager.forkFrom(file, cwd, dir).getSessionFile();
	process.stdout.write(JSON.stringify({ file: forked, header: header(forked) }));
} else if (command === "ids") {
	process.stdout.write(JSON.stringify(args.map((id) => {
		try { assertValidSessionId(id); return true; } catch { return false; }
	})));
} else if (command === "context") {
	process.stdout.write(JSON.stringify(args.map((file) => SessionManager.open(file).buildSessionContext().messages)));
} else if (command === "usage") {
	const { getUsageCostBreakdown } = await import(pathToFileURL(join(dist, "core", "usage-totals.js")).href);
	process.stdout.write(JSON.stringify(getUsageCostBreakdown(SessionManager.open(args[0]).getEntries())));
} else {
	throw new Error(`unknown command ${command}`);
}
