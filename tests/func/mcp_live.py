# The stateful tools of `nsbox mcp` (sandbox_*), driven over stdio as a
# client would, with the real server, monitor and sandboxes.
# Usage: python3 mcp_live.py SCENARIO [OPTIONS] -- NSBOX [MCP ARGS...]
#   main: create, run_code state (python, node), files round trip, listing,
#         commands, hostile names and paths, the bounds, stop, and stdin EOF
#   idle: the idle timeout ends a sandbox by itself and frees its slot
#   off:  --max-sandboxes 0 serves no sandbox_* tool
# Options: --langs python,node (what the image has), --foreign NAME (a
# sandbox that is not this server's: refused, untouched), --host-file PATH
# (a host path a symlink inside points at: never read or written), --png
# matplotlib|none.
# Prints "ok - ..."/"not ok - ..." lines and "# SKIP ..." notes; exits 1 on
# a failure.
import base64, json, os, re, subprocess, sys, time, zlib, struct

args = sys.argv[1:]
scenario = args.pop(0)
langs, foreign, host_file, mpl = [], [], None, "none"
while args and args[0] != "--":
    o = args.pop(0)
    if o == "--langs":
        langs = [x for x in args.pop(0).split(",") if x]
    elif o == "--foreign":
        foreign.append(args.pop(0))
    elif o == "--host-file":
        host_file = args.pop(0)
    elif o == "--png":
        mpl = args.pop(0)
    else:
        sys.exit("unknown option " + o)
cmd = args[1:]
nsbox = cmd[0]
failed = 0


def check(what, ok, detail=""):
    global failed
    failed += not ok
    print(("ok" if ok else "not ok") + " - " + what + ("" if ok else ": " + str(detail)[:600]), flush=True)


class Server:
    def __init__(self, extra=()):
        self.p = subprocess.Popen(cmd + list(extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.n = 0
        a = self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "mcp-live", "version": "0"}})
        assert "result" in a, a
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.prefix = "mcp-%d" % self.p.pid

    def send(self, m):
        self.p.stdin.write((json.dumps(m) + "\n").encode())
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        line = self.p.stdout.readline()
        a = json.loads(line) if line else {"eof": True}
        assert a.get("id") == self.n or "eof" in a, a
        return a

    def call(self, name, **arguments):
        a = self.rpc("tools/call", {"name": name, "arguments": arguments})
        return a.get("result", a)

    def start_call(self, name, **arguments):
        """Send a call without waiting for its answer; its id."""
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})
        return self.n

    def answers(self, k):
        """The next k answers, by id."""
        got = {}
        for _ in range(k):
            line = self.p.stdout.readline()
            if not line:
                break
            a = json.loads(line)
            got[a.get("id")] = a.get("result", a)
        return got

    def close(self):
        self.p.stdin.close()
        rest = self.p.stdout.read()
        return self.p.wait(), rest


def text(r):
    return "".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")


def refused(r, *words):
    """A tool error (isError) whose text says all of `words`."""
    return r.get("isError") is True and all(w in text(r) for w in words)


def ps():
    out = subprocess.run([nsbox, "ps", "--json"], capture_output=True, text=True)
    return {s["name"]: s for s in json.loads(out.stdout or "[]")}


def procs_named(name):
    """Host processes (a monitor, the sandbox's) whose command line names it."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            n += name.encode() in argv
    return n


def run_ok(r):
    s = r.get("structuredContent") or {}
    return r.get("isError") is False and s.get("exit_code") == 0


def sh(srv, sb, command):
    r = srv.call("sandbox_run_command", sandbox=sb, command=command)
    return (r.get("structuredContent") or {}).get("stdout"), r


def read_bytes(r):
    """A read_file answer's bytes: text, an image or a base64 resource."""
    c = r.get("content", [{}])[0]
    if c.get("type") == "text":
        return c["text"].encode()
    if c.get("type") == "image":
        return base64.b64decode(c["data"])
    if c.get("type") == "resource":
        return base64.b64decode(c["resource"]["blob"])
    return None


