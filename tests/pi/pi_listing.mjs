#!/usr/bin/env node
// pi's own session listing for sessiontree's listing tests: JSON on stdout.
//
//   node pi_listing.mjs PI_NODE_MODULES list DIR [CWD]  -> SessionManager.list(CWD, DIR) rows
//   node pi_listing.mjs PI_NODE_MODULES recent DIR CWD  -> {mostRecent, continued}: findMostRecentSession(DIR)
//                                                          and continueRecent(CWD, DIR).getSessionFile()
// Dates are printed as epoch milliseconds.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, command, dir, cwd] = process.argv.slice(2);
const dist = join(modules, "@mariozechner", "pi-coding-agent", "dist");
const { SessionManager } = await import(pathToFileURL(join(dist, "index.js")).href);
const { findMostRecentSession } = await import(pathToFileURL(join(dist, "core", "session-manager.js")).href);

if (command === "list") {
	const rows = await SessionManager.list(cwd ?? process.cwd(), dir);
	const out = rows.map((r) => ({
		path: r.path, id: r.id, cwd: r.cwd, name: r.name ?? null, parentSessionPath: r.parentSessionPath ?? null,
		created: r.created.getTime(), modified: r.modified.getTime(), messageCount: r.messageCount,
		firstMessage: r.firstMessage,
	}));
	process.stdout.write(JSON.stringify(out));
} else if (command === "recent") {
	const continued = SessionManager.continueRecent(cwd, dir);
	process.stdout.write(JSON.stringify({ mostRecent: findMostRecentSession(dir), continued: continued.getSessionFile() }));
} else {
	throw new Error(`unknown command ${command}`);
}
