#!/usr/bin/python3
"""The scale test's checks (run by tests/scale/celery.test: `make check-scale`).

usage: celery_scale.py TMPDIR ROOTFS

Everything it starts is its own child; it is a child subreaper, so whatever a
killed worker leaves (a janitor, a sandbox) becomes its child and is seen by
the final check. It only ever signals pids it started.
"""
import ctypes
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

T, ROOTFS = sys.argv[1], sys.argv[2]
PY = "/usr/bin/python3"
failed = 0


T0 = time.monotonic()


def phase(name):
    print("# %s (at %.0f s)" % (name, time.monotonic() - T0), flush=True)


def ok(what, cond, detail=""):
    global failed
    print("%s - %s%s" % ("ok" if cond else "not ok", what, "" if cond or not detail else ": %s" % detail), flush=True)
    failed += not cond
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(cond, limit, step=0.2):
    """Poll until cond() or `limit` seconds passed (a bound, not a measure)."""
    end = time.monotonic() + limit
    while True:
        v = cond()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


# Orphans of what we start (a killed worker's janitor) become ours.
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_CHILD_SUBREAPER = 36
ok("the harness is a child subreaper", libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)

port = free_port()
os.makedirs(T + "/redis")


def start_redis():
    # As docs/scale.md asks: the append-only file, fsynced before each reply.
    return subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "yes", "--appendfsync", "always", "--dir", T + "/redis",
                             "--protected-mode", "yes"],
                            stdout=open(T + "/redis/log", "a"), stderr=subprocess.STDOUT)


redis_p = start_redis()
BROKER = "redis://127.0.0.1:%d/0" % port
os.environ.update(NSBOX_CELERY_BROKER=BROKER, NSBOX_CELERY_BACKEND=BROKER, NSBOX_CELERY_RUN_LEASE="10")

import redis  # noqa: E402

r = redis.Redis(port=port)


def _ping(c):
    try:
        return c.ping()
    except redis.exceptions.ConnectionError:
        return False


if not ok("redis-server answers on 127.0.0.1:%d" % port, wait_for(lambda: _ping(r), 30)):
    redis_p.kill()
    sys.exit(1)

from nsbox.celery import TaskLost, app, ledger, results, run, run_code, submit  # noqa: E402
import nsbox  # noqa: E402

report = nsbox.check()
cg = [i for i in report["items"] if i["name"] == "cgroups"][0]
CGROUP = cg["status"] == "ok" and cg["detail"].startswith("cgroup v")

# The volume every task's code appends to (the workers' policy mounts it).
VOL = T + "/vol"
os.makedirs(VOL)
os.chmod(VOL, 0o777)
open(VOL + "/runs", "w").close()
os.chmod(VOL + "/runs", 0o666)
with open(T + "/worker.yaml", "w") as f:
    f.write("filesystem:\n  mounts: [ { source: %s, target: /tmp/vol, read_only: false } ]\n" % VOL)

BASE_ENV = dict(os.environ, NSBOX_CELERY_POLICY=T + "/worker.yaml", NSBOX_CELERY_CONCURRENCY="2", NSBOX_TIMEOUT="20s", NSBOX_MEMORY="256m",
                NSBOX_PIDS_LIMIT="64", NSBOX_CELERY_VISIBILITY_TIMEOUT="15", NSBOX_CELERY_MAX_RETRIES="40",
                NSBOX_CELERY_RUN_LEASE="10",
                PYTHONDONTWRITEBYTECODE="1")
workers = {}


def start_worker(name, rootfs=ROOTFS, wrap=(), args=(), **extra):
    d = "%s/%s" % (T, name)
    for sub in ("home", "state", "tmp"):
        os.makedirs("%s/%s" % (d, sub), exist_ok=True)
    env = dict(BASE_ENV, HOME=d + "/home", XDG_STATE_HOME=d + "/state", TMPDIR=d + "/tmp", NSBOX_ROOTFS=rootfs,
               **extra)
    argv = list(wrap) + [PY, "-m", "celery", "-A", "nsbox.celery", "worker", "-n", name + "@scale", "-l", "info",
                         "--without-mingle", "--without-gossip", "--without-heartbeat"] + list(args)
    p = subprocess.Popen(argv, env=env, cwd=d, stdout=open(d + "/log", "w"), stderr=subprocess.STDOUT)
    workers[name] = p
    return p


