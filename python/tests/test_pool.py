"""nsbox.Pool: warm sandboxes, each used for one run_code, indistinguishable
to the code from a cold Sandbox.run_code; limits count from the code's start;
refill under a burst; nothing left behind after close or the owner's SIGKILL."""
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import nsbox
from conftest import cgroups_of

PY_PROBE = r'''
import os, sys
print(sys.argv, __file__, os.getcwd(), sys.orig_argv)
print(sorted(os.environ.items()))
print(sorted(sys.modules))
print(sys.path, sorted(sys.path_importer_cache))
print(os.listdir("/tmp"), os.stat("/tmp/main.py").st_mode, os.fstat(0).st_mode, os.read(0, 10))
print(__name__, __spec__, __loader__.path, __cached__, sys._getframe().f_back, sys.flags)
import site; print(site.USER_BASE, site.USER_SITE, site.ENABLE_USER_SITE)
print([type(f).__name__ for f in sys.meta_path], sorted(c.__qualname__ for c in object.__subclasses__()))
import gc; print([o for o in gc.get_objects() if "nsbox" in getattr(getattr(o, "__code__", None), "co_filename", "")])
'''

NODE_PROBE = r'''
const fs = require('fs');
console.log(process.argv, __filename, process.cwd(), process.execArgv);
console.log(JSON.stringify(process.env));
console.log(Object.keys(require.cache), module.children.length, require.main === module);
console.log(fs.readdirSync('/tmp'), fs.fstatSync(1).isFIFO());
'''


def ready(pool, n):
    """Wait until n sandboxes are ready (the pool fills in the background)."""
    deadline = time.monotonic() + 60
    while pool.cost()["ready"] < n:
        assert time.monotonic() < deadline, "the pool filled up: %r" % pool.cost()
        time.sleep(0.01)


def descendants(root):
    """Host pids below root (inits, payloads, janitors), with start times."""
    kids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append((int(pid), fields[19]))
    out, todo = [], [root]
    while todo:
        for pid, start in kids.get(todo.pop(), []):
            out.append((pid, start))
            todo.append(pid)
    return out


def alive(pid_start):
    pid, start = pid_start
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19] == start
    except OSError:
        return False


def test_pooled_python_run_is_a_cold_run(default_image):
    sb = nsbox.Sandbox(default_image, env={"GREETING": "hi"})
    cold = sb.run_code(PY_PROBE)
    assert cold.ok, cold.stderr
    with nsbox.Pool(sb, size=1) as pool:
        ready(pool, 1)
        warm = pool.run_code(PY_PROBE)
        assert pool.cost()["taken"] == 1   # it came from the pool
    assert warm.ok, warm.stderr
    assert warm.stdout == cold.stdout
    assert warm.record["command"] == cold.record["command"]


def test_pooled_node_run_is_a_cold_run(default_image):
    sb = nsbox.Sandbox(default_image)
    cold = sb.run_code(NODE_PROBE, "node")
    assert cold.ok, cold.stderr
    with nsbox.Pool(sb, size=1, languages=("node",)) as pool:
        ready(pool, 1)
        warm = pool.run_code(NODE_PROBE, "node")
        assert pool.cost()["taken"] == 1
    assert warm.ok, warm.stderr
    assert warm.stdout == cold.stdout


def test_errors_and_exit_codes_match(default_image):
    sb = nsbox.Sandbox(default_image)
    code = "import sys\nprint('out')\nraise ValueError('boom')\n"
    cold = sb.run_code(code)
    with nsbox.Pool(sb, size=1) as pool:
        warm = pool.run_code(code)
        bad = pool.run_code("def (:\n")
    assert (warm.exit_code, warm.stdout, warm.stderr) == (cold.exit_code, cold.stdout, cold.stderr)
    assert warm.error == cold.error
    assert bad.error == sb.run_code("def (:\n").error


