"""The stateful sandbox agents build on: contexts that stream, interrupt and
return rich results; files in and out (test_files.py); run as root and as
unprivileged users by python.test."""
import asyncio
import threading
import time

import pytest

import nsbox


@pytest.fixture(scope="module")
def live(default_image):
    with nsbox.Sandbox(image=default_image, memory="1g").start() as lv:
        yield lv


def test_rich_results_from_a_python_cell(live):
    c = live.context("python")
    r = c.run("class T:\n    def _repr_html_(self): return '<i>t</i>'\ndisplay(T(), {'a': 1})\n6 * 7")
    assert r.ok and r.stdout == "42\n"   # the last value is shown, as before
    assert [b.get("text/html") for b in r.results] == ["<i>t</i>", None, None]
    assert [b["text/plain"] for b in r.results[1:]] == ["{'a': 1}", "42"]
    assert r.record["results"][0]["text/html"] == "<i>t</i>"
    has_mpl = c.run("import importlib.util; print(importlib.util.find_spec('matplotlib') is not None)")
    if has_mpl.stdout.strip() != "True":
        pytest.skip("the image has no matplotlib: figures as PNG are not tested here")
    r = c.run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    pngs = [b["image/png"] for b in r.results if "image/png" in b]
    assert r.ok and len(pngs) == 1 and pngs[0].startswith(b"\x89PNG\r\n\x1a\n"), r.stderr
    assert c.run("print(len(plt.get_fignums()))").stdout == "0\n"   # returned, then closed


def test_a_cell_streams_its_output(live):
    got = []
    r = live.context("python").run("import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)",
                                   on_stdout=got.append)
    assert r.ok and "".join(got) == "0\n1\n2\n" and len(got) >= 2


def test_interrupt_keeps_the_state(live):
    c = live.context("python")
    c.run("kept = 5")
    got = []
    t = threading.Thread(target=lambda: got.append(c.run("import time\nprint('in', flush=True)\ntime.sleep(60)",
                                                         on_stdout=lambda s: got.append(s))))
    t.start()
    for _ in range(200):
        if "in\n" in got:
            break
        time.sleep(0.05)
    c.interrupt()
    t.join(30)
    r = got[-1]
    assert r.error.kind == "interrupted" and r.exit_code == 130 and "KeyboardInterrupt" in r.stderr
    assert c.run("print(kept)").stdout == "5\n"


def test_arun_and_cancel(live):
    c = live.context("python")

    async def go():
        r = await c.arun("x = 40 + 2\nx")
        assert r.stdout == "42\n"
        t = asyncio.ensure_future(c.arun("import time\ntime.sleep(60)"))
        await asyncio.sleep(0.5)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        return (await c.arun("print(x)")).stdout

    assert asyncio.run(go()) == "42\n"


def test_node_cells_return_json(live):
    r = live.context("node").run("({n: [1, 2]})")
    assert r.results == [{"text/plain": "{ n: [ 1, 2 ] }", "application/json": '{"n":[1,2]}'}]


def test_background_processes(rootfs):
    with nsbox.Sandbox(rootfs=rootfs).start() as lv:
        p = lv.spawn("i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done")
        for _ in range(200):
            if "tick 2" in p.logs().stdout:
                break
            time.sleep(0.05)
        assert p.running and "tick 2" in p.logs().stdout
        # it outlives the calls around it: execs come and go
        assert "sleep" in lv.exec(["ps"]).stdout or lv.exec(["true"]).ok
        assert p in lv.processes() and p.running
        with pytest.raises(TimeoutError):
            p.wait(0.2)
        assert p.kill()
        r = p.wait(10)
        assert (r.status, r.signal, p.running) == ("signaled", 9, False)
        assert not p.kill()   # it ended
        # a payload that floods its log: the ring keeps the last bytes, and
        # counts them all
        f = lv.spawn("yes | head -c 3000000; echo end", log_bytes=1000)
        assert f.wait(30).ok
        logs = f.logs()
        assert len(logs.stdout.encode()) == 1000 and logs.stdout.endswith("y\nend\n")
        assert logs.stdout_bytes == 3000004
        last = lv.spawn(["sleep", "600"])
    # ... and it ends with the sandbox
    assert not last.running
    with pytest.raises(ValueError, match="closed with its sandbox"):
        last.wait(1)


