/* sessiontree HTML export viewer. Self-contained: no network, no eval, no innerHTML.
 * Every string from the session reaches the page through textContent, createTextNode or an
 * attribute that cannot run code (img src limited to data:image/... base64), so a message can
 * show any text but never run anything. The tree sidebar is virtualized (only the visible rows
 * exist) and a path is rendered in chunks, so a 10,000-entry session is interactive at once. */
(function () {
  "use strict";

  var ROW = 22;                 // px, the sidebar row height (matches --row in the CSS)
  var CHUNK = 60;               // path entries rendered at a time in the main pane
  var MODES = ["default", "no-tools", "user-only", "labeled-only", "all"];

  function $(sel) { return document.querySelector(sel); }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function str(value) { return typeof value === "string" ? value : ""; }
  function oneLine(text, limit) {
    var flat = String(text).replace(/\s+/g, " ").trim();
    return flat.length <= limit ? flat : flat.slice(0, limit - 1) + "\u2026";
  }

  // ---------------------------------------------------------------- data
  var DATA = JSON.parse(document.getElementById("session-data").textContent);
  var entries = DATA.entries;
  var index = new Map();          // id -> position in entries
  for (var i = 0; i < entries.length; i++) index.set(entries[i].id, i);
  var children = new Map();       // id -> [child ids], oldest first
  var parent = new Map();         // id -> parent id (effective, inside the export)
  Object.keys(DATA.tree.children).forEach(function (pid) {
    var list = DATA.tree.children[pid];
    children.set(pid, list);
    for (var j = 0; j < list.length; j++) parent.set(list[j], pid);
  });
  var roots = DATA.tree.roots;
  var labels = new Map(Object.keys(DATA.labels).map(function (k) { return [k, DATA.labels[k]]; }));
  var visibleBits = DATA.visible;  // per entry: bit m set when MODES[m] shows it
  var leafId = DATA.leafId;

  function pathTo(id) {
    var out = [];
    var seen = new Set();
    while (id !== undefined && id !== null && index.has(id) && !seen.has(id)) {
      seen.add(id);
      out.push(id);
      id = parent.get(id);
    }
    return out.reverse();
  }

  // ---------------------------------------------------------------- descriptions
  function kindOf(entry) {
    if (entry.type === "message" && entry.message && typeof entry.message.role === "string")
      return entry.message.role;
    return str(entry.type);
  }
  var KIND_NAMES = { toolResult: "tool", bashExecution: "bash", branch_summary: "summary",
    custom_message: "custom msg", session_info: "name", model_change: "model",
    thinking_level_change: "thinking", compaction: "compaction", context_edit: "edit" };
  function kindClass(kind) {
    if (kind === "user") return "k-user";
    if (kind === "assistant") return "k-assistant";
    if (kind === "toolResult" || kind === "bashExecution") return "k-tool";
    if (kind === "compaction" || kind === "branch_summary") return "k-summary";
    return "k-other";
  }
  function contentText(content) {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return "";
    var parts = [];
    for (var k = 0; k < content.length; k++) {
      var b = content[k];
      if (b && b.type === "text" && typeof b.text === "string") parts.push(b.text);
      else if (b && b.type === "image") parts.push("[image]");
    }
    return parts.join(" ");
  }
  function entryText(entry) {
    var m = entry.message;
    switch (entry.type) {
      case "message":
        if (!m || typeof m !== "object") return "";
        if (m.role === "assistant") {
          var texts = [], calls = [];
          (Array.isArray(m.content) ? m.content : []).forEach(function (b) {
            if (!b) return;
            if (b.type === "text") texts.push(str(b.text));
            else if (b.type === "toolCall") calls.push(str(b.name) + "(" + oneLine(JSON.stringify(b.arguments || {}), 40) + ")");
          });
          var t = texts.join(" ");
          if (calls.length) t = (t ? t + " " : "") + "\u2192 " + calls.join(", ");
          if (m.stopReason === "error" || m.stopReason === "aborted") t = "[" + m.stopReason + "] " + (t || str(m.errorMessage));
          return t;
        }
        if (m.role === "toolResult") return (m.isError ? "[error] " : "") + str(m.toolName) + ": " + contentText(m.content);
        if (m.role === "bashExecution") return "$ " + str(m.command);
        if (m.role === "system") return systemChange(m);
        return contentText(m.content);
      case "compaction": return "compacted " + (entry.tokensBefore || 0) + " tokens: " + str(entry.summary);
      case "branch_summary": return str(entry.summary) || "(empty summary)";
      case "label": return entry.label ? str(entry.targetId) + " = " + str(entry.label) : str(entry.targetId) + " cleared";
      case "session_info": return entry.name ? str(entry.name) : "(cleared)";
      case "model_change": return str(entry.provider) + "/" + str(entry.modelId);
      case "thinking_level_change": return "thinking " + str(entry.thinkingLevel);
      case "custom": return str(entry.customType);
      case "custom_message": return str(entry.customType) + ": " + contentText(entry.content);
      case "context_edit":
        return entry.replacement && typeof entry.replacement === "object"
          ? "replace " + str(entry.targetId) + ": " + contentText(entry.replacement.content)
          : "omit " + str(entry.targetId);
      case "usage":
        var u = entry.usage && typeof entry.usage === "object" ? entry.usage : {};
        var tokens = ["input", "output", "cacheRead", "cacheWrite"].reduce(function (n, k) { return n + (typeof u[k] === "number" ? u[k] : 0); }, 0);
        return str(entry.kind) + ": " + str(entry.provider) + "/" + str(entry.model) + " " + tokens.toLocaleString() + " tokens";
      default: return "";
    }
  }
  // What a system message changes in the prompt and tools (pi replays them in order).
  function systemChange(m) {
    var parts = [], text = contentText(m.content);
    if (text) parts.push("prompt: " + text);
    var sections = m.sections && typeof m.sections === "object" ? m.sections : {};
    var set = [], removed = [];
    Object.keys(sections).forEach(function (name) { (sections[name] === null ? removed : set).push(name); });
    if (set.length) parts.push("sections " + set.join(", "));
    if (removed.length) parts.push("- sections " + removed.join(", "));
    [["toolsAdded", "+ tools "], ["toolsRemoved", "- tools "]].forEach(function (pair) {
      var tools = Array.isArray(m[pair[0]]) ? m[pair[0]] : [];
      if (tools.length) parts.push(pair[1] + tools.map(function (t) { return str(t && t.name); }).join(", "));
    });
    return parts.join("; ") || "no change";
  }
  var summaryCache = new Map();
  function summary(id) {
    var s = summaryCache.get(id);
    if (s === undefined) {
      s = oneLine(entryText(entries[index.get(id)]), 160);
      summaryCache.set(id, s);
    }
    return s;
  }
  var searchCache = new Map();
  function searchText(id) {
    var s = searchCache.get(id);
    if (s === undefined) {
      var entry = entries[index.get(id)], kind = kindOf(entry);
      s = [kind, KIND_NAMES[kind] || kind, entryText(entry).slice(0, 4000), labels.get(id) || ""].join(" ").toLowerCase();
      searchCache.set(id, s);
    }
    return s;
  }

  // ---------------------------------------------------------------- the filtered tree and its rows
  var state = { mode: "default", terms: [], selected: leafId, collapsed: new Set() };
  var rows = [];
  var rowIndex = new Map();   // id -> row number
  var activeSet = new Set(pathTo(leafId));

  // A search matches the text; a word that looks like an entry id (4 to 8 hex digits) also
  // matches the ids it begins. The leaf stays shown; the selection only without a search.
  var ID_LIKE = /^[0-9a-f]{4,8}$/;
  function shown(id) {
    if (id === leafId || (id === state.selected && !state.terms.length)) return true;
    var bit = 1 << MODES.indexOf(state.mode);
    if (!(visibleBits[index.get(id)] & bit)) return false;
    if (!state.terms.length) return true;
    var text = searchText(id);
    for (var t = 0; t < state.terms.length; t++) {
      var term = state.terms[t];
      if (text.indexOf(term) < 0 && !(ID_LIKE.test(term) && id.indexOf(term) === 0)) return false;
    }
    return true;
  }

  function filtered() {
    var out = [];
    var stack = [];
    for (var r = roots.length - 1; r >= 0; r--) stack.push([roots[r], out]);
    while (stack.length) {
      var item = stack.pop(), id = item[0], sink = item[1];
      if (shown(id)) {
        var view = { id: id, children: [] };
        sink.push(view);
        sink = view.children;
      }
      var kids = children.get(id) || [];
      for (var k = kids.length - 1; k >= 0; k--) stack.push([kids[k], sink]);
    }
    return out;
  }

  function ordered(list) {
    return list.slice().sort(function (a, b) { return (activeSet.has(b.id) ? 1 : 0) - (activeSet.has(a.id) ? 1 : 0); });
  }

  function rebuildRows() {
    rows = [];
    rowIndex = new Map();
    var stack = [];
    function pushSiblings(items, indent, top) {
      var single = top && items.length === 1;
      for (var n = items.length - 1; n >= 0; n--) {
        var last = n === items.length - 1;
        if (single) stack.push([items[n], "", indent]);
        else stack.push([items[n], last ? "\u2514\u2500 " : "\u251c\u2500 ", indent + (last ? "   " : "\u2502  ")]);
      }
    }
    pushSiblings(ordered(filtered()), "", true);
    while (stack.length) {
      var item = stack.pop(), view = item[0], connector = item[1], indent = item[2];
      var prefix = connector ? indent.slice(0, -3) + connector : indent;
      while (true) {
        var branching = view.children.length > 1;
        var collapsed = branching && state.collapsed.has(view.id);
        rowIndex.set(view.id, rows.length);
        rows.push({ id: view.id, prefix: prefix, branching: branching, collapsed: collapsed,
                    hidden: collapsed ? countBelow(view) : 0 });
        prefix = indent;
        if (view.children.length === 1) { view = view.children[0]; continue; }
        if (view.children.length > 1 && !collapsed) pushSiblings(ordered(view.children), indent, false);
        break;
      }
    }
    $("#tree-count").textContent = rows.length + " of " + entries.length + " entries shown";
    $("#tree-spacer").style.height = rows.length * ROW + "px";
    drawRows();
  }

  function countBelow(view) {
    var count = 0, stack = view.children.slice();
    while (stack.length) { var v = stack.pop(); count++; for (var c = 0; c < v.children.length; c++) stack.push(v.children[c]); }
    return count;
  }

  var treeEl = $("#tree");
  var spacer = $("#tree-spacer");

  // Deep branches keep their text readable: the guide columns take about a quarter of the
  // sidebar's width; deeper prefixes lose their leftmost columns in steps (rows of one step
  // stay aligned) and "⋯N" stands for the N columns left out (views.fit_prefix in Python).
  var charWidth = 0;
  function prefixColumns() {
    if (!charWidth) {
      var probe = el("span", "row-probe", "0000000000");
      treeEl.appendChild(probe);
      charWidth = probe.getBoundingClientRect().width / 10 || 7.2;
      probe.remove();
    }
    return Math.max(2, Math.floor(treeEl.clientWidth / charWidth / 15));
  }
  function fitPrefix(prefix, columns) {
    var cells = Math.floor(prefix.length / 3);
    columns = Math.max(2, columns);
    if (cells <= columns) return prefix;
    var step = Math.max(1, Math.floor(columns / 2));
    var hidden = Math.ceil((cells - columns + 1) / step) * step;
    var badge = "⋯" + hidden;
    while (badge.length < 3) badge += " ";
    return badge + prefix.slice(3 * hidden);
  }

  function drawRows() {
    var top = treeEl.scrollTop, height = treeEl.clientHeight || 600;
    var first = Math.max(0, Math.floor(top / ROW) - 10);
    var last = Math.min(rows.length, Math.ceil((top + height) / ROW) + 10);
    var frag = document.createDocumentFragment();
    var columns = prefixColumns();
    for (var n = first; n < last; n++) frag.appendChild(rowElement(n, columns));
    spacer.replaceChildren(frag);
  }

  function rowElement(n, columns) {
    var row = rows[n], id = row.id, entry = entries[index.get(id)], kind = kindOf(entry);
    var active = activeSet.has(id);
    var div = el("div", "row" + (active ? " active" : " dim") + (id === state.selected ? " selected" : ""));
    div.style.top = n * ROW + "px";
    div.setAttribute("role", "treeitem");
    div.dataset.id = id;
    div.appendChild(el("span", "prefix", fitPrefix(row.prefix, columns)));
    var toggle = el("span", "toggle", row.branching ? (row.collapsed ? "\u25b8" : "\u25be") : " ");
    if (row.branching) toggle.dataset.toggle = id;
    div.appendChild(toggle);
    div.appendChild(el("span", "marker", id === leafId ? "\u25cf " : active ? "\u2022 " : "  "));
    div.appendChild(el("span", "kind " + kindClass(kind), KIND_NAMES[kind] || kind));
    div.appendChild(el("span", "text", " " + summary(id)));
    var label = labels.get(id);
    if (label) div.appendChild(el("span", "label", "[" + label + "]"));
    if (row.collapsed) div.appendChild(el("span", "meta", "  (+" + row.hidden + ")"));
    // the full text on hover (the row shows what fits)
    div.title = id + " \u00b7 " + (KIND_NAMES[kind] || kind) + (label ? " \u00b7 [" + label + "]" : "") +
      "\n" + oneLine(entryText(entry), 1000);
    return div;
  }

  treeEl.addEventListener("scroll", function () { window.requestAnimationFrame(drawRows); }, { passive: true });
  window.addEventListener("resize", function () { window.requestAnimationFrame(drawRows); });
  treeEl.addEventListener("click", function (event) {
    var target = event.target;
    if (!(target instanceof Element)) return;
    var toggle = target.closest("[data-toggle]");
    if (toggle) {
      var tid = toggle.dataset.toggle;
      if (state.collapsed.has(tid)) state.collapsed.delete(tid); else state.collapsed.add(tid);
      rebuildRows();
      return;
    }
    var row = target.closest(".row");
    if (row && row.dataset.id) select(row.dataset.id, true);
  });
  treeEl.addEventListener("keydown", function (event) {
    var at = rowIndex.has(state.selected) ? rowIndex.get(state.selected) : -1;
    var to = null;
    if (event.key === "ArrowDown") to = Math.min(rows.length - 1, at + 1);
    else if (event.key === "ArrowUp") to = Math.max(0, at - 1);
    else if (event.key === "Home") to = 0;
    else if (event.key === "End") to = rows.length - 1;
    else if (event.key === "PageDown") to = Math.min(rows.length - 1, at + 20);
    else if (event.key === "PageUp") to = Math.max(0, at - 20);
    if (to === null || to < 0 || !rows.length) return;
    event.preventDefault();
    select(rows[to].id, false);
  });

  function scrollRowIntoView(id) {
    var n = rowIndex.get(id);
    if (n === undefined) return;
    var top = n * ROW, view = treeEl.clientHeight || 600;
    if (top < treeEl.scrollTop || top + ROW > treeEl.scrollTop + view) treeEl.scrollTop = Math.max(0, top - view / 3);
  }

  // ---------------------------------------------------------------- markdown (a safe subset, DOM only)
  var SAFE_URL = /^(https?:\/\/|mailto:)[^\s]*$/i;
  var INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^\s*][\s\S]*?)\*\*|(?<![\w])__([^\s_][\s\S]*?)__(?![\w])|~~([\s\S]+?)~~|\*([^\s*][\s\S]*?)\*|(?<![\w])_([^\s_][\s\S]*?)_(?![\w])|\[([^\]\n]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

  function inline(text, parentNode) {
    var rest = text;
    while (rest.length) {
      var m = INLINE.exec(rest);
      if (!m) { parentNode.appendChild(document.createTextNode(rest)); return; }
      if (m.index > 0) parentNode.appendChild(document.createTextNode(rest.slice(0, m.index)));
      if (m[1] !== undefined) {
        var code = m[2];
        if (code.length > 1 && code[0] === " " && code[code.length - 1] === " ") code = code.slice(1, -1);
        parentNode.appendChild(el("code", null, code));
      } else if (m[3] !== undefined || m[4] !== undefined) {
        var strong = el("strong"); inline(m[3] !== undefined ? m[3] : m[4], strong); parentNode.appendChild(strong);
      } else if (m[5] !== undefined) {
        var del = el("del"); inline(m[5], del); parentNode.appendChild(del);
      } else if (m[6] !== undefined || m[7] !== undefined) {
        var em = el("em"); inline(m[6] !== undefined ? m[6] : m[7], em); parentNode.appendChild(em);
      } else if (m[8] !== undefined) {
        parentNode.appendChild(link(m[9], m[8]));
      } else {
        parentNode.appendChild(link(m[10], m[10]));
      }
      rest = rest.slice(m.index + m[0].length);
    }
  }

  function link(url, text) {
    if (!SAFE_URL.test(url)) return document.createTextNode("[" + text + "](" + url + ")");
    var a = el("a", null, text);
    a.setAttribute("href", url);
    a.setAttribute("rel", "noopener noreferrer nofollow");
    a.setAttribute("target", "_blank");
    return a;
  }

  var FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  var HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  var LIST_ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
  var RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;

  function markdown(text) {
    var frag = document.createDocumentFragment();
    blocks(String(text).replace(/\r\n?/g, "\n").split("\n"), frag);
    return frag;
  }

  function blocks(lines, out) {
    var n = 0;
    while (n < lines.length) {
      var line = lines[n], m;
      if (!line.trim()) { n++; continue; }
      if ((m = FENCE.exec(line))) {
        var fenceChar = m[1][0], fenceLen = m[1].length, body = [];
        n++;
        while (n < lines.length) {
          var close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[n]);
          if (close && close[1][0] === fenceChar && close[1].length >= fenceLen) { n++; break; }
          body.push(lines[n]); n++;
        }
        var pre = el("pre"), code = el("code", null, body.join("\n"));
        if (m[2]) code.dataset.lang = m[2];
        pre.appendChild(code); out.appendChild(pre);
        continue;
      }
      if ((m = HEADING.exec(line))) {
        var h = el("h" + Math.min(6, m[1].length + 2)); inline(m[2], h); out.appendChild(h); n++;
        continue;
      }
      if (RULE.test(line)) { out.appendChild(el("hr")); n++; continue; }
      if (/^ {0,3}>/.test(line)) {
        var quoted = [];
        while (n < lines.length && /^ {0,3}>/.test(lines[n])) { quoted.push(lines[n].replace(/^ {0,3}> ?/, "")); n++; }
        var bq = el("blockquote"); blocks(quoted, bq); out.appendChild(bq);
        continue;
      }
      if ((m = LIST_ITEM.exec(line))) {
        var ordered = /\d/.test(m[1][0]);
        var list = el(ordered ? "ol" : "ul");
        if (ordered && parseInt(m[1], 10) !== 1) list.setAttribute("start", String(parseInt(m[1], 10)));
        while (n < lines.length && (m = LIST_ITEM.exec(lines[n])) && /\d/.test(m[1][0]) === ordered) {
          var item = [m[2]]; n++;
          while (n < lines.length && lines[n].trim() && !LIST_ITEM.exec(lines[n]) && /^\s+/.test(lines[n])) { item.push(lines[n].trim()); n++; }
          var li = el("li"); inline(item.join("\n"), li); list.appendChild(li);
        }
        out.appendChild(list);
        continue;
      }
      var para = [];
      while (n < lines.length && lines[n].trim() && !FENCE.exec(lines[n]) && !HEADING.exec(lines[n]) &&
             !/^ {0,3}>/.test(lines[n]) && !(para.length && LIST_ITEM.exec(lines[n]))) { para.push(lines[n]); n++; }
      if (!para.length) { para.push(lines[n]); n++; }
      var p = el("p"); inline(para.join("\n"), p); out.appendChild(p);
    }
  }

  // ---------------------------------------------------------------- the main pane
  var IMAGE_TYPE = /^image\/(png|jpeg|gif|webp|bmp|svg\+xml)$/;
  var BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
  function image(block) {
    var data = str(block.data).replace(/\s+/g, ""), mime = str(block.mimeType);
    if (!IMAGE_TYPE.test(mime) || !BASE64.test(data)) return el("p", "meta", "[image of type " + mime + " not shown]");
    var img = el("img");
    img.alt = "image (" + mime + ")";
    img.setAttribute("src", "data:" + mime + ";base64," + data);
    return img;
  }
  function content(value, body, asMarkdown) {
    if (typeof value === "string") { body.appendChild(asMarkdown ? markdown(value) : el("pre", null, value)); return; }
    (Array.isArray(value) ? value : []).forEach(function (b) {
      if (!b) return;
      if (b.type === "text") body.appendChild(asMarkdown ? markdown(str(b.text)) : el("pre", null, str(b.text)));
      else if (b.type === "image") body.appendChild(image(b));
    });
  }
  function time(entry) {
    var t = str(entry.timestamp);
    return t ? t.slice(0, 19).replace("T", " ") : "";
  }

  function card(entry, cls, who) {
    var div = el("article", "card " + cls);
    div.dataset.id = entry.id;
    var head = el("div", "head");
    head.appendChild(el("span", "who", who));
    head.appendChild(el("code", "id", entry.id));
    head.appendChild(el("span", "time", time(entry)));
    var label = labels.get(entry.id);
    if (label) head.appendChild(el("span", "label", "[" + label + "]"));
    div.appendChild(head);
    var body = el("div", "body");
    div.appendChild(body);
    return { card: div, body: body };
  }

  function toolResultElement(result) {
    var text = contentText(result.content);
    var lines = text.split("\n").length;
    var details = el("details", "tool-result" + (result.isError ? " error" : ""));
    details.open = lines <= 12;
    details.appendChild(el("summary", null, (result.isError ? "Error" : "Result") + " (" + lines + " line" + (lines === 1 ? "" : "s") + ")"));
    var body = el("div", "body");
    (Array.isArray(result.content) ? result.content : [{ type: "text", text: str(result.content) }]).forEach(function (b) {
      if (b && b.type === "text") body.appendChild(el("pre", null, str(b.text)));
      else if (b && b.type === "image") body.appendChild(image(b));
    });
    details.appendChild(body);
    return details;
  }

  // A tool call's arguments as pi shows them: an edit as a diff, a write as the file's text,
  // anything else as JSON.
  function toolArguments(name, args) {
    var a = args && typeof args === "object" ? args : {};
    var edits = Array.isArray(a.edits) ? a.edits : [a];
    var isText = function (e) { return e && typeof e.oldText === "string" && typeof e.newText === "string"; };
    if (name === "edit" && typeof a.path === "string" && edits.length && edits.every(isText)) {
      var box = el("div", "file-change");
      box.appendChild(el("code", "path", a.path));
      edits.forEach(function (e) { box.appendChild(diff(e.oldText, e.newText)); });
      return box;
    }
    if (name === "write" && typeof a.path === "string" && typeof a.content === "string") {
      var written = el("div", "file-change");
      written.appendChild(el("code", "path", a.path));
      written.appendChild(el("pre", "file-text", a.content));
      return written;
    }
    return el("pre", null, JSON.stringify(args === undefined ? {} : args, null, 2));
  }
  function diff(before, after) {
    var old = before.split("\n"), now = after.split("\n"), head = 0, tail = 0;
    while (head < old.length && head < now.length && old[head] === now[head]) head++;
    while (tail < old.length - head && tail < now.length - head &&
           old[old.length - 1 - tail] === now[now.length - 1 - tail]) tail++;
    var pre = el("pre", "diff");
    function line(cls, mark, text) { pre.appendChild(el("span", cls, mark + text + "\n")); }
    old.slice(0, head).forEach(function (t) { line("same", "  ", t); });
    old.slice(head, old.length - tail).forEach(function (t) { line("del", "- ", t); });
    now.slice(head, now.length - tail).forEach(function (t) { line("add", "+ ", t); });
    old.slice(old.length - tail).forEach(function (t) { line("same", "  ", t); });
    return pre;
  }

  function renderEntry(entry, results) {
    var m = entry.message, c;
    if (entry.type === "message" && m && typeof m === "object") {
      if (m.role === "user") { c = card(entry, "user", "User"); content(m.content, c.body, true); return c.card; }
      if (m.role === "assistant") {
        c = card(entry, "assistant", "Assistant" + (m.model ? " \u00b7 " + m.model : ""));
        (Array.isArray(m.content) ? m.content : []).forEach(function (b) {
          if (!b) return;
          if (b.type === "text") c.body.appendChild(markdown(str(b.text)));
          else if (b.type === "thinking") {
            var d = el("details", "thinking");
            d.appendChild(el("summary", null, "Thinking"));
            d.appendChild(el("div", null, str(b.thinking)));
            c.body.appendChild(d);
          } else if (b.type === "toolCall") {
            var call = el("div", "tool-call");
            call.appendChild(el("span", "name", str(b.name)));
            call.appendChild(toolArguments(str(b.name), b.arguments));
            var resultEntry = results.get(str(b.id));
            if (resultEntry) {
              if (resultEntry.message.isError) call.classList.add("error");
              var shownResult = toolResultElement(resultEntry.message);
              shownResult.dataset.id = resultEntry.id;
              call.appendChild(shownResult);
            }
            c.body.appendChild(call);
          }
        });
        if (m.stopReason === "error" || m.stopReason === "aborted")
          c.body.appendChild(el("p", "error", "[" + m.stopReason + "] " + str(m.errorMessage)));
        return c.card;
      }
      if (m.role === "toolResult") {
        if (results.has(str(m.toolCallId))) return null;  // shown under its call
        c = card(entry, "tool", "Tool result \u00b7 " + str(m.toolName));
        c.body.appendChild(toolResultElement(m));
        return c.card;
      }
      if (m.role === "bashExecution") {
        c = card(entry, "tool", "Shell");
        c.body.appendChild(el("pre", null, "$ " + str(m.command) + "\n" + str(m.output)));
        c.body.appendChild(el("p", "meta", "exit code " + String(m.exitCode)));
        return c.card;
      }
      if (m.role === "system") {
        c = card(entry, "system", "System prompt");
        if (contentText(m.content)) c.body.appendChild(markdown(contentText(m.content)));
        var sections = m.sections && typeof m.sections === "object" ? m.sections : {};
        Object.keys(sections).forEach(function (name) {
          if (sections[name] === null) c.body.appendChild(el("p", "meta", "Section " + name + " removed"));
          else {
            var d = el("details", "section");
            d.appendChild(el("summary", null, "Section " + name));
            d.appendChild(markdown(str(sections[name])));
            c.body.appendChild(d);
          }
        });
        [["toolsAdded", "Tools added: "], ["toolsRemoved", "Tools removed: "]].forEach(function (pair) {
          var tools = Array.isArray(m[pair[0]]) ? m[pair[0]] : [];
          if (tools.length) c.body.appendChild(el("p", "meta", pair[1] + tools.map(function (t) { return str(t && t.name); }).join(", ")));
        });
        return c.card;
      }
      c = card(entry, "tool", "Message \u00b7 " + str(m.role));
      content(m.content, c.body, true);
      return c.card;
    }
    switch (entry.type) {
      case "compaction":
        c = card(entry, "compaction", "Compaction");
        c.body.appendChild(el("p", "meta", (entry.tokensBefore || 0).toLocaleString() + " tokens summarized; the context continues from this summary."));
        c.body.appendChild(markdown(str(entry.summary)));
        return c.card;
      case "branch_summary":
        c = card(entry, "branch-summary", "Branch summary");
        c.body.appendChild(el("p", "meta", "Summary of the branch left at " + str(entry.fromId) + "."));
        c.body.appendChild(markdown(str(entry.summary)));
        return c.card;
      case "custom_message":
        c = card(entry, "custom", "Extension message \u00b7 " + str(entry.customType));
        var shown = DATA.rendered && DATA.rendered[entry.id];
        if (shown && shown.format === "markdown") c.body.appendChild(markdown(String(shown.text)));
        else if (shown) c.body.appendChild(el("pre", "rendered", String(shown.text)));
        else content(entry.content, c.body, true);
        return c.card;
      case "label": case "custom": case "model_change": case "thinking_level_change": case "session_info":
      case "context_edit": case "usage":
        c = card(entry, "note", (KIND_NAMES[entry.type] || entry.type) + ": " + oneLine(entryText(entry), 200));
        return c.card;
      default:
        c = card(entry, "note", "entry of type " + str(entry.type));
        return c.card;
    }
  }

  var messagesEl = $("#messages");
  var shownPath = [];
  var firstRendered = 0;
  var pathResults = new Map();

  // The context_edit that applies to each entry of the shown path, as pi projects a context: the
  // latest edit of each target among the context's entries (after the latest compaction: the
  // compaction, its kept range and what follows), the target among them too.
  var pathEdits = new Map();
  function contextEdits(path) {
    var edits = new Map(), start = 0, compaction = -1;
    for (var n = path.length - 1; n >= 0; n--) {
      if (entries[index.get(path[n])].type === "compaction") { compaction = n; break; }
    }
    var inContext = new Set(path);
    if (compaction >= 0) {
      var kept = path.indexOf(str(entries[index.get(path[compaction])].firstKeptEntryId));
      start = kept >= 0 && kept < compaction ? kept : compaction;
      inContext = new Set(path.slice(start));
    }
    path.forEach(function (pid) {
      var e = entries[index.get(pid)];
      if (e.type === "context_edit" && inContext.has(pid) && inContext.has(str(e.targetId)))
        edits.set(str(e.targetId), e);
    });
    return edits;
  }
  function markEdit(node, id) {
    var edit = pathEdits.get(id);
    if (!edit || !node || !node.classList || !node.classList.contains("card")) return;
    var omitted = !(edit.replacement && typeof edit.replacement === "object");
    node.classList.add(omitted ? "omitted" : "edited");
    node.querySelector(".head").appendChild(el("span", "edit-mark", omitted
      ? "omitted from the model's context (edit " + edit.id + ")"
      : "edited for the model (edit " + edit.id + ")"));
    if (!omitted) {
      var seen = el("div", "model-sees");
      seen.appendChild(el("p", "meta", "The model sees instead:"));
      content(edit.replacement.content, seen, true);
      node.appendChild(seen);
    }
  }

  function showPath(id) {
    shownPath = pathTo(id);
    pathEdits = contextEdits(shownPath);
    pathResults = new Map();
    var calls = new Set();
    shownPath.forEach(function (pid) {
      var m = entries[index.get(pid)].message;
      if (entries[index.get(pid)].type !== "message" || !m) return;
      if (m.role === "assistant" && Array.isArray(m.content))
        m.content.forEach(function (b) { if (b && b.type === "toolCall") calls.add(str(b.id)); });
      else if (m.role === "toolResult" && calls.has(str(m.toolCallId))) pathResults.set(str(m.toolCallId), entries[index.get(pid)]);
    });
    messagesEl.replaceChildren();
    firstRendered = Math.max(0, shownPath.length - CHUNK);
    appendRange(firstRendered, shownPath.length, false);
    updateMore();
    var info = "Path to " + id + " \u00b7 " + shownPath.length + " entr" + (shownPath.length === 1 ? "y" : "ies");
    info += id === leafId ? " \u00b7 the session's leaf" : " \u00b7 not the session's leaf";
    $("#path-info").textContent = info;
    var target = messagesEl.querySelector('[data-id="' + cssEscape(id) + '"]');
    if (target) {
      target.classList.add("target");
      if (target.tagName === "DETAILS") target.open = true;  // a tool result under its call
      target.scrollIntoView({ block: "start" });
    }
    else messagesEl.scrollTop = messagesEl.scrollHeight;
  }

  function cssEscape(value) { return window.CSS && CSS.escape ? CSS.escape(value) : value.replace(/["\\]/g, "\\$&"); }

  function appendRange(from, to, before) {
    var frag = document.createDocumentFragment();
    for (var n = from; n < to; n++) {
      var node = renderEntry(entries[index.get(shownPath[n])], pathResults);
      markEdit(node, shownPath[n]);
      if (node) frag.appendChild(node);
    }
    if (before) {
      var anchor = messagesEl.querySelector(".card");
      var oldHeight = messagesEl.scrollHeight, oldTop = messagesEl.scrollTop;
      messagesEl.insertBefore(frag, anchor);
      messagesEl.scrollTop = oldTop + (messagesEl.scrollHeight - oldHeight);
    } else messagesEl.appendChild(frag);
  }

  var moreButton = null;
  function updateMore() {
    if (moreButton) { moreButton.remove(); moreButton = null; }
    if (firstRendered <= 0) return;
    moreButton = el("button", "more", "Show " + Math.min(CHUNK, firstRendered) + " earlier entries (" + firstRendered + " not shown)");
    moreButton.type = "button";
    moreButton.id = "show-earlier";
    moreButton.addEventListener("click", showEarlier);
    messagesEl.insertBefore(moreButton, messagesEl.firstChild);
    if (observer) observer.observe(moreButton);
  }
  function showEarlier() {
    var from = Math.max(0, firstRendered - CHUNK);
    var to = firstRendered;
    firstRendered = from;
    if (moreButton) { moreButton.remove(); moreButton = null; }
    appendRange(from, to, true);
    updateMore();
  }
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (items) {
    items.forEach(function (item) { if (item.isIntersecting && item.target === moreButton && messagesEl.scrollTop > 0) showEarlier(); });
  }, { root: messagesEl }) : null;

  // ---------------------------------------------------------------- selection, filters, sidebar
  var narrow = window.matchMedia("(max-width: 760px)");
  function select(id, fromClick) {
    if (!index.has(id)) return;
    var previous = state.selected;
    state.selected = id;
    if (!rowIndex.has(id) || (previous !== id && !shown(previous))) rebuildRows(); else drawRows();
    scrollRowIntoView(id);
    showPath(id);
    if (fromClick && narrow.matches) $("#app").classList.remove("sidebar-open");
    if (history.replaceState) history.replaceState(null, "", "#" + encodeURIComponent(id));
  }

  $("#back-to-leaf").addEventListener("click", function () { if (leafId) select(leafId, true); });
  $("#filter").addEventListener("change", function (event) {
    state.mode = event.target.value;
    rebuildRows();
    scrollRowIntoView(state.selected);
  });
  var searchTimer = 0;
  $("#search").addEventListener("input", function (event) {
    window.clearTimeout(searchTimer);
    var value = event.target.value;
    searchTimer = window.setTimeout(function () {
      state.terms = value.toLowerCase().split(/\s+/).filter(Boolean);
      rebuildRows();
      treeEl.scrollTop = 0;
      drawRows();
    }, 120);
  });
  // the sidebar's width: drag the handle, or focus it and use the arrow keys
  var sidebarEl = $("#sidebar"), resizer = $("#sidebar-resizer");
  function setSidebarWidth(px) {
    var max = Math.max(260, window.innerWidth * 0.85);
    var width = Math.round(Math.min(max, Math.max(240, px)));
    sidebarEl.style.width = width + "px";
    resizer.setAttribute("aria-valuenow", String(width));
    drawRows();
  }
  resizer.addEventListener("pointerdown", function (event) {
    event.preventDefault();
    resizer.setPointerCapture(event.pointerId);
    resizer.classList.add("dragging");
  });
  resizer.addEventListener("pointermove", function (event) {
    if (!resizer.hasPointerCapture(event.pointerId)) return;
    setSidebarWidth(event.clientX - sidebarEl.getBoundingClientRect().left);
  });
  resizer.addEventListener("pointerup", function (event) {
    if (resizer.hasPointerCapture(event.pointerId)) resizer.releasePointerCapture(event.pointerId);
    resizer.classList.remove("dragging");
  });
  resizer.addEventListener("keydown", function (event) {
    var step = event.shiftKey ? 80 : 20;
    var now = sidebarEl.getBoundingClientRect().width;
    if (event.key === "ArrowLeft") setSidebarWidth(now - step);
    else if (event.key === "ArrowRight") setSidebarWidth(now + step);
    else return;
    event.preventDefault();
  });

  $("#sidebar-toggle").addEventListener("click", function () {
    var app = $("#app");
    if (narrow.matches) app.classList.toggle("sidebar-open");
    else app.classList.toggle("sidebar-hidden");
    drawRows();
  });

  // ---------------------------------------------------------------- operations panel (optional)
  function renderOperations(optree) {
    var section = $("#operations");
    section.hidden = false;
    section.appendChild(el("h3", null, "Operations"));
    (optree.roots || []).forEach(function (run) { section.appendChild(runElement(run, true)); });
  }
  function totals(t) {
    if (!t) return "";
    return (t.llmCalls || 0) + " LLM calls \u00b7 " + (t.toolsRun || 0) + " tools \u00b7 " + (t.tokensIn || 0) + " in / " +
      (t.tokensOut || 0) + " out tokens \u00b7 $" + str(String(t.costUsd === undefined ? "0" : t.costUsd));
  }
  function runElement(run, open) {
    var details = el("details", "run");
    details.open = !!open;
    details.appendChild(el("summary", null, (str(run.title) || str(run.runId)) + " \u00b7 " +
      (run.success === false ? "failed" : run.unfinished ? "unfinished" : str(run.latestStatus) || "ok") + " \u00b7 " + totals(run.rollup)));
    (run.turns || []).forEach(function (turn) {
      var list = el("ul");
      (turn.ops || []).forEach(function (op) {
        var attrs = op.attributes || {};
        var li = el("li", null, str(op.path) + " " + str(op.kind) + " " + str(attrs.name || attrs.model || "") + " \u00b7 " +
          (str(op.status) || (op.unfinished ? "unfinished" : "open")) + (op.durationMs !== undefined && op.durationMs !== null ? " \u00b7 " + op.durationMs + " ms" : ""));
        if (op.childRun) li.appendChild(runElement(op.childRun, false));
        list.appendChild(li);
      });
      details.appendChild(list);
    });
    return details;
  }

  // ---------------------------------------------------------------- start
  var header = DATA.header || {};
  $("#session-title").textContent = DATA.name || ("Session " + str(header.id));
  $("#session-meta").textContent = str(header.cwd) + " \u00b7 " + entries.length + " entries \u00b7 leaf " + (leafId || "none");
  $("#filter").value = state.mode;
  if (DATA.optree) renderOperations(DATA.optree);
  var start = leafId;
  if (location.hash.length > 1) {
    try { var wanted = decodeURIComponent(location.hash.slice(1)); if (index.has(wanted)) start = wanted; } catch (e) { /* keep the leaf */ }
  }
  state.selected = start;
  rebuildRows();
  if (start) { scrollRowIntoView(start); showPath(start); }
  else $("#path-info").textContent = "This session has no entries.";
  $("#app").classList.remove("loading");
  window.sessiontreeReady = performance.now();
  document.documentElement.dataset.ready = "1";
})();