def a_png():
    """A valid 2x2 PNG made here (no imaging library needed)."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    raw = b"".join(b"\0" + bytes([255, 0, 0] * 2) for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    srv = Server(["--max-sandboxes", "2"])
    tools = [t["name"] for t in srv.rpc("tools/list", {})["result"]["tools"]]
    check("tools/list has the stateful tools", all(t in tools for t in (
        "sandbox_create", "sandbox_run_code", "sandbox_run_command", "sandbox_write_file", "sandbox_read_file",
        "sandbox_list_files", "sandbox_stop")), tools)
    r = srv.call("sandbox_create")
    sb = (r.get("structuredContent") or {}).get("sandbox", "")
    check("sandbox_create names the sandbox PREFIX-N after the server's pid",
          re.fullmatch(re.escape(srv.prefix) + r"-[0-9]+", sb) is not None and text(r) == sb, r)
    check("...and it runs: nsbox ps lists it", sb in ps(), ps())

    # Code whose state persists, a context per language.
    for lang, first, second, want in (("python", "x = 41", "x + 1", "42"),
                                      ("node", "var y = 5", "y * 2", "10")):
        if lang not in langs:
            print("# SKIP run_code %s: the image has no %s" % (lang, lang), flush=True)
            continue
        a = srv.call("sandbox_run_code", sandbox=sb, code=first, language=lang)
        b = srv.call("sandbox_run_code", sandbox=sb, code=second, language=lang)
        check("run_code %s: a variable persists between calls" % lang,
              run_ok(a) and run_ok(b) and b["structuredContent"]["stdout"].strip() == want and
              b["structuredContent"]["context"]["cell"] == 2, (a, b))
    if "python" in langs and "node" in langs:
        r = srv.call("sandbox_run_code", sandbox=sb, code="typeof x", language="node")
        check("...each language its own context", run_ok(r) and r["structuredContent"]["stdout"].strip() in ("undefined", "'undefined'"), r)
    if "python" in langs:
        r = srv.call("sandbox_run_code", sandbox=sb, code="x")
        check("language defaults to python", run_ok(r) and r["structuredContent"]["stdout"].strip() == "41", r)
        # The display protocol: an object with _repr_png_ comes back as an
        # MCP image, its bytes exact.
        png = a_png()
        code = ("class P:\n    def _repr_png_(self):\n        import base64\n"
                "        return base64.b64decode(%r)\nP()" % base64.b64encode(png).decode())
        r = srv.call("sandbox_run_code", sandbox=sb, code=code)
        imgs = [c for c in r.get("content", []) if c.get("type") == "image"]
        check("a cell's PNG (display protocol) is MCP image content, bytes exact",
              run_ok(r) and len(imgs) == 1 and imgs[0]["mimeType"] == "image/png" and
              base64.b64decode(imgs[0]["data"]) == png, r)
        if mpl == "matplotlib":
            r = srv.call("sandbox_run_code", sandbox=sb, code="import matplotlib.pyplot as plt\n"
                         "plt.plot([1, 2, 3], [1, 4, 9])\nplt.title('chart')\nNone")
            imgs = [c for c in r.get("content", []) if c.get("type") == "image"]
            check("a matplotlib chart is MCP image content (a PNG)",
                  run_ok(r) and len(imgs) == 1 and base64.b64decode(imgs[0]["data"])[:8] == b"\x89PNG\r\n\x1a\n", r)
        else:
            print("# SKIP matplotlib chart as image content: " + mpl, flush=True)

    # Files: binary-exact through base64, text as text, a PNG as an image.
    blob = bytes(range(256)) * 64 + b"\0\r\n\xff\xfe"
    w = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/data.bin",
                 content=base64.b64encode(blob).decode(), encoding="base64")
    r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/data.bin")
    check("write_file/read_file: binary round trip, exact (base64 resource)",
          w.get("isError") is False and r["content"][0]["type"] == "resource" and read_bytes(r) == blob, (w, r))
    out, _ = sh(srv, sb, "wc -c < /tmp/data.bin")
    check("...the file inside has exactly those bytes", out is not None and out.strip() == str(len(blob)), out)
    words = "héllo ✓ wörld\nline two\n"
    w = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/notes.txt", content=words)
    r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/notes.txt")
    check("write_file/read_file: UTF-8 text round trip",
          w.get("isError") is False and r["content"][0] == {"type": "text", "text": words}, (w, r))
    w = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/img.png", content=base64.b64encode(a_png()).decode(),
                 encoding="base64")
    r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/img.png")
    check("read_file of a PNG: image content, exact", r["content"][0].get("type") == "image" and
          r["content"][0].get("mimeType") == "image/png" and read_bytes(r) == a_png(), r)
    r = srv.call("sandbox_list_files", sandbox=sb, path="/tmp")
    ent = {e["name"]: e for e in (r.get("structuredContent") or {}).get("entries", [])}
    check("list_files shows the file, its size and type", ent.get("data.bin", {}).get("size") == len(blob) and
          ent["data.bin"].get("type") == "f" and "data.bin\t%d\n" % len(blob) in text(r), r)
    r = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/x", content="not base64!", encoding="base64")
    check("write_file: invalid base64 is refused", refused(r, "not base64"), r)

    # Commands: output, status, and state shared with the files and code.
    out, r = sh(srv, sb, "cat /tmp/data.bin | wc -c; echo err >&2; echo made > /tmp/by-cmd; exit 3")
    s = r.get("structuredContent") or {}
    check("run_command: stdout, stderr and exit status", out == "%d\n" % len(blob) and s.get("stderr") == "err\n" and
          s.get("exit_code") == 3 and "exit status 3" in text(r), r)
    r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/by-cmd")
    check("...what it wrote is there for read_file", read_bytes(r) == b"made\n", r)

    # The bound of a read (1 MiB): a file at it is read whole, one past it
    # refused, saying so; nothing silently cut.
    sh(srv, sb, "head -c 1048576 /dev/zero > /tmp/at; head -c 1048577 /dev/zero > /tmp/over; "
                "head -c 3000000 /dev/urandom > /tmp/far")
    r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/at")
    b = read_bytes(r)
    check("read_file of a file of exactly 1 MiB: whole", r.get("isError") is False and b == b"\0" * (1 << 20),
          (r.get("isError"), text(r), b and len(b)))
    for f in ("over", "far"):
        r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/" + f)
        check("read_file of a file over 1 MiB (%s) is refused, saying the bound" % f,
              refused(r, "larger than 1 MiB"), (r.get("isError"), text(r)[:300], str(r)[:300]))
    r = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/big", content="a" * ((1 << 20) + 1))
    check("write_file over 1 MiB is refused", refused(r, "larger than 1 MiB"), r)
    out, _ = sh(srv, sb, "test -e /tmp/big && echo there || echo absent")
    check("...and nothing was written", out == "absent\n", out)

    # Hostile paths: resolved in the sandbox's own root, never the host's.
    host_passwd = open("/etc/passwd", "rb").read()
    inside, _ = sh(srv, sb, "cat /etc/passwd")
    r = srv.call("sandbox_read_file", sandbox=sb, path="../../../../../../etc/passwd")
    check("read_file ../../etc/passwd reads the sandbox's passwd, not the host's",
          inside and read_bytes(r) == inside.encode() and read_bytes(r) != host_passwd, (r, inside))
    r = srv.call("sandbox_read_file", sandbox=sb, path="../../etc/shadow")
    shadow, rs = sh(srv, sb, "cat /etc/shadow")
    check("read_file ../../etc/shadow: what the sandbox's user sees of its own shadow",
          (r.get("isError") is True and not run_ok(rs)) or (run_ok(rs) and read_bytes(r) == shadow.encode()), (r, rs))
    if host_file:
        sh(srv, sb, "ln -s %s /tmp/hostlink; ln -s %s /tmp/hostdir; ln -s / /tmp/rootlink" %
           (host_file, os.path.dirname(host_file)))
        before = open(host_file, "rb").read()
        r = srv.call("sandbox_read_file", sandbox=sb, path="/tmp/hostlink")
        check("a symlink inside to a host path: read_file does not read the host file",
              r.get("isError") is True and before not in (read_bytes(r) or b"x" * 9), r)
        r = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/hostlink", content="pwned")
        w2 = srv.call("sandbox_write_file", sandbox=sb, path="/tmp/hostdir/" + os.path.basename(host_file) + ".new",
                      content="pwned")
        check("...write_file through it leaves the host untouched", open(host_file, "rb").read() == before and
              not os.path.exists(host_file + ".new"), (r, w2))
        r = srv.call("sandbox_list_files", sandbox=sb, path="/tmp/rootlink")
        names = [e["name"] for e in (r.get("structuredContent") or {}).get("entries", [])]
        inside_root, _ = sh(srv, sb, "ls -a /")
        check("...list_files through a symlink to / lists the sandbox's root",
              sorted(names) == sorted(n for n in inside_root.split() if n not in (".", "..")), (names, inside_root))
    r = srv.call("sandbox_write_file", sandbox=sb, path="/etc/passwd", content="x")
    out, _ = sh(srv, sb, "cat /etc/passwd")
    check("write_file where the sandbox's user may not write is refused", refused(r) and out == inside, r)

    # Names that are not this server's: refused, nothing done.
    srv2 = Server()
    r2 = srv2.call("sandbox_create")
    other = (r2.get("structuredContent") or {}).get("sandbox", "")
    check("a second server makes its own sandbox", other.startswith(srv2.prefix + "-") and other in ps(), r2)
    sh(srv2, other, "echo theirs > /tmp/mine")
    for name in [other] + foreign + ["nope", "../" + sb, sb + "/../" + sb, sb + "/x", "./" + sb, sb + "\n",
                 srv.prefix + "-99", "", "/"]:
        calls = [("sandbox_run_command", {"command": "echo pwned > /tmp/mine"}),
                 ("sandbox_run_code", {"code": "open('/tmp/mine', 'w').write('pwned')"}),
                 ("sandbox_write_file", {"path": "/tmp/mine", "content": "pwned"}),
                 ("sandbox_read_file", {"path": "/tmp/mine"}),
                 ("sandbox_list_files", {"path": "/tmp"}),
                 ("sandbox_stop", {})]
        bad = [(t, res) for t, a in calls for res in [srv.call(t, sandbox=name, **a)]
               if not refused(res, "no sandbox", "of this server")]
        check("a sandbox name not this server's (%r): every tool refuses it" % name, not bad, bad)
    # Arguments beyond a tool's own (the operator's options are the ceiling).
    for t, a in (("sandbox_create", {"image": "other"}), ("sandbox_create", {"network": "host"}),
                 ("sandbox_run_command", {"sandbox": sb, "command": "true", "env": {"A": "1"}}),
                 ("sandbox_run_code", {"sandbox": sb, "code": "1", "language": "ruby"}),
                 ("sandbox_read_file", {"sandbox": sb, "path": "/tmp/by-cmd", "offset": 1}),
                 ("sandbox_write_file", {"sandbox": sb, "path": "/tmp/x", "content": "x", "mode": "4755"})):
        r = srv.call(t, **a)
        check("%s with %s is refused" % (t, sorted(a)), refused(r), r)
    i = srv.start_call("sandbox_read_file", sandbox=sb, path="/tmp/by-cmd\0x")
    a = json.loads(srv.p.stdout.readline())
    check("a path with a NUL byte is refused (a message with \\u0000 is not taken)",
          a.get("error", {}).get("code") == -32700 or (a.get("id") == i and refused(a.get("result", {}))), a)
    r = srv.call("sandbox_run_command", sandbox=7, command="true")
    check("a sandbox name that is not a string is refused", refused(r), r)
    out, _ = sh(srv2, other, "cat /tmp/mine")
    check("...and the other server's sandbox was not touched", out == "theirs\n" and other in ps(), out)
    rc, rest = srv2.close()
    check("the other server exits 0 at EOF", rc == 0 and rest == b"", (rc, rest))

    # --max-sandboxes 2: the third create is refused, precisely.
    r = srv.call("sandbox_create")
    sb2 = (r.get("structuredContent") or {}).get("sandbox", "")
    check("a second sandbox (the bound is 2)", sb2 and sb2 != sb and sb2 in ps(), r)
    before = set(ps())
    r = srv.call("sandbox_create")
    check("the third create is refused with the bound in the message",
          refused(r, "2 sandboxes are running (the operator's bound)", "sandbox_stop"), r)
    check("...and started nothing", set(ps()) == before, (before, ps()))

    # Stop: gone from ps, no process left; its name refused afterwards; its
    # slot free for another.
    r = srv.call("sandbox_stop", sandbox=sb)
    check("sandbox_stop", r.get("isError") is False and text(r) == "stopped " + sb, r)
    check("...the sandbox is gone from nsbox ps", sb not in ps(), ps())
    check("...no process of it is left", procs_named(sb) == 0, procs_named(sb))
    r = srv.call("sandbox_run_command", sandbox=sb, command="true")
    check("...and its name is refused", refused(r, "no sandbox"), r)
    r = srv.call("sandbox_create")
    sb3 = (r.get("structuredContent") or {}).get("sandbox", "")
    check("...its slot takes a new sandbox, with a new name", sb3 and sb3 not in (sb, sb2) and sb3 in ps(), r)

    # Stopped while a command runs in it: both calls answered, the command
    # as ended by the stop; nothing left.
    sb4 = sb3
    running = srv.start_call("sandbox_run_command", sandbox=sb4, command="echo > /tmp/started; sleep 300; echo never")
    for _ in range(600):
        if srv.call("sandbox_read_file", sandbox=sb4, path="/tmp/started").get("isError") is False:
            break
        time.sleep(0.1)
    stopping = srv.start_call("sandbox_stop", sandbox=sb4)
    got = srv.answers(2)
    r = got.get(running, {})
    check("stopped mid-command: the stop is answered", got.get(stopping, {}).get("isError") is False, got)
    check("...and the running command's call too, not as a success",
          running in got and not run_ok(r) and "never" not in (r.get("structuredContent") or {}).get("stdout", ""), r)
    check("...nothing of that sandbox is left", sb4 not in ps() and procs_named(sb4) == 0, ps())

    # EOF on the server's stdin: every sandbox of it stops.
    r = srv.call("sandbox_create")
    live = [sb2, (r.get("structuredContent") or {}).get("sandbox", "")]
    check("two sandboxes running before EOF", all(n in ps() for n in live), ps())
    rc, rest = srv.close()
    check("EOF: the server exits 0", rc == 0 and rest == b"", (rc, rest))
    check("EOF: none of its sandboxes is left in nsbox ps", not [n for n in ps() if n.startswith(srv.prefix + "-")], ps())
    check("EOF: no monitor or sandbox process is left", sum(procs_named(n) for n in live) == 0,
          [procs_named(n) for n in live])


def idle():
    srv = Server(["--max-sandboxes", "1", "--sandbox-idle-timeout", "1s"])
    r = srv.call("sandbox_create")
    sb = (r.get("structuredContent") or {}).get("sandbox", "")
    check("idle: a sandbox is made", sb in ps(), r)
    out, r = sh(srv, sb, "echo alive")
    check("idle: a call before the timeout runs", out == "alive\n", r)
    out, r = sh(srv, sb, "sleep 3; echo still")
    check("idle: a command running longer than the idle timeout is not cut by it", out == "still\n", r)
    # No call: it ends by itself (the monitor's idle timeout). Bounded wait,
    # generous: not a timing assertion.
    for _ in range(600):
        if sb not in ps() and procs_named(sb) == 0:
            break
        time.sleep(0.1)
    check("idle: the sandbox ended by itself (gone from nsbox ps, no process left)",
          sb not in ps() and procs_named(sb) == 0, ps())
    r = srv.call("sandbox_run_command", sandbox=sb, command="echo x")
    check("idle: a call on it then says it ended", refused(r, sb, "ended"), r)
    r = srv.call("sandbox_create")
    sb2 = (r.get("structuredContent") or {}).get("sandbox", "")
    check("idle: its slot is free again (--max-sandboxes 1)", r.get("isError") is False and sb2 in ps(), r)
    rc, rest = srv.close()
    check("idle: EOF stops the rest", rc == 0 and sb2 not in ps() and procs_named(sb2) == 0, (rc, ps()))


def off():
    srv = Server(["--max-sandboxes", "0"])
    tools = [t["name"] for t in srv.rpc("tools/list", {})["result"]["tools"]]
    check("--max-sandboxes 0: no sandbox_* tool is listed", not [t for t in tools if t.startswith("sandbox_")], tools)
    a = srv.rpc("tools/call", {"name": "sandbox_create", "arguments": {}})
    check("...and sandbox_create is an unknown tool (-32602)", a.get("error", {}).get("code") == -32602, a)
    rc, rest = srv.close()
    check("...the server exits 0 at EOF", rc == 0 and rest == b"", (rc, rest))


{"main": main, "idle": idle, "off": off}[scenario]()
sys.exit(1 if failed else 0)
