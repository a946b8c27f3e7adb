"""Sandbox.start(): a long-lived sandbox whose execs give run's records,
whose files persist, whose execs leave nothing behind; code contexts that
keep their state, survive a timed-out cell, restart; nothing left after
close."""
import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import nsbox
from conftest import cgroups_of, marker_processes


def test_exec_matches_run(rootfs):
    sb = nsbox.Sandbox(rootfs=rootfs, memory="64m")
    cold = sb.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    with sb.start() as live:
        r = live.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        for k in ("status", "exit_code", "stdout", "stderr", "limits", "isolation"):
            assert r.record[k] == cold.record[k], k
        assert r.record["sandbox"] == live.id and len(live.id) == 32
        assert r.id != cold.id


def test_state_persists_and_execs_are_isolated(rootfs):
    with nsbox.Sandbox(rootfs=rootfs).start() as live:
        live.exec("echo 42 >/tmp/state")
        assert live.exec(["cat", "/tmp/state"]).stdout == "42\n"
        assert live.exec("pwd", workdir="/tmp").stdout == "/tmp\n"
        assert live.exec(["cat"], stdin=b"fed").stdout == "fed"
        # What an exec starts dies with it.
        mark = "6%d7" % os.getpid()
        live.exec("sleep %s >/dev/null 2>&1 & echo started" % mark)
        assert marker_processes(mark) == []
        assert live.exec("ps | grep -c '[s]leep %s'" % mark).stdout.strip() == "0"


def test_timeout_and_concurrency(rootfs):
    with nsbox.Sandbox(rootfs=rootfs, pids=64).start() as live:
        r = live.exec(["sleep", "30"], timeout=0.5)
        assert r.status == "timed_out" and r.exit_status == 124
        # Several threads at once: each gets its own command's output.
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            outs = list(ex.map(lambda i: live.exec(["echo", str(i)]).stdout, range(32)))
        assert outs == ["%d\n" % i for i in range(32)]


def test_close_leaves_nothing(rootfs):
    live = nsbox.Sandbox(rootfs=rootfs).start()
    try:
        by_cgroup = live.exec(["true"]).limits["enforced_by"].startswith("cgroup")
        mark = "5%d3" % os.getpid()
        t = threading.Thread(target=lambda: live.exec(["sleep", mark]))
        t.start()
        deadline = time.monotonic() + 30
        while not marker_processes(mark) and time.monotonic() < deadline:
            time.sleep(0.01)
        procs = marker_processes(mark)
        assert procs, "the exec started"
        groups = sorted({d for p in procs for d in cgroups_of(p) if "/nsbox-" in d})
        assert bool(groups) == by_cgroup, "the exec runs in the sandbox's cgroup (when there is one)"
    finally:
        live.close()
    t.join(30)
    assert not t.is_alive(), "a running exec returns when the sandbox is closed"
    assert marker_processes(mark) == []
    assert [g for g in groups if os.path.isdir(g)] == [], "the sandbox's cgroup is gone"
    with pytest.raises(ValueError):
        live.exec(["true"])


def test_python_context(default_image):
    with nsbox.Sandbox(image=default_image).start() as live:
        ctx = live.context("python")
        assert ctx.run("x = 21").ok
        assert ctx.run("print(x * 2)").stdout == "42\n"
        assert ctx.run("x * 3").stdout == "63\n"          # the last expression is shown
        r = ctx.run("1/0")
        assert r.exit_code == 1 and "ZeroDivisionError" in r.stderr and r.error.kind == "runtime_error"
        r = ctx.run("while True: pass", timeout=1)
        assert r.status == "timed_out" and r.timed_out and r.error.kind == "timeout"
        r = ctx.run("print(x)")
        assert r.stdout == "21\n" and not r.record["context"]["restarted"], "the state survives a timeout"
        # A cell that will not be interrupted costs the interpreter.
        r = ctx.run("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", timeout=0.5)
        assert r.status == "timed_out" and "restarted" in r.error.message
        r = ctx.run("print(x)")
        assert r.record["context"]["restarted"] and "NameError" in r.stderr
        ctx.run("y = 1")
        ctx.restart()
        assert "NameError" in ctx.run("y").stderr