def test_timeout_counts_from_the_code(default_image):
    sb = nsbox.Sandbox(default_image, timeout=1)
    with nsbox.Pool(sb, size=1) as pool:
        ready(pool, 1)
        time.sleep(1.5)   # the ready sandbox is older than its timeout
        r = pool.run_code("import time; time.sleep(0.2); print('ok')")
        assert r.ok and r.stdout == "ok\n" and not r.timed_out
        assert r.duration_ms < 1500   # from the code's start, not the spawn
        spin = pool.run_code("while True: pass")
        assert spin.timed_out and spin.status == "timed_out"


def test_memory_limit_holds(default_image):
    sb = nsbox.Sandbox(default_image, memory="64m")
    code = "b = bytearray(256 << 20); print('allocated')"
    cold = sb.run_code(code)
    with nsbox.Pool(sb, size=1) as pool:
        warm = pool.run_code(code)
    assert not warm.ok and "allocated" not in warm.stdout
    assert (warm.status, warm.oom_killed) == (cold.status, cold.oom_killed)


def test_each_sandbox_serves_one_run(default_image):
    sb = nsbox.Sandbox(default_image)
    with nsbox.Pool(sb, size=2) as pool:
        ids = {pool.run_code("import os; print(os.getpid())").id for _ in range(4)}
        marks = [pool.run_code("import os\nprint(os.path.exists('/tmp/mark'))\nopen('/tmp/mark', 'w')").stdout
                 for _ in range(3)]
    assert len(ids) == 4
    assert marks == ["False\n"] * 3   # never a used sandbox again


def test_burst_of_50_refills(default_image):
    sb = nsbox.Sandbox(default_image)
    with nsbox.Pool(sb, size=4) as pool:
        with concurrent.futures.ThreadPoolExecutor(10) as ex:
            out = list(ex.map(lambda i: pool.run_code("print(%d)" % i).stdout, range(50)))
        assert out == ["%d\n" % i for i in range(50)]
        cost = pool.cost()
        assert cost["taken"] == 50 and cost["spawned"] >= 50
        ready(pool, 4)   # refilled
        assert pool.cost()["processes"] >= 4
        if pool.run_code("print(1)").limits["enforced_by"].startswith("cgroup"):
            assert pool.cost()["memory_bytes"] > 0


def test_close_leaves_nothing(default_image):
    sb = nsbox.Sandbox(default_image)
    pool = nsbox.Pool(sb, size=3)
    ready(pool, 3)
    procs = descendants(os.getpid())
    groups = sorted({d for p, _ in procs for d in cgroups_of(p)})
    assert procs
    pool.close()
    assert [p for p in procs if alive(p)] == []
    assert [d for d in groups if os.path.exists(d)] == []
    with pytest.raises(ValueError):
        pool.run_code("print(1)")


OWNER = r'''
import sys, time, nsbox
pool = nsbox.Pool(nsbox.Sandbox(sys.argv[1]), size=3, languages=("python", "node"))
while pool.cost()["ready"] < 6:
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(600)
'''


def test_owner_sigkill_leaves_nothing(default_image):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, default_image], stdout=subprocess.PIPE)
    try:
        assert owner.stdout.readline() == b"ready\n"
        procs = descendants(owner.pid)
        groups = sorted({d for p, _ in procs for d in cgroups_of(p)})
        assert len(procs) >= 6
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 30   # the janitors remove the cgroups
    while [p for p in procs if alive(p)] or [d for d in groups if os.path.exists(d)]:
        assert time.monotonic() < deadline, "left behind: %r %r" % (
            [p for p in procs if alive(p)], [d for d in groups if os.path.exists(d)])
        time.sleep(0.05)


def test_pool_refuses_what_it_cannot_warm(rootfs, tmp_path):
    with pytest.raises(TypeError):
        nsbox.Pool("not a sandbox")
    with pytest.raises(ValueError):
        nsbox.Pool(nsbox.Sandbox(rootfs=rootfs), size=0)
    with pytest.raises(ValueError):
        nsbox.Pool(nsbox.Sandbox(rootfs=rootfs), languages=("bash",))
    with pytest.raises(ValueError):
        nsbox.Pool(nsbox.Sandbox(rootfs=rootfs, workspace=str(tmp_path)))


