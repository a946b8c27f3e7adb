"""The files API of a long-lived sandbox (LiveSandbox.files): binary-exact,
bounded by files.max_size, and every operation inside the sandbox as its
user: a path can reach nothing of the host's. Run by python.test as root and
as unprivileged users."""
import os
import threading

import pytest

import nsbox


@pytest.fixture
def live(rootfs):
    with nsbox.Sandbox(rootfs=rootfs, settings={"files.max_size": "8m"}).start() as lv:
        yield lv


def test_binary_exact_round_trip(live):
    data = bytes(range(256)) * 10 + b"\0\xff\r\n"
    live.files.write("/tmp/a.bin", data)
    assert live.files.read("/tmp/a.bin") == data
    big = os.urandom(5 << 20)   # past limits.output by far: not its bound
    live.files.write("/tmp/big", big)
    assert live.files.read("/tmp/big") == big
    # what a command in the sandbox sees is the same file
    r = live.exec(["wc", "-c", "/tmp/big"])
    assert r.stdout.split()[0] == str(5 << 20)


def test_text_modes_and_listing(live):
    live.files.write("/tmp/t.txt", "héllo\n", mode=0o600)
    assert live.files.read_text("/tmp/t.txt") == "héllo\n"
    info = live.files.stat("/tmp/t.txt")
    assert (info.type, info.size, info.mode, info.name, info.path) == ("file", 7, 0o600, "t.txt", "/tmp/t.txt")
    live.files.make_dir("/tmp/d/e")
    names = {(f.name, f.type) for f in live.files.list("/tmp")}
    assert {("t.txt", "file"), ("d", "dir")} <= names
    assert live.files.exists("/tmp/d/e") and not live.files.exists("/tmp/none")
    live.files.write("/tmp/d/e/x", b"1")
    live.files.remove("/tmp/d")
    assert not live.files.exists("/tmp/d")
    # relative paths are relative to the sandbox's working directory (/)
    live.files.write("tmp/rel", "r")
    assert live.files.read("/tmp/rel") == b"r"


def test_a_symlink_reads_the_sandboxs_file_never_the_hosts(live):
    # /etc/hostname exists on the host; inside, the link resolves in the
    # sandbox's own root, where the probe's rootfs has no /etc/hostname.
    live.exec(["ln", "-s", "/etc/hostname", "/tmp/host-link"])
    with pytest.raises(nsbox.SandboxError) as e:
        live.files.read("/tmp/host-link")
    assert e.value.errno == 2   # ENOENT: the sandbox's, not the host's file
    live.exec(["ln", "-s", "/", "/tmp/root-link"])
    with pytest.raises(nsbox.SandboxError):
        live.files.read("/tmp/root-link/etc/shadow")
    # .. cannot climb out of the sandbox's root either
    assert live.files.read("/tmp/../../../etc/passwd") == live.files.read("/etc/passwd")
    assert b"sandbox:x:1000" in live.files.read("/etc/passwd")


def test_writes_land_only_where_the_sandbox_may_write(live):
    with pytest.raises(nsbox.SandboxError) as e:
        live.files.write("/etc/passwd", "root::0:0::/:/bin/sh\n")
    assert e.value.errno in (13, 30)   # EACCES or EROFS: the kernel's verdict
    with pytest.raises(nsbox.SandboxError):
        live.files.write("/proc/sys/kernel/hostname", "x")
    # a write through a symlink planted by the payload stays inside
    live.exec(["ln", "-s", "/bin", "/tmp/bin-link"])
    with pytest.raises(nsbox.SandboxError):
        live.files.write("/tmp/bin-link/sh", "#!/bin/false\n")


def test_the_bound_is_files_max_size(live):
    with pytest.raises(nsbox.SandboxError) as e:
        live.files.write("/tmp/huge", b"x" * ((8 << 20) + 1))
    assert e.value.errno == 27 and "files.max_size" in str(e.value)   # EFBIG
    assert not live.files.exists("/tmp/huge")   # nothing half-written
    live.exec(["dd", "if=/dev/zero", "of=/tmp/z", "bs=1048576", "count=9"])
    with pytest.raises(nsbox.SandboxError) as e:
        live.files.read("/tmp/z")
    assert e.value.errno == 27


def test_a_stopped_sandbox_is_a_precise_error(rootfs):
    live = nsbox.Sandbox(rootfs=rootfs).start()
    live.files.write("/tmp/x", "1")
    live.close()
    with pytest.raises(ValueError, match="closed"):
        live.files.read("/tmp/x")


def test_a_sandbox_that_ends_mid_transfer(rootfs):
    # A write streamed from a pipe: the sandbox ends while it is under way.
    import time
    live = nsbox.Sandbox(rootfs=rootfs).start()
    r, w = os.pipe()
    got = []

    def writer():
        try:
            live.files.write("/tmp/up", r)
            got.append("completed")
        except nsbox.SandboxError as e:
            got.append(e)

    t = threading.Thread(target=writer)
    t.start()
    os.write(w, b"z" * (1 << 20))
    # the transfer is under way: its temporary file is in /tmp
    for _ in range(200):
        if ".up.nsbox-write-" in live.exec(["ls", "-a", "/tmp"]).stdout:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the write never started")
    closer = threading.Thread(target=live.close)
    closer.start()
    time.sleep(0.5)   # (close kills the sandbox at once, then waits for the write)
    # More data after the end: the pipe may still hold what the sandbox did
    # not read before it was killed, and no one reads it now, so this write
    # must not block (it hung the suite once).
    os.set_blocking(w, False)
    try:
        os.write(w, b"z" * 65536)
    except BlockingIOError:
        pass
    os.close(w)
    t.join(60)
    closer.join(60)
    os.close(r)
    assert not t.is_alive() and not closer.is_alive()
    assert len(got) == 1 and isinstance(got[0], nsbox.SandboxError), got
    assert got[0].errno == 3 and "the sandbox has ended" in str(got[0])   # ESRCH
