"""nsbox.celery's tasks run in this process (Task.apply: no broker, the real
task code) against a real redis-server holding the ledger: arguments from the
queue are hostile, the worker's configuration is the ceiling, and a key runs
at most once. The queue itself is `make check-scale`'s."""
import json
import pickle

import pytest

import nsbox

pytest.importorskip("celery", reason="Celery is not installed (python3-celery)")
import nsbox.celery as celery_mod  # noqa: E402


@pytest.fixture
def worker(bashroot, monkeypatch, redis_url):
    if redis_url is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server): the ledger needs it")
    # The worker's own configuration: the ceiling every task is held to.
    monkeypatch.setenv("NSBOX_ROOTFS", bashroot)
    monkeypatch.setenv("NSBOX_MEMORY", "128m")
    monkeypatch.setenv("NSBOX_TIMEOUT", "10s")
    monkeypatch.setenv("NSBOX_PIDS_LIMIT", "32")
    monkeypatch.setattr(celery_mod, "_sb", None)
    monkeypatch.setattr(celery_mod, "BACKEND", redis_url)
    monkeypatch.setattr(celery_mod, "_ledger_obj", None)
    monkeypatch.setattr(celery_mod, "STORE_WAIT", 2)
    yield celery_mod
    celery_mod._sb = None
    celery_mod._ledger_obj = None


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
    dict(stdin=b"bytes"), dict(_failed_on="w1"), dict(idempotency_key=["k"]),
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


def test_a_key_runs_once(worker, tmp_path):
    # The second task with the same idempotency key gets the first's record;
    # its code did not run (the volume-less proof: a nonce in the output).
    rec = call(worker.run, "echo $$-$RANDOM", idempotency_key="once-1")
    again = call(worker.run, "echo $$-$RANDOM", idempotency_key="once-1")
    assert rec["executed_once"] and not rec["redelivered"] and rec["idempotency_key"] == "once-1"
    assert again["stdout"] == rec["stdout"] and again["redelivered"] and again["executed_once"]
    assert again["duplicate_of"] != again.get("id") and "answered_by" in again
    entry = worker.ledger().get("once-1")
    assert entry["state"] == "finished" and json.loads(entry["record"])["stdout"] == rec["stdout"]


def test_a_dead_run_is_lost_not_rerun(worker):
    # A run that started elsewhere and whose heartbeat stands still: the
    # delivery that finds it raises TaskLost naming it, and nothing runs.
    lg = worker.ledger()
    assert lg.claim("dead-1", "tok", "task-x", "w9@gone")
    worker.RUN_LEASE, old = 2, worker.RUN_LEASE
    try:
        with pytest.raises(worker.TaskLost) as e:
            call(worker.run, ["true"], idempotency_key="dead-1")
    finally:
        worker.RUN_LEASE = old
    assert "w9@gone" in str(e.value) and "dead-1" in str(e.value)
    assert lg.get("dead-1")["state"] == "lost"
    with pytest.raises(worker.TaskLost):
        call(worker.run, ["true"], idempotency_key="dead-1")


def test_a_setup_failure_frees_the_key(worker, monkeypatch, tmp_path):
    # An image whose /proc is a file: the run fails in setup (a missing
    # mount point would be made in the sandbox's own root), after the key
    # was taken. Nothing ran, so the key is free for a later delivery.
    (tmp_path / "proc").write_text("")
    monkeypatch.setenv("NSBOX_ROOTFS", str(tmp_path))
    monkeypatch.setattr(worker, "_sb", None)
    monkeypatch.setattr(worker, "MAX_RETRIES", 0)
    with pytest.raises(nsbox.SandboxError) as e:
        call(worker.run, ["true"], idempotency_key="setup-1")
    assert e.value.step not in ("config", "policy")
    assert worker.ledger().get("setup-1") == {}


def test_the_ledger_waits_for_redis_then_says_so(worker):
    lg = worker.Ledger("redis://127.0.0.1:1/0", 60, 0.5)
    with pytest.raises(worker.StoreUnavailable):
        lg.claim("k", "t", "id", "w")


@pytest.mark.parametrize("key", ["", "-x", "a b", "x" * 201, "a\n", 7])
def test_bad_idempotency_keys_are_refused(worker, key):
    with pytest.raises(worker.Refused):
        call(worker.run, ["true"], idempotency_key=key)


def test_a_record_outlives_a_ledger_that_forgot(worker):
    # Redis lost its data while the code ran: the run's record is stored
    # anew; a watcher's verdict (lost) is not overwritten.
    lg = worker.ledger()
    assert lg.claim("amnesia-1", "tok", "task-a", "w1")
    lg.r.delete("nsbox:task:amnesia-1")
    assert lg.finish("amnesia-1", "tok", {"stdout": "x"}, "task-a", "w1") == 2
    assert lg.get("amnesia-1")["state"] == "finished"
    assert lg.claim("amnesia-2", "tok", "task-b", "w1")
    assert lg.lose("amnesia-2", "tok", "gone")
    assert lg.finish("amnesia-2", "tok", {"stdout": "x"}) == 0 and lg.get("amnesia-2")["state"] == "lost"