def ready(names):
    def all_up():
        try:
            got = app.control.ping(destination=[n + "@scale" for n in names], timeout=0.5)
        except Exception:
            return False
        return len({k for g in got for k in g}) == len(names)
    return wait_for(all_up, 60)


def stop(name):
    p = workers[name]
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def show_log(name):
    with open("%s/%s/log" % (T, name)) as f:
        lines = f.readlines()
    print("---- %s's log: nsbox.celery's, warnings and errors" % name)
    print("".join(ln for ln in lines if "nsbox.celery" in ln or "WARNING/Main" in ln or "ERROR" in ln)[-6000:])
    print("---- %s's log (last lines)" % name)
    print("".join(lines[-30:]))


try:
    phase("a worker that cannot run sandboxes")
    # ---- a worker that cannot run sandboxes does not start ----------------
    # In a user namespace that may create no more (user.max_user_namespaces
    # is per namespace): `nsbox check` says user namespaces cannot be made.
    p = start_worker("w0", wrap=["unshare", "-U", "-r", "sh", "-c",
                                 'echo 0 >/proc/sys/user/max_user_namespaces && exec "$@"', "sh"])
    rc = p.wait(120)
    log = open(T + "/w0/log").read()
    ok("a worker whose host cannot create user namespaces refuses to start (exit 78)", rc == 78, "exit %s" % rc)
    ok("...saying why", "not starting: user namespaces" in log, log[-500:])

    phase("setup failures")
    # A pool larger than the cap would run more sandboxes at once.
    p = start_worker("w5", args=["-c", "3"])
    rc = p.wait(120)
    log = open(T + "/w5/log").read()
    ok("a worker started with -c 3 above its cap of 2 refuses to start (exit 78)", rc == 78, "exit %s" % rc)
    ok("...saying why", "concurrency 3 is above NSBOX_CELERY_CONCURRENCY=2" in log, log[-500:])

    # ---- setup failures are retried on another worker -----------------------
    # w4 starts (its image is there), then its image disappears: its runs
    # fail before anything ran. It is alone at first, so it takes them.
    shutil.copytree(ROOTFS, T + "/w4-rootfs", symlinks=True)
    start_worker("w4", rootfs=T + "/w4-rootfs")
    ok("w4 is up", ready(["w4"]))
    os.rename(T + "/w4-rootfs", T + "/w4-rootfs.gone")
    # As many as w4 takes at once (its concurrency): all fail there first.
    setup_tasks = [run.delay(["echo", "setup-%d" % i]) for i in range(2)]
    wait_for(lambda: open(T + "/w4/log").read().count("Retry in") >= 2, 60)
    for n in ("w1", "w2", "w3"):
        start_worker(n)
    ok("w1, w2, w3 are up", ready(["w1", "w2", "w3"]))
    for i, t in enumerate(setup_tasks):
        try:
            rec = t.get(timeout=120)
        except Exception as e:
            ok("task %d after a setup failure" % i, False, repr(e))
            continue
        ok("setup task %d ran elsewhere after failing on w4 (%s, failed_on %s)" % (i, rec["worker"], rec["failed_on"]),
           rec["worker"] != "w4@scale" and rec["failed_on"] == ["w4@scale"] and rec["stdout"] == "setup-%d\n" % i)
    stop("w4")

    phase("60 tasks")
    # ---- 60 tasks of every outcome over three workers -------------------------
    kinds = ("ok", "exit", "timeout", "oom", "forkbomb")
    jobs = []
    for i in range(60):
        k = kinds[i % 5]
        if k == "ok":
            t = run_code.delay("echo ok-$((%d * 2))" % i, language="bash")
        elif k == "exit":
            t = run.delay("echo err-%d >&2; exit %d" % (i, 1 + i % 7))
        elif k == "timeout":
            t = run.delay(["sleep", "30"], timeout=1)
        elif k == "oom":
            t = run.delay(["probe", "hog", "256"], memory="32m")
        else:
            t = run.delay(["probe", "forkbomb"], pids=16)
        jobs.append((i, k, t))
    recs = []
    for i, k, t in jobs:
        try:
            rec = t.get(timeout=240)
        except Exception as e:
            ok("task %d (%s) has a record" % (i, k), False, repr(e))
            continue
        recs.append(rec)
        if k == "ok":
            good = rec["status"] == "exited" and rec["exit_code"] == 0 and rec["stdout"] == "ok-%d\n" % (2 * i)
        elif k == "exit":
            good = rec["status"] == "exited" and rec["exit_code"] == 1 + i % 7 and rec["stderr"] == "err-%d\n" % i
        elif k == "timeout":
            good = rec["status"] == "timed_out" and rec["timed_out"] and rec["limits"]["timeout_ms"] == 1000
        elif k == "oom":
            # The kernel's OOM killer (SIGKILL, exit status 137), as the
            # cgroup saw it; without a cgroup, the rlimit fails the allocation.
            good = (rec["oom_killed"] and rec["exit_status"] == 137) if CGROUP else rec["exit_code"] == 3
            good = good and rec["limits"]["memory_bytes"] == 32 << 20
        else:
            forks = [ln for ln in rec["stdout"].splitlines() if ln.startswith("forks=")]
            good = bool(forks) and int(forks[0][6:]) <= 16 and rec["limits"]["pids"] == 16
            good = good and (rec["pids_limit_hit"] or not CGROUP)
        good = good and rec["worker"] in ("w1@scale", "w2@scale", "w3@scale") and rec["host"] == socket.gethostname()
        good = good and rec["queue_wait_ms"] >= 0 and rec["failed_on"] == []
        ok("task %d (%s) on %s: %s" % (i, k, rec["worker"], rec["status"]), good,
           {x: rec.get(x) for x in ("status", "exit_code", "stdout", "stderr", "error", "limits")})
    ok("all 60 tasks have a record", len(recs) == 60, len(recs))
    per = {}
    for rec in recs:
        per.setdefault(rec["worker"], []).append((rec["started_at"], rec["finished_at"]))
    ok("the work spread over all three workers (%s)" % {w: len(v) for w, v in sorted(per.items())},
       sorted(per) == ["w1@scale", "w2@scale", "w3@scale"])
    for w, spans in sorted(per.items()):
        # The most sandboxes a worker had at once: sweep over its runs'
        # start and end times (an end before a start at the same instant).
        ev = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
        cur = peak = 0
        for _, d in ev:
            cur += d
            peak = max(peak, cur)
        ok("%s never ran more than its cap of 2 at once (peak %d)" % (w, peak), peak <= 2)

    # ---- faults mid-run: at most one run per task, a record or a precise loss ----
    # Each task's code appends its key to a file in a volume: counted at the
    # end, no key may be there twice. Every task must come back as a record
    # or as TaskLost within the client's timeout (never TaskTimeout).
    def batch(tag, n):
        return [submit(run_code, "echo %s-%d >>/tmp/vol/runs; sleep 0.3" % (tag, i), language="bash",
                       idempotency_key="%s-%d" % (tag, i)) for i in range(n)]

    def ledger_states(tasks):
        got = ledger().get_many([t.nsbox_key for t in tasks])
        return {t.id: got[t.nsbox_key] for t in tasks}

    outcome = {}

    def settle(name, tasks, timeout=150, t_fault=None):
        t0 = time.time()
        got = results(tasks, timeout)
        if t_fault is not None:
            ends = [v["finished_at"] for v in got.values() if isinstance(v, dict)]
            print("# measured %s: %d records, %d TaskLost; all %d tasks resolved %.1f s after the fault (the "
                  "client waited %.1f s); last record finished %.1f s after it"
                  % (name, len(ends), len(tasks) - len(ends), len(tasks), time.time() - t_fault, time.time() - t0,
                     max(ends) - t_fault if ends else 0), flush=True)
        recs = {k: v for k, v in got.items() if isinstance(v, dict)}
        lost = {k: v for k, v in got.items() if isinstance(v, TaskLost)}
        other = {k: v for k, v in got.items() if k not in recs and k not in lost}
        ok("%s: every task has its record (%d) or a precise TaskLost (%d) within %d s"
           % (name, len(recs), len(lost), timeout), not other, {k: repr(v) for k, v in list(other.items())[:5]})
        ok("%s: each TaskLost names its task" % name, all(k in str(v) for k, v in lost.items()),
           [str(v) for v in lost.values()][:3])
        ok("%s: every record is its own run's, exited 0" % name,
           all(r["status"] == "exited" and r["exit_code"] == 0 and r["executed_once"] and
               r["idempotency_key"].startswith(name + "-") for r in recs.values()),
           [r for r in recs.values() if r["status"] != "exited"][:2])
        for t in tasks:
            outcome[t.nsbox_key] = got[t.id]
        return recs, lost

    def redis_down_up(sig):
        global redis_p
        redis_p.send_signal(sig)
        redis_p.wait(60)
        time.sleep(2)      # away for two seconds, as an operator's restart would be
        redis_p = start_redis()
        return wait_for(lambda: _ping(r), 30)

    phase("fault 1: a worker killed with SIGKILL mid-run")
    tasks = batch("kill", 100)
    by_id = {t.id: t for t in tasks}

    def w3_busy():
        held = {k.decode(): json.loads(v)[0] for k, v in r.hgetall("nsbox:held:w3@scale").items()}
        states = ledger_states([by_id[i] for i in held.values() if i in by_id])
        started = [i for i, e in states.items() if e.get("state") == "started" and e.get("worker") == "w3@scale"]
        waiting = [i for i, e in states.items() if not e]
        return (held, started, waiting) if started and len(waiting) >= 2 else None
    busy = wait_for(w3_busy, 120, 0.05)
    if ok("w3 holds tasks it runs and tasks it has not started", bool(busy)):
        workers["w3"].send_signal(signal.SIGKILL)
        t_kill = time.time()
        workers["w3"].wait()
        _, started_w3, waiting_w3 = busy
        # What w3 held but had not started at the kill (read after it: no race).
        never = [i for i, e in ledger_states([by_id[i] for i in waiting_w3]).items()
                 if not e or e.get("worker") != "w3@scale"]
        start_worker("w6")
        recs, lost = settle("kill", tasks, t_fault=t_kill)
        late = {i: round(recs[i]["delivered_at"] - t_kill, 1) for i in never if i in recs}
        ok("kill: the %d tasks w3 had prefetched and never started ran elsewhere" % len(never),
           never and all(i in recs and recs[i]["worker"] != "w3@scale" for i in never),
           {i: repr(outcome.get(by_id[i].nsbox_key))[:120] for i in never})
        ok("kill: ...redelivered within 10 s of the kill (%s s)" % sorted(late.values()),
           len(late) == len(never) and all(v <= 10 for v in late.values()))
        ok("kill: the tasks w3 was running are TaskLost, naming w3 (%d)" % len(started_w3),
           all(i in lost and "w3@scale" in str(lost[i]) for i in started_w3),
           {i: repr(outcome.get(by_id[i].nsbox_key))[:200] for i in started_w3})
        ok("kill: only those are lost", set(lost) <= set(started_w3), sorted(set(lost) - set(started_w3)))
    ok("w6 (w3's replacement) is up", ready(["w6"]))

    for n, (name, sig) in enumerate((("sigterm", signal.SIGTERM), ("sigkill", signal.SIGKILL)), 2):
        phase("fault %d: Redis stopped with %s mid-run and started again" % (n, sig.name))
        tasks = batch(name, 100)
        wait_for(lambda: sum(1 for e in ledger_states(tasks).values() if e.get("state") == "finished") >= 30,
                 120, 0.05)
        t_fault = time.time()
        ok("%s: Redis is back after %s" % (name, sig.name), redis_down_up(sig))
        print("# measured %s: Redis was away %.1f s" % (name, time.time() - t_fault), flush=True)
        recs, lost = settle(name, tasks, t_fault=t_fault)
        ok("%s: nothing is lost: Redis keeps what it acknowledged (appendfsync always)" % name, not lost,
           [str(v) for v in lost.values()][:3])
        print("# %s: %d records were answered from the ledger by a second delivery (not run again)"
              % (name, sum(1 for x in recs.values() if x.get("answered_by"))), flush=True)

    restored = int(r.get("nsbox:restored") or 0)
    phase("fault 4: Redis without persistence killed with SIGKILL mid-run")
    # What docs/scale.md warns about: Redis forgets everything. Every task
    # must still end, as a record or a TaskLost naming it, never a hang.
    r.config_set("appendonly", "no")
    tasks = batch("amnesia", 100)
    wait_for(lambda: sum(1 for e in ledger_states(tasks).values() if e.get("state") == "finished") >= 30, 120, 0.05)
    t_fault = time.time()
    redis_p.send_signal(signal.SIGKILL)
    redis_p.wait(60)
    os.rename(T + "/redis", T + "/redis.before")
    os.makedirs(T + "/redis")
    redis_p = start_redis()
    ok("amnesia: an empty Redis is back", wait_for(lambda: _ping(r), 30) and r.dbsize() < 50, r.dbsize())
    recs, lost = settle("amnesia", tasks, t_fault=t_fault)
    ok("amnesia: the tasks Redis forgot are TaskLost, saying the broker lost them (%d)" % len(lost),
       lost and all("lost by the broker" in str(v) for v in lost.values()),
       [str(v) for v in lost.values()][:3])

    phase("the queue drains")
    # Until the broker holds nothing, so that a late redelivery would be seen.
    drained = wait_for(lambda: r.llen("nsbox") == 0 and r.hlen("unacked") == 0, 120, 0.5)
    ok("the broker holds no message any more", drained, (r.llen("nsbox"), r.hlen("unacked")))
    counts = {}
    with open(VOL + "/runs") as f:
        for line in f:
            counts[line.strip()] = counts.get(line.strip(), 0) + 1
    twice = sorted(k for k, c in counts.items() if c > 1)
    ok("no task's code ran twice (%d runs of %d tasks)" % (sum(counts.values()), len(outcome)), not twice, twice)
    ok("every task with a record ran exactly once",
       all(counts.get(k) == 1 for k, v in outcome.items() if isinstance(v, dict)),
       sorted(k for k, v in outcome.items() if isinstance(v, dict) and counts.get(k) != 1)[:10])
    ok("no record's code ran without its task knowing it (only lost tasks may have partly run)",
       all(isinstance(outcome.get(k), (dict, TaskLost)) for k in counts), sorted(set(counts) - set(outcome))[:10])
    print("# faults: %d tasks, %d records, %d lost, %d messages put back early"
          % (len(outcome), sum(isinstance(v, dict) for v in outcome.values()),
             sum(isinstance(v, TaskLost) for v in outcome.values()), restored), flush=True)
