"""One engine behind every door: the same payloads through every way in -- the
CLI's run, run-code, exec and exec --context (Python and Node), the SDK's
run/run_code, Pool.run_code, LiveSandbox.exec/run_code and Context.run, MCP's
run_code/run_command and the Celery tasks -- must get the same classification,
the same fields, the same bounds and the same audit line. Run by python.test
as root and as unprivileged users (where limits fall back to rlimits, the
doors must still agree with each other)."""
import json
import os
import signal
import subprocess
import sys

import pytest

import nsbox

MEMORY, PIDS, OUTPUT = "128m", 16, 65536

# payload -> (Python code, what every door must report, per-call timeout)
PY = {
    "exit3": ("import sys; sys.exit(3)", {"status": "exited", "exit_code": 3, "exit_status": 3}, 20),
    "sigkill": ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                {"status": "signaled", "signal": 9, "exit_status": 137}, 20),
    "timeout": ("print('partial', flush=True)\nimport time\ntime.sleep(60)",
                {"status": "timed_out", "timed_out": True, "exit_status": 124}, 1),
    "oom": ("a = bytearray(1 << 30)\nprint(len(a))", {}, 20),
    # A fork loop past the process limit; its children are ended before the
    # failure goes up (a context's interpreter lives on with the sandbox's
    # shared limit).
    "pids": ("import os, signal\npids = []\ntry:\n    for i in range(64):\n        pid = os.fork()\n"
             "        if pid == 0:\n            signal.pause()\n            os._exit(0)\n        pids.append(pid)\n"
             "finally:\n    for p in pids:\n        os.kill(p, 9)\n        os.waitpid(p, 0)\n",
             {"exit_code": 1}, 20),
    # (no value left as the last expression: a context would show it)
    "output": ("import sys; _ = sys.stdout.write('x' * (1 << 20))",
               {"status": "exited", "exit_code": 0, "stdout_truncated": True, "stdout_bytes": 1 << 20}, 20),
    "blocked": ("import socket", {"status": "setup_failed"}, 20),
}
NODE = {
    "exit3": ("process.exit(3)", {"status": "exited", "exit_code": 3}, 20),
    "timeout": ("console.log('partial'); const t = Date.now(); while (Date.now() - t < 60000) {}",
                {"status": "timed_out", "timed_out": True}, 1),
    "output": ("void process.stdout.write('x'.repeat(1 << 20))",
               {"stdout_truncated": True, "stdout_bytes": 1 << 20}, 20),
}
# What must agree between the doors (the classification, the bounds).
SAME = ("status", "exit_code", "timed_out", "oom_killed", "pids_limit_hit", "exit_status", "stdout_truncated",
        "stdout_bytes", "kind", "lost")


@pytest.fixture(scope="module")
def world(default_image, tmp_path_factory):
    d = tmp_path_factory.mktemp("doors")
    policy = d / "policy.yaml"
    policy.write_text("limits: { memory: %s, pids: %d, output: %d }\n"
                      "audit: { log: %s }\n"
                      "code: { import_gate: block, blocked_imports: [socket] }\n" % (MEMORY, PIDS, OUTPUT, d / "audit.jsonl"))
    return {"dir": d, "policy": str(policy), "image": default_image, "audit": d / "audit.jsonl"}


def signature(rec):
    err = rec.get("error") or {}
    ctx = rec.get("context") or {}
    sig = {k: rec.get(k) for k in SAME if k not in ("kind", "lost")}
    sig["kind"] = err.get("kind")
    sig["lost"] = ctx.get("state_lost", sig["status"] in ("signaled", "oom_killed"))
    if sig["status"] == "signaled":
        sig["signal"] = rec["signal"]
    return sig


# ---- the doors --------------------------------------------------------------

def cli():
    path = os.environ.get("NSBOX_TEST_CLI")
    if not path:
        pytest.skip("NSBOX_TEST_CLI is not set: run through make check")
    return path


def cli_json(args, stdin=None):
    p = subprocess.run([cli(), *args], input=stdin, capture_output=True, timeout=120)
    assert p.stdout, p.stderr
    return json.loads(p.stdout)


