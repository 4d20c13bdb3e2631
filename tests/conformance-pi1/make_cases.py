"""Writes the hand-written input files of tests/conformance-pi1 (run once; the files are the data)."""
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
T0 = 1764100000000
def iso(k): 
    import datetime as dt
    ms = T0 + k * 1000
    return dt.datetime.fromtimestamp(ms/1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms%1000:03d}Z"
class W:
    def __init__(self, name, desc):
        self.name, self.desc, self.lines, self.k, self.leaf = name, desc, [], 0, None
        self.lines.append({"type":"session","version":3,"id":"0199b1a0-0000-7000-8000-00000000000" + str(len(name) % 10),"timestamp":iso(0),"cwd":"/home/dev/proj"})
    def add(self, typ, body, parent="LEAF", id=None, payload_first=False):
        self.k += 1
        id = id or f"{self.k:08x}"
        p = self.leaf if parent == "LEAF" else parent
        env = {"id": id, "parentId": p, "timestamp": iso(self.k)}
        e = {"type": typ, **body, **env} if payload_first else {"type": typ, **env, **body}
        self.lines.append(e); self.leaf = id; return id
    def msg(self, m, **kw): return self.add("message", {"message": m}, **kw)
    def user(self, text, **kw): return self.msg({"role":"user","content":[{"type":"text","text":text}],"timestamp":T0+self.k*1000+1}, **kw)
    def asst(self, text, model="claude-sonnet-4-5", **kw):
        return self.msg({"role":"assistant","content":[{"type":"text","text":text}],"api":"anthropic-messages","provider":"anthropic","model":model,"usage":USAGE,"stopReason":"stop","timestamp":T0+self.k*1000+1}, **kw)
    def tool(self, call, text, **kw): return self.msg({"role":"toolResult","toolCallId":call,"toolName":"bash","content":[{"type":"text","text":text}],"isError":False,"timestamp":T0+self.k*1000+1}, **kw)
    def system(self, **fields): return self.msg({"role":"system","content":fields.pop("content",""), **fields, "timestamp":T0+self.k*1000+1})
    def edit(self, target, replacement, **kw): return self.add("context_edit", {"targetId": target, "replacement": replacement}, **kw)
    def write(self):
        from sessiontree._json import dumps
        (out / f"{self.name}.jsonl").write_bytes(b"".join(dumps(l) + b"\n" for l in self.lines))
        (out / f"{self.name}.description.txt").write_text(self.desc + "\n")
