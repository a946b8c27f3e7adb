"""Fixtures for the SDK tests. Run through tests/func/python.test (make
check), which builds the extension and sets NSBOX_TEST_ROOTFS (a busybox root
filesystem with the probe), NSBOX_TEST_BASHROOT (the same with 'bash') and
NSBOX_TEST_CLI (the nsbox binary, for comparing records)."""
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

import nsbox


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A redis-server of this test module on a free loopback port, with the
    append-only file (nsbox.celery's ledger needs one), stopped when the
    module ends (tests that count their descendants come later); None when
    redis-server is not installed."""
    if not shutil.which("redis-server"):
        yield None
        return
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tmp_path_factory.mktemp("redis")
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "yes", "--appendfsync", "always", "--dir", str(d)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                break
        except OSError:
            time.sleep(0.05)
    yield "redis://127.0.0.1:%d/0" % port
    p.terminate()
    p.wait(30)


def _need(var):
    v = os.environ.get(var)
    if not v:
        pytest.skip("%s is not set: run through 'make check TESTS=tests/func/python.test'" % var)
    return v


@pytest.fixture
def rootfs():
    return _need("NSBOX_TEST_ROOTFS")


@pytest.fixture
def bashroot():
    return _need("NSBOX_TEST_BASHROOT")


@pytest.fixture
def cli():
    path = _need("NSBOX_TEST_CLI")

    def run(*args, stdin=None):
        p = subprocess.run([path, *args], input=stdin, capture_output=True)
        return json.loads(p.stdout), p.returncode
    return run


@pytest.fixture(scope="session")
def default_image():
    """The 'default' image (Python and Node), or a skip saying it is missing."""
    try:
        names = [i.name for i in nsbox.images()]
    except nsbox.SandboxError as e:
        pytest.skip("cannot list images: %s" % e)
    if "default" not in names:
        pytest.skip("the 'default' image is not built here (sudo nsbox image build)")
    return "default"


def marker_processes(marker):
    """Host processes whose command line holds marker."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def cgroups_of(pid):
    """The cgroup directories of a host process (v1 and v2)."""
    dirs = []
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if ctrls == "":
            dirs.append("/sys/fs/cgroup" + path)
        else:
            names = [c.replace("name=", "") for c in ctrls.split(",")]
            for c in names + [",".join(names)]:
                dirs.append("/sys/fs/cgroup/%s%s" % (c, path))
    return [d for d in dirs if "nsbox-" in d and os.path.isdir(d)]