class Live:
    """One long-lived sandbox per module through the CLI, one through the SDK."""

    def __init__(self, w):
        self.name = "doors%d" % os.getpid()
        subprocess.run([cli(), "start", "--name", self.name, "--image", w["image"], "--policy", w["policy"]],
                       check=True, capture_output=True, timeout=120)
        self.sdk = nsbox.Sandbox(image=w["image"], policy=w["policy"]).start()
        self.ctx = {"python": self.sdk.context("python"), "node": self.sdk.context("node")}

    def close(self):
        self.sdk.close()
        subprocess.run([cli(), "stop", self.name], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def live(world):
    lv = Live(world)
    yield lv
    lv.close()


@pytest.fixture(scope="module")
def pool(world):
    with nsbox.Pool(nsbox.Sandbox(image=world["image"], policy=world["policy"]), size=1,
                    languages=("python", "node")) as p:
        yield p


class Mcp:
    def __init__(self, w):
        self.p = subprocess.Popen([cli(), "mcp", "--image", w["image"], "--policy", w["policy"], "--timeout", "30s"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.n = 0
        self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "doors", "version": "0"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.n += 1
        self.p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) +
                            "\n").encode())
        self.p.stdin.flush()
        while True:
            a = json.loads(self.p.stdout.readline())
            if a.get("id") == self.n:
                return a

    def call(self, tool, args):
        a = self.rpc("tools/call", {"name": tool, "arguments": args})
        return a["result"]["structuredContent"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


@pytest.fixture(scope="module")
def mcp(world):
    m = Mcp(world)
    yield m
    m.close()


@pytest.fixture(scope="module")
def celery(world, redis_url):
    pytest.importorskip("celery", reason="Celery is not installed (python3-celery)")
    if redis_url is None:
        pytest.skip("redis-server is not installed: nsbox.celery's ledger needs it")
    import nsbox.celery as c
    old = dict(os.environ)
    os.environ.update(NSBOX_IMAGE=world["image"], NSBOX_POLICY=world["policy"])
    c._sb = None
    # The ledger (a key runs once) on a redis-server of this session.
    old_backend, c.BACKEND, c._ledger_obj = c.BACKEND, redis_url, None
    yield c
    c._sb = None
    c.BACKEND, c._ledger_obj = old_backend, None
    os.environ.clear()
    os.environ.update(old)


def record_of(call):
    """A door's record; a run that could not start is a SandboxError whose
    record the SDK attaches (the Celery task raises it, as it must)."""
    try:
        return call()
    except nsbox.SandboxError as e:
        assert e.record is not None, e
        return e.record


def code_doors(world, live, pool, mcp, celery, lang):
    img, pol = world["image"], world["policy"]
    sb = nsbox.Sandbox(image=img, policy=pol)

    def celery_code(code, t):
        r = celery.run_code.apply((code,), {"language": lang, "timeout": t})
        if r.failed():
            if isinstance(r.result, nsbox.SandboxError) and r.result.record:
                return r.result.record
            raise r.result
        return r.result

    doors = {
        "cli run-code": lambda code, t: cli_json(["run-code", "--json", "--image", img, "--policy", pol,
                                                  "--timeout", "%ds" % t, "--lang", lang, "-c", code]),
        "sdk run_code": lambda code, t: record_of(lambda: sb.run_code(code, lang, timeout=t).record),
        "Pool.run_code": lambda code, t: record_of(lambda: pool.run_code(code, lang, timeout=t).record),
        "cli exec --context": lambda code, t: cli_json(["exec", live.name, "--json", "--context", "d" + lang,
                                                        "--lang", lang, "--timeout", "%ds" % t, "-c", code]),
        "Context.run": lambda code, t: record_of(lambda: live.ctx[lang].run(code, timeout=t).record),
        "mcp run_code": lambda code, t: mcp.call("run_code", {"code": code, "language": lang, "timeout": t}),
        "celery run_code": celery_code,
    }
    if lang == "python":
        doors["LiveSandbox.run_code"] = lambda code, t: record_of(
            lambda: live.sdk.run_code(code, lang, timeout=t).record)
    return doors


def command_doors(world, live, mcp, celery):
    img, pol = world["image"], world["policy"]
    sb = nsbox.Sandbox(image=img, policy=pol)

    def celery_cmd(code, t):
        r = celery.run.apply((["python3", "-c", code],), {"timeout": t})
        if r.failed():
            raise r.result
        return r.result

    return {
        "cli run": lambda code, t: cli_json(["run", "--json", "--image", img, "--policy", pol, "--timeout",
                                             "%ds" % t, "--", "python3", "-c", code]),
        "cli exec": lambda code, t: cli_json(["exec", live.name, "--json", "--timeout", "%ds" % t, "--",
                                              "python3", "-c", code]),
        "sdk run": lambda code, t: record_of(lambda: sb.run(["python3", "-c", code], timeout=t).record),
        "LiveSandbox.exec": lambda code, t: record_of(
            lambda: live.sdk.exec(["python3", "-c", code], timeout=t).record),
        # (run_command is a shell command line: exec, so that the shell is
        # not the process whose end is reported)
        "mcp run_command": lambda code, t: mcp.call("run_command", {"command": "exec python3 -c %s" % _sh(code),
                                                                     "timeout": t}),
        "celery run": celery_cmd,
    }


def _sh(s):
    return "'" + s.replace("'", "'\\''") + "'"


def audited(world, rec):
    """The audit line of this record: present, once, and saying what it says."""
    lines = [json.loads(x) for x in world["audit"].read_text().splitlines()]
    mine = [x for x in lines if x["id"] == rec["id"]]
    assert len(mine) == 1, "no audit line for %s" % rec["id"]
    assert (mine[0]["status"], mine[0]["exit_status"]) == (rec["status"], rec["exit_status"])


def check_record(rec, expect, door):
    for k in ("version", "id", "command", "resources", "limits", "isolation", "network", "error"):
        assert k in rec, "%s: the record has no %r" % (door, k)
    for k, v in expect.items():
        assert rec[k] == v, "%s: %s is %r, expected %r (%s)" % (door, k, rec[k], v, rec.get("error"))
    assert rec["limits"]["memory_bytes"] == 128 << 20 and rec["limits"]["pids"] == PIDS, door
    assert rec["limits"]["output_bytes"] == OUTPUT, door
    if rec["stdout"] is not None:
        assert len(rec["stdout"]) <= OUTPUT + 64, door


def run_matrix(world, doors, payloads, skip=()):
    for name, (code, expect, t) in payloads.items():
        got = {}
        for door, call in doors.items():
            if (door, name) in skip:
                continue
            rec = call(code, t)
            check_record(rec, expect, door)
            if name == "timeout":
                assert "partial" in (rec["stdout"] or ""), "%s: the output before the timeout is kept" % door
            if name == "blocked":
                assert rec["error"]["message"] == "Security policy blocked import: socket", door
            audited(world, rec)
            got[door] = signature(rec)
        first = next(iter(got.values()))
        differ = {d: s for d, s in got.items() if s != first}
        assert not differ, "payload %r: the doors disagree:\n%s" % (
            name, "\n".join("  %-22s %s" % (d, s) for d, s in got.items()))


def test_python_code_doors_agree(world, live, pool, mcp, celery):
    run_matrix(world, code_doors(world, live, pool, mcp, celery, "python"), PY)


def test_command_doors_agree(world, live, mcp, celery):
    # The import gate is for code runs: a command is not parsed.
    payloads = {k: v for k, v in PY.items() if k != "blocked"}
    run_matrix(world, command_doors(world, live, mcp, celery), payloads)


def test_node_code_doors_agree(world, live, pool, mcp, celery):
    run_matrix(world, code_doors(world, live, pool, mcp, celery, "node"), NODE)


def test_a_cancelled_cell_keeps_its_context(world, live):
    # Cancelling a cell (the async task, or Ctrl-C) interrupts it; the
    # context and its variables survive.
    import asyncio
    ctx = live.ctx["python"]
    ctx.run("kept = 7")

    async def go():
        t = asyncio.ensure_future(ctx.arun("import time\ntime.sleep(60)"))
        await asyncio.sleep(1)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t

    asyncio.run(go())
    assert ctx.run("print(kept)").stdout == "7\n"


def test_oom_in_a_cell_is_oom_killed(world, live):
    r = live.ctx["python"].run(PY["oom"][0])
    one_shot = nsbox.Sandbox(image=world["image"], policy=world["policy"]).run_code(PY["oom"][0])
    assert signature(r.record) == signature(one_shot.record)
    if one_shot.oom_killed:   # a cgroup counts OOM kills (root; rootless falls back to rlimits)
        assert r.status == "oom_killed" and r.record["context"]["state_lost"]
        assert r.exit_code is None and r.exit_status == 137 and r.error.kind == "oom"
        nxt = live.ctx["python"].run("print(1)")
        assert nxt.record["context"]["restarted"] and nxt.stdout == "1\n"
