"""nsbox.celery's tasks run in this process (Task.apply: no broker, the real
task code): arguments from the queue are hostile and the worker's
configuration is the ceiling. The queue itself is `make check-scale`'s."""
import pickle

import pytest

import nsbox

pytest.importorskip("celery", reason="Celery is not installed (python3-celery)")
import nsbox.celery as celery_mod  # noqa: E402


@pytest.fixture
def worker(bashroot, monkeypatch):
    # The worker's own configuration: the ceiling every task is held to.
    monkeypatch.setenv("NSBOX_ROOTFS", bashroot)
    monkeypatch.setenv("NSBOX_MEMORY", "128m")
    monkeypatch.setenv("NSBOX_TIMEOUT", "10s")
    monkeypatch.setenv("NSBOX_PIDS_LIMIT", "32")
    monkeypatch.setattr(celery_mod, "_sb", None)
    yield celery_mod
    celery_mod._sb = None


def call(task, *args, **kw):
    r = task.apply(args, kw)
    if r.failed():
        raise r.result
    return r.result


def test_run_code_record(worker):
    rec = call(worker.run_code, "echo $((6*7))", language="bash")
    assert rec["status"] == "exited" and rec["stdout"] == "42\n"
    assert rec["limits"]["memory_bytes"] == 128 << 20 and rec["failed_on"] == []
    assert {"worker", "host", "queue_wait_ms", "started_at", "finished_at"} <= set(rec)


def test_code_failure_is_a_result(worker):
    rec = call(worker.run, "exit 3")
    assert rec["status"] == "exited" and rec["exit_code"] == 3
    rec = call(worker.run, ["sleep", "5"], timeout=0.5)
    assert rec["status"] == "timed_out" and rec["limits"]["timeout_ms"] == 500


def test_lower_limits_are_taken(worker):
    # (cpus: whole CPUs, which every identity can have without a cgroup)
    rec = call(worker.run, ["true"], memory="64m", pids=8, cpus=1, max_output=1024)
    lim = rec["limits"]
    assert (lim["memory_bytes"], lim["pids"], lim["cpus"], lim["output_bytes"]) == (64 << 20, 8, 1, 1024)


@pytest.mark.parametrize("kw", [
    dict(memory="1g"), dict(memory=1 << 40), dict(timeout=11), dict(timeout="1h"), dict(pids=33),
    dict(cpus=2), dict(max_output="1g"), dict(memory=float("inf")), dict(timeout=float("nan")),
    dict(timeout=-1), dict(timeout=True), dict(memory="12x"), dict(memory=[1]),
    dict(image="default"), dict(rootfs="/"), dict(policy="/etc/passwd"), dict(network="host"),
    dict(volumes=["/:/host"]), dict(workspace="/root"), dict(user="0:0"), dict(seccomp="unconfined"),
    dict(settings={"network.mode": "host"}), dict(allow_hosts=["example.com"]), dict(env_pass=["PATH"]),
    dict(env={"A=B": "1"}), dict(env={"A": 1}), dict(env={"A": "x\0y"}), dict(env=["A"]),
    dict(stdin=b"bytes"), dict(_failed_on="w1"),
])
def test_hostile_arguments_are_refused(worker, kw):
    with pytest.raises(worker.Refused):
        call(worker.run, ["true"], **kw)


@pytest.mark.parametrize("args", [(["true", 1],), ([],), ({"cmd": "true"},), ("a\0b",), ("x" * 70000,)])
def test_bad_argv_is_refused(worker, args):
    with pytest.raises(worker.Refused):
        call(worker.run, *args)


@pytest.mark.parametrize("args", [(42,), ("print(1)", "cobol"), ("print(1)", ["python"]), ("x" * (2 << 20),)])
def test_bad_code_is_refused(worker, args):
    with pytest.raises(worker.Refused):
        call(worker.run_code, *args)


def test_sandbox_error_pickles():
    # Celery's prefork pool sends a task's exception between processes.
    e = nsbox.SandboxError("rootfs", 2, "open root filesystem", "build it", {"status": "setup_failed"})
    e2 = pickle.loads(pickle.dumps(e))
    assert (type(e2), e2.step, e2.errno, e2.message, e2.hint, e2.record, str(e2)) == \
        (nsbox.SandboxError, "rootfs", 2, "open root filesystem", "build it", {"status": "setup_failed"}, str(e))
    assert type(pickle.loads(pickle.dumps(nsbox.IsolationUnavailable("idmap", 1, "x")))) is nsbox.IsolationUnavailable