finally:
    # Celery's results unsubscribe when collected: before Redis goes.
    setup_tasks = jobs = tasks = by_id = None
    import gc
    gc.collect()
    for n in list(workers):
        stop(n)
    if failed:
        for n in workers:
            show_log(n)
    redis_p.terminate()
    redis_p.wait(60)

phase("cleanup")
# ---- nothing is left on the host ------------------------------------------------
pids = [p.pid for p in workers.values()]


def children():
    # Reap what we inherited, then list what is still alive below us.
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    mine = []
    for st in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(st).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            mine.append(st.split("/")[2])
    return mine


left = wait_for(lambda: not children(), 90, 0.5)
ok("no process we started (or inherited from a killed worker) is left", left, children())


def cgroups():
    return [d for p in pids for d in glob.glob("/sys/fs/cgroup/**/nsbox-%d-*" % p, recursive=True)]


ok("no cgroup of any worker's sandboxes is left", wait_for(lambda: not cgroups(), 90, 0.5), cgroups())
mounts = [ln for ln in open("/proc/self/mountinfo") if T in ln]
ok("no mount refers to the test's directory", not mounts, mounts)
state = [f for n in workers for f in glob.glob("%s/%s/state/nsbox/*/*" % (T, n))]
runs = [f for p in pids for f in glob.glob("/var/lib/nsbox/state/runs/%d-*" % p)]
ok("no state is left in the workers' state directories or root's run directories", not state and not runs,
   state + runs)
print("scale: %d failed" % failed)
sys.exit(1 if failed else 0)
