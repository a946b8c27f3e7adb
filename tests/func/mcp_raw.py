# Protocol-level hostile input to `nsbox mcp`, written on the raw pipe.
# Usage: python3 mcp_raw.py MARKER NSBOX [NSBOX MCP ARGS...]
# Prints "ok - ..."/"not ok - ..." lines; exits 1 on a failure.
import json, subprocess, sys

marker, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd + [], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
failed = 0

def check(what, ok, detail=""):
    global failed
    failed += not ok
    print(("ok" if ok else "not ok") + " - " + what + ("" if ok else ": " + str(detail)), flush=True)

def send(raw):
    p.stdin.write(raw if isinstance(raw, bytes) else raw.encode())
    p.stdin.flush()

def answer():
    line = p.stdout.readline()
    try:
        return json.loads(line)
    except ValueError:
        return {"unparsable": line[:200]}

def rpc(i, method, params=None):
    m = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        m["params"] = params
    send(json.dumps(m) + "\n")

rpc(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
a = answer()
check("the previous revision 2025-03-26 is accepted", a.get("result", {}).get("protocolVersion") == "2025-03-26", a)
rpc(14, "tools/list")
a = answer()
check("tools/list on the old revision has no outputSchema", all("outputSchema" not in t for t in a["result"]["tools"]), a)
rpc(0, "initialize", {"protocolVersion": "1999-01-01"})
a = answer()
check("an unknown revision gets the newest one", a.get("result", {}).get("protocolVersion") == "2025-11-25", a)
send('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
send("{not json\n")
a = answer()
check("malformed JSON: parse error -32700, id null", a.get("error", {}).get("code") == -32700 and a.get("id") is None, a)
send(b'{"jsonrpc":"2.0","id":2,"method":"ping","x":"\xff"}\n')
a = answer()
check("invalid UTF-8: parse error", a.get("error", {}).get("code") == -32700, a)
rpc(3, "no/such/method")
a = answer()
check("unknown method: -32601", a.get("error", {}).get("code") == -32601 and a.get("id") == 3, a)
rpc(4, "tools/call", {"name": 7})
a = answer()
check("wrong parameter type: -32602", a.get("error", {}).get("code") == -32602 and a.get("id") == 4, a)
rpc(5, "tools/call", {"name": "run_code", "arguments": "print(1)"})
a = answer()
check("arguments not an object: -32602", a.get("error", {}).get("code") == -32602, a)
rpc(6, "tools/call", {"name": "run_code", "arguments": {"code": 1, "language": "python"}})
a = answer()
check("code not a string: a tool error", a.get("result", {}).get("isError") is True, a)
rpc(7, "tools/call", {"name": "no_such_tool", "arguments": {}})
a = answer()
check("unknown tool: -32602", a.get("error", {}).get("code") == -32602, a)
send('{"jsonrpc":"1.0","id":8,"method":"ping"}\n')
a = answer()
check("wrong jsonrpc version: -32600", a.get("error", {}).get("code") == -32600, a)
send('[{"jsonrpc":"2.0","id":9,"method":"ping"}]\n')
a = answer()
check("a batch: -32600", a.get("error", {}).get("code") == -32600, a)
send('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n')
a = answer()
check("an object id: -32600 with id null", a.get("error", {}).get("code") == -32600 and a.get("id") is None, a)
send('{"jsonrpc":"2.0","id":10,"id":11,"method":"ping"}\n')
a = answer()
check("duplicate keys: parse error", a.get("error", {}).get("code") == -32700, a)
big = '{"jsonrpc":"2.0","id":12,"method":"ping","params":{"pad":"' + "x" * (10 << 20) + '"}}\n'
send(big)
a = answer()
check("a 10 MiB message: -32600 naming the size", a.get("error", {}).get("code") == -32600 and "4 MiB" in a["error"]["message"], a)
rpc(13, "ping")
a = answer()
check("...and the server still serves", a == {"jsonrpc": "2.0", "id": 13, "result": {}}, a)
rpc(15, "server/discover")
a = answer()
check("server/discover lists the tools", [t["name"] for t in a.get("result", {}).get("tools", [])] == [
    "run_code", "run_command", "sandbox_create", "sandbox_run_code", "sandbox_run_command", "sandbox_write_file",
    "sandbox_read_file", "sandbox_list_files", "sandbox_stop"], a)
# A hundred calls at once: eight run, the rest wait in order; every one is
# answered with its own output, none lost.
N = 100
for i in range(N):
    rpc(1000 + i, "tools/call", {"name": "run_command", "arguments": {"command": "echo call-%d" % i}})
got = {}
for _ in range(N):
    a = answer()
    got[a.get("id")] = a
ok = sorted(got) == list(range(1000, 1000 + N)) and all(
    ("call-%d\n" % (i - 1000)) in got[i].get("result", {}).get("content", [{}])[0].get("text", "") for i in got)
check("100 parallel calls: all answered with their own output", ok, [got.get(k) for k in list(got)[:2]])
# EOF in the middle of calls: the server stops them and exits. Eight run at
# once (each a sandbox at the operator's limits); a ninth waits, and runs
# when one of them is cancelled; a cancelled waiting call is never run.
for i in range(8):
    rpc(100 + i, "tools/call", {"name": "run_command", "arguments": {"command": "sleep 300; : " + marker}})
rpc(108, "tools/call", {"name": "run_command", "arguments": {"command": "echo never > /tmp/x; echo ninth-never"}})
rpc(109, "tools/call", {"name": "run_command", "arguments": {"command": "echo ninth"}})
rpc(108, "tools/call", {"name": "run_command", "arguments": {"command": "true"}})
a = answer()
check("a waiting call's id cannot be reused", a.get("id") == 108 and "waiting" in a.get("error", {}).get("message", ""), a)
send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 108}}) + "\n")
rpc(17, "ping")
a = answer()
check("a ping is answered while calls run and wait", a.get("id") == 17, a)
send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 100}}) + "\n")
a = answer()
check("the waiting call runs when a running one ends (the cancelled waiting one never does)",
      a.get("id") == 109 and "ninth" in a.get("result", {}).get("content", [{}])[0].get("text", ""), a)
p.stdin.close()
rest = p.stdout.read()
rc = p.wait()
check("EOF mid-call: the server exits 0 without answering the cancelled call", rc == 0 and rest == b"", (rc, rest[:200]))
sys.exit(1 if failed else 0)
