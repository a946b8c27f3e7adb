#!/usr/bin/python3
"""Tasks per second through nsbox.celery (redis-server on a free loopback
port, the append-only file fsynced per write as docs/scale.md asks; 3 workers
of concurrency 2) against the same tasks run directly with
the SDK from 6 threads (the same number at once).

usage: PYTHONPATH=<built python/> bench/celery_throughput.py ROOTFS [TASKS] [ROUNDS]

A task is `nsbox.run(["true"])` or a short shell line in ROOTFS. Prints the
median of ROUNDS rounds for each way. Only the pids it starts are signalled.
"""
import concurrent.futures
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOTFS = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 120
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
WORKERS, CONC = 3, 2
TASKS = [["true"], "echo $((6*7))"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


tmp = tempfile.mkdtemp(prefix="nsbox-bench-celery.")
port = free_port()
broker = "redis://127.0.0.1:%d/0" % port
os.environ.update(NSBOX_CELERY_BROKER=broker, NSBOX_CELERY_BACKEND=broker)
status = 1
procs = [subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "yes", "--appendfsync", "always", "--dir", tmp],
                          stdout=subprocess.DEVNULL)]
try:
    import nsbox
    from nsbox.celery import app, run

    env = dict(os.environ, NSBOX_ROOTFS=ROOTFS, NSBOX_CELERY_CONCURRENCY=str(CONC))
    for i in range(WORKERS):
        d = os.path.join(tmp, "w%d" % i)
        os.makedirs(d)
        procs.append(subprocess.Popen([sys.executable, "-m", "celery", "-A", "nsbox.celery", "worker", "-n",
                                       "b%d@bench" % i, "-l", "warning", "--without-mingle", "--without-gossip",
                                       "--without-heartbeat"], env=dict(env, XDG_STATE_HOME=d, HOME=d), cwd=d,
                                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w")))
    names = ["b%d@bench" % i for i in range(WORKERS)]
    end = time.monotonic() + 120
    while time.monotonic() < end:
        try:
            if len({k for g in app.control.ping(destination=names, timeout=0.5) for k in g}) == WORKERS:
                break
        except Exception:
            pass
        time.sleep(0.2)
    else:
        print("the workers did not start", file=sys.stderr)
        raise SystemExit(1)

    def queued():
        t0 = time.monotonic()
        rs = [run.delay(TASKS[i % 2]) for i in range(N)]
        recs = [r.get(timeout=600) for r in rs]
        dt = time.monotonic() - t0
        assert all(x["exit_code"] == 0 for x in recs)
        return dt, statistics.median(x["queue_wait_ms"] for x in recs)

    sb = nsbox.Sandbox(rootfs=ROOTFS)

    def direct():
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(WORKERS * CONC) as ex:
            recs = list(ex.map(lambda i: sb.run(TASKS[i % 2]), range(N)))
        assert all(r.exit_code == 0 for r in recs)
        return time.monotonic() - t0

    queued()   # warm-up (imports, first connections)
    q = [queued() for _ in range(ROUNDS)]
    d = [direct() for _ in range(ROUNDS)]
    qs, ds = statistics.median(x[0] for x in q), statistics.median(d)
    print("tasks: %d (true and a shell line, alternating), rounds: %d, cpus: %d" % (N, ROUNDS, os.cpu_count()))
    print("queue  (redis + %d workers x %d): %.1f tasks/s (median %.2f s per round; median queue wait %.1f ms)"
          % (WORKERS, CONC, N / qs, qs, statistics.median(x[1] for x in q)))
    print("direct (SDK, %d threads):          %.1f tasks/s (median %.2f s per round)" % (WORKERS * CONC, N / ds, ds))
    print("queue / direct: %.2f" % (ds / qs))
    status = 0
finally:
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    subprocess.run(["rm", "-rf", tmp])
    # Not through interpreter shutdown: pending results' finalizers would
    # reach for the redis-server just stopped.
    sys.stdout.flush()
    os._exit(status)
