#!/usr/bin/env python3
"""Warm pool latency: nsbox.Pool(...).run_code("print(1)") through the SDK.

Two figures, each over RUNS calls in nsbox's 'default' image:
  - warm: each call made when the pool is full (the latency a caller sees when
    the pool keeps up with its calls: take, hand over, run, reap, record);
  - back to back: calls with no pause, so that each also competes for the CPUs
    with the background refill (a cold spawn and an interpreter start per call);
and, for scale, a cold Sandbox.run_code("print(1)") and the host's bare
`python3 -c pass`. Inside the warm figure: the record's duration_ms (hand-over
to the payload's reaping, in the sandbox) and the rest (teardown, record).
Also: the idle pool's cost (Pool.cost()).

Usage: bench/pool.py [RUNS] [SIZE] (the package importable: PYTHONPATH=python
after an in-place build of the extension, as `make bench` does)
"""
import statistics
import subprocess
import shutil
import sys
import threading
import time

import nsbox


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def show(name, ms, goal=""):
    print("%-34s p50 %7.2f ms  p95 %7.2f ms  p99 %7.2f ms  (n=%d)%s" % (
        name, pct(ms, 50), pct(ms, 95), pct(ms, 99), len(ms), "  " + goal if goal else ""))


def streams_rate(n, seconds, call):
    """Calls per second of `call` made by n threads at once for `seconds`."""
    done = [0] * n
    stop = time.perf_counter() + seconds

    def stream(i):
        while time.perf_counter() < stop:
            call()
            done[i] += 1
    threads = [threading.Thread(target=stream, args=(i,)) for i in range(n)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(done) / (time.perf_counter() - t)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    sb = nsbox.Sandbox("default")
    for lang, code in (("python", "print(1)"), ("node", "console.log(1)")):
        with nsbox.Pool(sb, size=size, languages=(lang,)) as pool:
            warm, inside, back = [], [], []
            for i in range(runs + 5):
                while pool.cost()["ready"] < size:
                    time.sleep(0.002)
                time.sleep(0.02)   # let the refill's last work settle
                t = time.perf_counter()
                r = pool.run_code(code, lang)
                dt = (time.perf_counter() - t) * 1e3
                assert r.stdout == "1\n", r.record
                if i >= 5:
                    warm.append(dt)
                    inside.append(r.duration_ms)
            cost = pool.cost()
            for i in range(max(runs // 4, 20)):
                t = time.perf_counter()
                pool.run_code(code, lang)
                back.append((time.perf_counter() - t) * 1e3)
        show("%s warm run_code" % lang, warm, "(goal p50 <= 1.5 ms, p99 <= 5 ms)" if lang == "python" else "")
        show("  of which in the sandbox", inside)
        show("  of which around it", [w - d for w, d in zip(warm, inside)])
        show("%s back to back" % lang, back)
        print("  idle cost, %d ready: %d tasks, %.1f MiB" % (cost["ready"], cost["processes"],
                                                            cost["memory_bytes"] / 2**20))
        cold = []
        for i in range(max(runs // 10, 10)):
            t = time.perf_counter()
            sb.run_code(code, lang)
            cold.append((time.perf_counter() - t) * 1e3)
        show("%s cold run_code" % lang, cold)
    # Throughput: 4 streams of run_code on a pool of 4, against 4 streams of
    # bubblewrap's cold `python3 -c pass` in the same image's root.
    streams = 4
    with nsbox.Pool(sb, size=streams, languages=("python",)) as pool:
        while pool.cost()["ready"] < streams:
            time.sleep(0.01)
        pool_rate = streams_rate(streams, 5.0, lambda: pool.run_code("print(1)", "python"))
    rootfs = "/var/lib/nsbox/images/default/rootfs"
    bwrap = shutil.which("bwrap")
    if bwrap:
        argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", rootfs, "/", "--proc", "/proc",
                "--dev", "/dev", "--tmpfs", "/tmp", "--cap-drop", "ALL", "python3", "-c", "pass"]
        bw_rate = streams_rate(streams, 5.0, lambda: subprocess.run(argv, check=True))
        print("%-34s %7.1f /s  bwrap cold python3 -c pass %7.1f /s  ratio %.2f  (goal >= 3.00)" % (
            "pool, %d streams of run_code" % streams, pool_rate, bw_rate, pool_rate / bw_rate))
    else:
        print("%-34s %7.1f /s  (bwrap not installed: no reference)" % ("pool, %d streams of run_code" % streams,
                                                                       pool_rate))
    bare = []
    for i in range(max(runs // 10, 10)):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append((time.perf_counter() - t) * 1e3)
    show("host %s -c pass" % sys.executable, bare)


if __name__ == "__main__":
    main()