def test_pooled_runs_are_governed(default_image, tmp_path):
    # The pool's runs pass through the same governance as every run: the
    # audit line, the artifacts, the import gate (no door skips it).
    log, art = tmp_path / "audit.jsonl", tmp_path / "art"
    settings = {"audit.log": str(log), "audit.artifacts": str(art), "code.import_gate": "block",
                "code.blocked_imports": "socket"}
    with nsbox.Pool(nsbox.Sandbox(image=default_image, settings=settings), size=1) as pool:
        r = pool.run_code("print(1)")
        assert r.ok and r.record["pool"]["warm"], r.stderr
        with pytest.raises(nsbox.SandboxError, match="blocked import: socket") as ei:
            pool.run_code("import socket")
    refused = ei.value.record
    assert refused["status"] == "setup_failed" and refused["code"]["blocked_imports"] == ["socket"]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["id"] for x in lines] == [refused["id"], r.id] or [x["id"] for x in lines] == [r.id, refused["id"]]
    assert sorted(os.listdir(art)) and len(os.listdir(art)) == 2
    assert r.record["code"]["import_gate"] == "block"


def test_a_failing_setup_is_reported(rootfs):
    # busybox has no python3: the pool's sandboxes fail; the run says why.
    with nsbox.Pool(nsbox.Sandbox(rootfs=rootfs), size=1) as pool:
        r = pool.run_code("print(1)")
    assert not r.ok and r.exit_code == 127


def test_preloaded_modules_are_imported_before_the_code(default_image):
    # Pool(preload=...): the ready interpreter has imported them (Python's
    # import, Node's require) before the code arrives; the record says so.
    sb = nsbox.Sandbox(default_image)
    probe = "import sys; print(sorted(m for m in ('decimal', 'xml.dom.minidom') if m in sys.modules))"
    assert sb.run_code(probe).stdout == "[]\n"   # a cold run has neither
    with nsbox.Pool(sb, size=1, preload=["decimal", "xml.dom.minidom"]) as pool:
        ready(pool, 1)
        r = pool.run_code(probe)
    assert r.ok, r.stderr
    assert r.stdout == "['decimal', 'xml.dom.minidom']\n"
    assert r.record["pool"]["warm"] and r.record["pool"]["preloaded"] == ["decimal", "xml.dom.minidom"]
    # Node: zlib is not loaded by a cold start; a pool that preloads it has it
    # in the loaded built-ins before the code runs.
    node_probe = "console.log(process.moduleLoadList.includes('NativeModule zlib'))"
    assert sb.run_code(node_probe, "node").stdout == "false\n"
    with nsbox.Pool(sb, size=1, languages=("node",), preload=["zlib", "path"]) as pool:
        ready(pool, 1)
        n = pool.run_code(node_probe, "node")
    assert n.ok, n.stderr
    assert n.stdout == "true\n"
    assert n.record["pool"]["preloaded"] == ["zlib", "path"]


def test_preload_refuses_what_is_not_a_module_name(default_image):
    # The names go into the hook's source: nothing that could break out of
    # its literal is taken.
    sb = nsbox.Sandbox(default_image)
    for bad in ("os'); import socket; ('", "../x", ".hidden", "", "a b", "x" * 201):
        with pytest.raises(nsbox.SandboxError, match="is not a module name to preload") as ei:
            nsbox.Pool(sb, size=1, preload=[bad])
        assert (ei.value.step, ei.value.errno) == ("pool", 22), bad
    with pytest.raises(TypeError, match="preload takes a list of module names"):
        nsbox.Pool(sb, size=1, preload="numpy")


def test_a_preload_that_fails_is_reported(default_image):
    # A module that is not in the image: the ready interpreter exits saying
    # which and why, and the run's record carries it.
    sb = nsbox.Sandbox(default_image)
    with nsbox.Pool(sb, size=1, preload=["nsbox_no_such_module"]) as pool:
        r = pool.run_code("print(1)")
    assert not r.ok and r.exit_code == 125
    assert "nsbox: warm pool: preload nsbox_no_such_module: ModuleNotFoundError" in r.stderr