def test_node_context(default_image):
    with nsbox.Sandbox(image=default_image).start() as live:
        ctx = live.context("node")
        assert ctx.run("let x = 21").ok
        assert ctx.run("console.log(x * 2)").stdout == "42\n"
        assert ctx.run("x * 3").stdout.strip() == "63"
        assert not ctx.run("throw new Error('boom')").ok
        assert ctx.run("console.log(x)").stdout == "21\n"


def test_context_language_refused(default_image):
    with nsbox.Sandbox(image=default_image).start() as live:
        with pytest.raises(ValueError):
            live.context("cobol")


OWNER = r'''
import sys, threading, time, nsbox
live = nsbox.Sandbox(rootfs=sys.argv[1]).start()
threading.Thread(target=live.exec, args=(["sleep", sys.argv[2]],), daemon=True).start()
print("ready", flush=True)
time.sleep(600)
'''


def test_owner_sigkill_leaves_nothing(rootfs):
    from test_pool import alive, descendants
    mark = "4%d9" % os.getpid()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, rootfs, mark], stdout=subprocess.PIPE)
    try:
        assert owner.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 30
        while not marker_processes(mark) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker_processes(mark), "the exec runs"
        procs = descendants(owner.pid)
        groups = sorted({d for p, _ in procs for d in cgroups_of(p) if "/nsbox-" in d})
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 30   # the janitor removes the cgroup
    while [p for p in procs if alive(p)] or [d for d in groups if os.path.exists(d)] or marker_processes(mark):
        assert time.monotonic() < deadline, "left behind: %r %r" % (
            [p for p in procs if alive(p)], [d for d in groups if os.path.exists(d)])
        time.sleep(0.05)


GROUP_SIGNALS = r'''
import os, signal, sys, time
import nsbox
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
    signal.signal(s, lambda n, f: got.append(n))


def armed(sid):
    """Whether an init made ahead waits: a child of the keeper, both named
    nsbox-init, in session sid."""
    procs = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        procs[pid] = (head.split("(", 1)[1], fields[1], int(fields[3]))
    return any(c == "nsbox-init" and s == sid and procs.get(pp, ("",))[0] == "nsbox-init"
               for c, pp, s in procs.values())


with nsbox.Sandbox(rootfs=sys.argv[1]).start() as live:
    live.exec("true")            # the next exec's init is made ahead after this one
    monitor = [d["monitor_pid"] for d in nsbox.sandboxes() if d["name"] == live.name][0]
    theirs = os.getsid(monitor)
    deadline = time.monotonic() + 30
    while not armed(theirs) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Made ahead, in the monitor's session: not this program's.
    waiting = armed(theirs) and theirs != os.getsid(0) and not armed(os.getsid(0))
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        os.killpg(os.getpgrp(), s)
    while len(got) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    r = live.exec(["sleep", "0.3"])
    print(waiting, sorted(got) == sorted([2, 15, 1, 10]), r.status, r.exit_code, r.record.get("signal"))
'''


def test_signals_to_the_callers_group_do_not_reach_a_later_exec(rootfs):
    """The keeper and the init made ahead for the next exec are in the
    sandbox's monitor's session, not the embedding program's: a ^C or an
    interrupt meant for the program is not the next command's."""
    out = subprocess.run([sys.executable, "-c", GROUP_SIGNALS, rootfs], start_new_session=True,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "exited", "0", "None"], out.stdout + out.stderr


def test_allow_hosts_in_a_started_sandbox(rootfs):
    # The filtering proxy, served by the monitor for the sandbox's life: an
    # origin on this host's loopback is reached only because its address is
    # listed; another port of it is refused; each exec's record has its own.
    import http.server
    import socketserver

    class Origin(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"origin says hi"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Origin)
    port = srv.server_address[1]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    req = "printf 'GET http://127.0.0.1:%d/ HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 3128"
    try:
        with nsbox.Sandbox(rootfs=rootfs, allow_hosts=["127.0.0.1:%d" % port]).start() as live:
            r = live.exec(req % port)
            assert r.stdout.endswith("origin says hi"), r.stdout
            net = r.record["network"]
            assert net["mode"] == "allowlist"
            assert [(d["destination"], d["count"]) for d in net["allowed"]] == [("127.0.0.1:%d" % port, 1)]
            r = live.exec(req % (port + 1))
            assert "403" in r.stdout.splitlines()[0]
            net = r.record["network"]
            assert net["allowed"] == []
            assert [d["destination"] for d in net["denied"]] == ["127.0.0.1:%d" % (port + 1)]
    finally:
        srv.shutdown()
        srv.server_close()
