"""Started sandboxes from other processes: nsbox.connect(name), what
Sandbox.start()'s name/idle_timeout/lifetime/publish/detach do, detach(),
stop(), process(id), nsbox.sandboxes(); and nothing left after each end."""
import os
import socket
import subprocess
import sys
import time

import pytest

import nsbox
from conftest import marker_processes


def _names():
    return {s["name"] for s in nsbox.sandboxes()}


def _entry(name):
    return [s for s in nsbox.sandboxes() if s["name"] == name]


def _gone(name, monitor, deadline_s=60):
    """Wait until sandbox name is not listed and its monitor has exited."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        alive = True
        try:
            os.kill(monitor, 0)
        except ProcessLookupError:
            alive = False
        if name not in _names() and not alive:
            return True
        time.sleep(0.1)
    return False


def _child(code):
    """A Python process of ours running code, its stdout a pipe."""
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)


def test_connect_from_another_process(rootfs):
    name = "tc%d-a" % os.getpid()
    with nsbox.Sandbox(rootfs=rootfs).start(name=name) as lv:
        lv.exec("echo from-owner >/tmp/said")
        pid = lv.spawn(["sleep", "600"]).id
        code = ("import nsbox, sys\nlv = nsbox.connect(%r)\n"
                "print(lv.exec(['cat', '/tmp/said']).stdout.strip(), lv.id, flush=True)\n"
                "lv.files.write('/tmp/back', b'from-other')\n"
                "p = lv.process(%r)\nprint(p.running, flush=True)\nlv.close()\n" % (name, pid))
        p = _child(code)
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        said, sbid, running = out.split()
        assert (said, sbid, running) == ("from-owner", lv.id, "True")
        # The other process's close() let it go: it still serves its owner.
        assert lv.files.read("/tmp/back") == b"from-other"
        assert lv.process(pid).running
        with pytest.raises(nsbox.SandboxError):
            lv.process("0123456789abcdef")
        monitor = _entry(name)[0]["monitor_pid"]
    assert _gone(name, monitor)


def test_connect_to_no_such_sandbox():
    with pytest.raises(nsbox.SandboxError) as e:
        nsbox.connect("tc%d-none" % os.getpid())
    assert "no sandbox named" in str(e.value)
    # A name with path characters is refused before any file is touched.
    with pytest.raises((nsbox.SandboxError, ValueError)):
        nsbox.connect("../../etc/passwd")


def test_stop_from_a_connected_handle(rootfs):
    name = "tc%d-s" % os.getpid()
    owner = nsbox.Sandbox(rootfs=rootfs).start(name=name)
    try:
        mark = "4%d9" % os.getpid()
        owner.spawn(["sleep", mark])
        monitor = _entry(name)[0]["monitor_pid"]
        other = nsbox.connect(name)
        other.stop()
        assert _gone(name, monitor)
        assert marker_processes(mark) == []
        with pytest.raises(nsbox.SandboxError):
            owner.exec(["true"])
    finally:
        owner.close()


def test_sandboxes_lists_what_start_gave(rootfs):
    name = "tc%d-l" % os.getpid()
    with nsbox.Sandbox(rootfs=rootfs).start(name=name, idle_timeout=300, lifetime=600,
                                            publish=[("127.0.0.1", 0, 8080)]) as lv:
        e = _entry(name)
        assert len(e) == 1
        e = e[0]
        assert e["id"] == lv.id and e["idle_timeout_ms"] == 300000 and e["lifetime_ms"] == 600000
        assert e["owned"] is True
        pub = e["published"]
        assert len(pub) == 1 and pub[0]["port"] == 8080 and pub[0]["host"] == "127.0.0.1"
        assert 0 < pub[0]["host_port"] < 65536
        monitor = e["monitor_pid"]
    assert _gone(name, monitor)


def test_a_published_port_reaches_a_server_inside(rootfs):
    name = "tc%d-p" % os.getpid()
    with nsbox.Sandbox(rootfs=rootfs).start(name=name, publish=[("127.0.0.1", 0, 8081)]) as lv:
        port = _entry(name)[0]["published"][0]["host_port"]
        srv = lv.spawn(["nc", "-ll", "-p", "8081", "-e", "echo", "hello-from-inside"])
        got = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b"hello" not in got:
            try:
                with socket.create_connection(("127.0.0.1", port), 10) as s:
                    s.settimeout(10)
                    got = s.recv(100)
            except OSError:
                pass
            if b"hello" not in got:
                time.sleep(0.1)
        assert got.strip() == b"hello-from-inside"
        srv.kill()
        srv.wait(30)
        monitor = _entry(name)[0]["monitor_pid"]
    assert _gone(name, monitor)


def test_detach_outlives_its_process_and_stop_ends_it(rootfs):
    name = "tc%d-d" % os.getpid()
    code = ("import nsbox\nlv = nsbox.Sandbox(rootfs=%r).start(name=%r)\nlv.exec('echo kept >/tmp/k')\n"
            "lv.detach()\nprint('detached', flush=True)\n" % (rootfs, name))
    p = _child(code)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0 and out.strip() == "detached"
    try:
        e = _entry(name)
        assert e and e[0]["owned"] is False
        lv = nsbox.connect(name)
        assert lv.exec(["cat", "/tmp/k"]).stdout == "kept\n"
        monitor = e[0]["monitor_pid"]
        lv.stop()
        assert _gone(name, monitor)
    finally:
        if name in _names():
            nsbox.stop(name)


def test_start_detach_and_the_idle_timeout(rootfs):
    # Started detached by a process that exits at once: the idle timeout
    # still ends it (a background process keeps it busy until it ends).
    name = "tc%d-i" % os.getpid()
    code = ("import nsbox\nlv = nsbox.Sandbox(rootfs=%r).start(name=%r, detach=True, idle_timeout=1)\n"
            "print(lv.spawn(['sleep', '3']).id, flush=True)\n" % (rootfs, name))
    p = _child(code)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    e = _entry(name)
    assert e, "a detached sandbox ended with its starter"
    monitor = e[0]["monitor_pid"]
    assert nsbox.connect(name).process(out.strip()).wait(30).exit_code == 0
    assert _gone(name, monitor)


def test_the_lifetime_ends_it(rootfs):
    name = "tc%d-t" % os.getpid()
    lv = nsbox.Sandbox(rootfs=rootfs).start(name=name, lifetime=2)
    try:
        monitor = _entry(name)[0]["monitor_pid"]
        r = None
        try:
            r = lv.exec(["sleep", "600"])
        except nsbox.SandboxError:
            pass
        assert r is None or not r.ok
        assert _gone(name, monitor)
    finally:
        lv.close()


def test_an_owner_killed_leaves_nothing(rootfs):
    name = "tc%d-k" % os.getpid()
    mark = "3%d1" % os.getpid()
    code = ("import nsbox, sys\nlv = nsbox.Sandbox(rootfs=%r).start(name=%r)\nlv.spawn(['sleep', %r])\n"
            "print('up', flush=True)\nsys.stdin.read()\n" % (rootfs, name, mark))
    p = _child(code)
    assert p.stdout.readline().strip() == "up"
    monitor = _entry(name)[0]["monitor_pid"]
    assert marker_processes(mark)
    p.kill()
    p.wait(30)
    assert _gone(name, monitor)
    deadline = time.monotonic() + 30
    while marker_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker_processes(mark) == []


def test_an_owner_never_stops_another_sandbox_that_took_its_name(rootfs):
    # The owner's sandbox ends (stopped from elsewhere); another of the
    # same user is started under the same name; the old handle's close
    # (which stops what it owns) must leave the new one running.
    name = "reuse-%d" % os.getpid()
    old = nsbox.Sandbox(rootfs=rootfs).start(name=name)
    try:
        nsbox.live.stop(name)
        new = nsbox.Sandbox(rootfs=rootfs).start(name=name, detach=True)
        new_id = new.id
        new.close()
        old.close()
        assert [s["id"] for s in _entry(name)] == [new_id]
        again = nsbox.connect(name)
        assert again.exec(["true"]).ok
        again.stop()
    finally:
        if name in _names():
            nsbox.live.stop(name)