USAGE = {"input":10,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":30,"cost":{"input":0.00003,"output":0.0003,"cacheRead":0,"cacheWrite":0,"total":0.00033}}
TOOLS = [{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
         {"name":"bash","description":"Run a command","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}]

# 1. the example: a password redacted, an assistant message omitted
w = W("redact-and-omit", "The issue's example: one context_edit replaces the password in an earlier user message (string replacement), one omits an assistant message (replacement null).")
w.system(sections={"preamble":"You are a coding assistant.","cwd":"<cwd>/home/dev/proj</cwd>"}, toolsAdded=TOOLS)
u = w.user("Log in with password hunter2 please")
a = w.asst("Logged in with hunter2.")
w.user("Thanks")
w.asst("You are welcome.")
w.edit(u, {"content": "Log in with password [redacted] please"})
w.edit(a, None)
w.user("What next?")
w.write()

# 2. system messages patched, tools added and removed, content appended
w = W("system-messages", "A leading system message with sections and tools, then patches: a section replaced, one removed (null), an integer-like section name, tools added, a tool removed and re-added, extra content; a system message with null content and one without content.")
w.system(content="Base prompt.", sections={"preamble":"P1","tools":"T1","skills":"S1"}, toolsAdded=TOOLS)
w.user("hi")
w.asst("hello")
w.system(sections={"skills":None,"tools":"T2","10":"ten","2":"two"}, toolsRemoved=[{"name":"read"}])
w.user("more")
w.system(content="Also be brief.", toolsAdded=[{"name":"read","description":"Read v2","parameters":{}}, {"name":"grep","description":"Search","parameters":{}}])
w.asst("ok")
w.msg({"role":"system","content":None,"sections":{"2":None},"timestamp":T0+99})
w.msg({"role":"system","sections":{"date":"today"},"toolsRemoved":[{"name":"bash"},{"name":"nope"}],"timestamp":T0+100})
w.user("done?")
w.write()

# 3. compaction checkpoint, system messages in the kept range dropped, older compaction in the kept range
w = W("compaction-checkpoint", "Two compactions: the later one keeps from an entry before the earlier one, so the earlier compaction sits in the kept range (it emits nothing); system messages in the kept range are dropped in favour of the later compaction's systemMessage checkpoint; a system message after the compaction stays; usage on compaction and branch summary.")
s0 = w.system(sections={"preamble":"P"}, toolsAdded=TOOLS)
w.user("q1"); w.asst("a1")
k = w.user("q2")
w.system(sections={"preamble":"P2"})
w.asst("a2")
w.add("compaction", {"summary":"first summary","firstKeptEntryId":k,"tokensBefore":1000,"details":{"readFiles":[],"modifiedFiles":[]},"fromHook":False,
   "systemMessage":{"role":"system","content":"","sections":{"preamble":"P2"},"toolsAdded":TOOLS,"timestamp":T0+7000}})
w.user("q3")
w.system(sections={"extra":"E"})
w.asst("a3")
w.add("compaction", {"summary":"second summary","firstKeptEntryId":k,"tokensBefore":2000,"details":{"readFiles":["a.ts"],"modifiedFiles":[]},"usage":USAGE,"fromHook":False,
   "systemMessage":{"role":"system","content":"","sections":{"preamble":"P2","extra":"E"},"toolsAdded":TOOLS,"timestamp":T0+11000}})
w.system(sections={"late":"L"})
w.user("q4")
w.add("branch_summary", {"fromId":"00000001","summary":"went elsewhere","details":{"readFiles":[],"modifiedFiles":[]},"usage":USAGE,"fromHook":False}, parent=k)
w.user("q5")
w.write()

# 4. edits: which count
w = W("edit-rules", "Edits that count and edits that do not: the latest of two edits of one target wins; an edit of an entry before the compaction's kept range does not count; edits of a model change, a system message, a branch summary, an unknown id and an entry of another branch; string replacements of assistant and tool result become a text block, of a custom message stay a string; an array replacement; a replacement without content (the content key goes); an edit without a replacement key (of an entry outside the context: pi 1.5.2 fails on one inside it).")
w.add("model_change", {"provider":"openai","modelId":"gpt-5"})
w.add("thinking_level_change", {"thinkingLevel":"high"})
early = w.user("early secret")
w.asst("early answer")
keep = w.user("kept question")
a = w.msg({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"api":"openai-responses","provider":"openai","model":"gpt-5","usage":USAGE,"stopReason":"toolUse","timestamp":T0+6001})
t = w.tool("c1", "secret-file.txt")
cm = w.add("custom_message", {"customType":"note","content":"custom text","display":True,"details":{"x":1}}, payload_first=True)
mc = w.add("model_change", {"provider":"anthropic","modelId":"claude-sonnet-4-5"})
sys1 = w.system(sections={"a":"b"})
w.add("compaction", {"summary":"compacted","firstKeptEntryId":keep,"tokensBefore":500,"fromHook":False})
w.edit(early, None)
w.edit(keep, {"content":"first replacement"})
w.edit(keep, {"content":[{"type":"text","text":"second replacement"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]})
w.edit(a, {"content":"tool call hidden"})
w.edit(t, {"content":"[redacted]"})
w.edit(cm, {"content":"custom replaced"})
w.edit(mc, None)
w.edit(sys1, None)
w.edit("ffffffff", None)
w.edit(keep, {"note":"no content"}, )
other = w.user("on the side", parent=keep)
w.branch_point = other
w.add("label", {"targetId": keep, "label": "kept"})
tip = w.user("back on the main line", parent=w.lines[-3]["id"])
w.edit(other, None)
w.add("context_edit", {"targetId": early})
w.add("usage", {"kind":"cache_warm","provider":"anthropic","model":"claude-sonnet-4-5","usage":USAGE})
w.add("usage", {"kind":"something-new","provider":"anthropic","model":"claude-sonnet-4-5","usage":USAGE,"note":"unknown kind"})
w.asst("final")
w.write()

# 5. null and missing contents, custom message without content, odd replacements
w = W("null-contents", "Messages whose content is null or missing (user, assistant, tool result, system: pi 1.5.2 gives [] or \"\"; bashExecution and custom roles stay as stored), a custom_message without content and one with null content ([]), an edit of a message with missing content, an edit whose replacement is not an object, and an edit of a compaction (null: its checkpoint and summary go).")
w.msg({"role":"system","timestamp":T0})
w.msg({"role":"user","content":None,"timestamp":T0+1})
w.msg({"role":"assistant","api":"x","provider":"p","model":"m","usage":USAGE,"stopReason":"stop","timestamp":T0+2})
w.msg({"role":"toolResult","toolCallId":"c","toolName":"t","content":None,"isError":False,"timestamp":T0+3})
w.msg({"role":"bashExecution","command":"ls","output":"x","exitCode":0,"cancelled":False,"truncated":False,"timestamp":T0+4})
w.add("custom_message", {"customType":"a","display":False}, payload_first=True)
w.add("custom_message", {"customType":"b","content":None,"display":True,"details":{"d":1}}, payload_first=True)
m = w.msg({"role":"user","timestamp":T0+5})
w.edit(m, {"content":"filled in"})
u2 = w.user("will be edited oddly")
w.edit(u2, "not an object")
comp = w.add("compaction", {"summary":"s","firstKeptEntryId":m,"tokensBefore":1,"systemMessage":{"role":"system","content":"","sections":{"x":"y"},"timestamp":T0+6}})
w.user("after compaction")
w.edit(comp, None)
w.user("end")
w.write()

# 6. multiple roots, labels, usage hidden only in pi's UI
w = W("roots-labels-usage", "Two roots (a reset leaf), labels set and cleared, usage entries in the tree (pi's getTree lists them; only its TUI hides them), a context edit on the second root, sibling order by timestamp.")
w.system(content="root one prompt", toolsAdded=TOOLS[:1])
r1 = w.user("first root")
w.add("usage", {"kind":"cache_warm","provider":"anthropic","model":"claude-sonnet-4-5","usage":USAGE})
w.asst("one")
w.add("label", {"targetId": r1, "label": "start"})
w.leaf = None
w.system(content="root two prompt")
r2 = w.user("second root")
w.asst("two")
w.edit(r2, {"content": "second root (edited)"})
w.add("label", {"targetId": r1})
w.add("usage", {"kind":"title","provider":"openai","model":"gpt-5","usage":USAGE,"note":"session title"})
w.write()