def test_a_published_port(default_image):
    import socket
    with nsbox.Sandbox(image=default_image).start() as lv:
        assert lv.exec(["python3", "-c", "print(1)"]).ok
        srv = lv.spawn(["python3", "-u", "-c",
                        "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                        "s.bind(('127.0.0.1', 8123)); s.listen()\nprint('listening', flush=True)\n"
                        "while True:\n    c, _ = s.accept()\n    d = c.recv(100)\n    c.sendall(b'echo:' + d)\n"
                        "    c.close()\n"])
        for _ in range(200):
            if "listening" in srv.logs().stdout:
                break
            time.sleep(0.05)
        port = lv.expose(8123)
        assert port > 0
        for _ in range(3):   # several connections, one after another
            with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                c.sendall(b"hi")
                assert c.recv(100) == b"echo:hi"
        # the sandbox's network is still its own: none
        assert lv.exec(["python3", "-c", "import socket; socket.create_connection(('10.0.0.1', 80), 1)"]).exit_code != 0
        # the inner server gone: a connection is closed at once, nothing hangs
        srv.kill()
        srv.wait(10)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.settimeout(10)
            assert c.recv(100) == b""
    # ... and the port is closed with the sandbox
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_pause_and_resume(rootfs):
    with nsbox.Sandbox(rootfs=rootfs).start() as lv:
        p = lv.spawn("i=0; while true; do echo $i; i=$((i+1)); sleep 0.02; done")
        for _ in range(200):
            if p.logs().stdout_bytes > 10:
                break
            time.sleep(0.05)
        try:
            lv.pause()
        except nsbox.SandboxError as e:
            assert e.errno == 95 and "rlimits" in e.message   # ENOTSUP: no cgroup (rootless here)
            pytest.skip("no cgroup freezer for this identity: %s" % e.message)
        assert lv.paused
        # What was written just before the freeze may still be on its way
        # from the pipe into the log ring: wait until it has arrived.
        n = p.logs().stdout_bytes
        for _ in range(100):
            time.sleep(0.1)
            if p.logs().stdout_bytes == n:
                break
            n = p.logs().stdout_bytes
        time.sleep(0.5)
        assert p.logs().stdout_bytes == n    # nothing ran while paused
        with pytest.raises(nsbox.SandboxError) as e:
            lv.exec(["true"])
        assert e.value.errno == 11           # EAGAIN: paused
        lv.resume()
        assert not lv.paused
        for _ in range(200):
            if p.logs().stdout_bytes > n:
                break
            time.sleep(0.05)
        assert p.logs().stdout_bytes > n and lv.exec(["true"]).ok
        lv.pause()   # a paused sandbox still ends cleanly


def test_an_owner_killed_while_paused_leaves_nothing(rootfs):
    # A paused sandbox's processes cannot die while frozen (cgroup v1): when
    # its owner is SIGKILLed, the monitor stops it (thawed first), and the
    # cgroups go with it.
    import os
    import signal
    import subprocess
    import sys
    code = ("import nsbox, sys\nlv = nsbox.Sandbox(rootfs=%r).start()\nlv.spawn(['sleep', '600'])\n"
            "try:\n    lv.pause()\nexcept nsbox.SandboxError:\n    print('no-freezer', flush=True)\n"
            "    sys.exit(0)\nprint('paused', lv.name, flush=True)\nsys.stdin.read()\n" % rootfs)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    said = p.stdout.readline().split()
    if said == ["no-freezer"]:
        p.wait(30)
        pytest.skip("no cgroup freezer for this identity")
    assert said[0] == "paused"
    monitor = [d["monitor_pid"] for d in nsbox.sandboxes() if d["name"] == said[1]][0]
    mine = "nsbox-%d-" % monitor
    v1 = os.path.isdir("/sys/fs/cgroup/freezer")
    frozen = [d for d in os.listdir("/sys/fs/cgroup/freezer") if d.startswith(mine)] if v1 else []
    assert frozen or not v1, "paused, yet no freezer cgroup of %d" % p.pid   # (v2: cgroup.freeze)
    p.send_signal(signal.SIGKILL)
    p.wait(30)
    deadline = time.monotonic() + 60
    left = frozen
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [d for d in frozen if os.path.exists("/sys/fs/cgroup/freezer/" + d)]
    assert not left, "the monitor left %s" % left
    assert said[1] not in [d["name"] for d in nsbox.sandboxes()]
    for ctrl in ("memory", "pids", "cpu"):
        d = "/sys/fs/cgroup/" + ctrl
        if os.path.isdir(d):
            assert not [x for x in os.listdir(d) if x.startswith(mine)], ctrl


def test_snapshot_and_start_from_it(rootfs):
    # What a sandbox wrote to /tmp keeps, with its configuration; any
    # number of sandboxes start from it, apart from each other.
    import os
    snap = "pysnap-%d" % os.getpid()
    data = os.urandom(300000)
    with nsbox.Sandbox(rootfs=rootfs, env={"FROM_SNAP": "kept"}).start() as live:
        live.files.write("/tmp/blob", data)
        live.exec(["sh", "-c", "mkdir -p /tmp/d && echo x > /tmp/d/f"])
        live.snapshot(snap)
    try:
        assert [s for s in nsbox.snapshots() if s["name"] == snap][0]["size_bytes"] > 300000
        with nsbox.Sandbox().start(from_snapshot=snap) as a, nsbox.Sandbox().start(from_snapshot=snap) as b:
            assert a.files.read("/tmp/blob") == data
            assert a.exec(["sh", "-c", "echo $FROM_SNAP; cat /tmp/d/f"]).stdout == "kept\nx\n"
            a.files.write("/tmp/d/f", b"changed")
            assert b.files.read("/tmp/d/f") == b"x\n"
        with pytest.raises(ValueError):
            nsbox.Sandbox(policy="standard").start(from_snapshot=snap)
        with pytest.raises(nsbox.SandboxError) as e:
            nsbox.Sandbox().start(from_snapshot="nosuch-%d" % os.getpid())
        assert "no snapshot named" in str(e.value)
    finally:
        nsbox.remove_snapshot(snap)
    assert snap not in [s["name"] for s in nsbox.snapshots()]
