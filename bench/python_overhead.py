#!/usr/bin/env python3
"""The Python SDK's overhead over the C call, per run.

Each run of Sandbox.run(["/bin/true"]) is timed as a whole and, inside it,
(from the main thread, whose runs go to a worker so that Ctrl-C works, and
from another thread, which runs them itself)
the extension's call into libnsbox (_nsbox.run: configuration, spawn, wait,
JSON record). The overhead is the difference: argument conversion, the stdin
and callback plumbing, json.loads of the record and the Result. Also shown:
the same run through Sandbox.arun (its thread and future), and a whole run
for scale.

Usage: bench/python_overhead.py ROOTFS [RUNS]
  with the package importable (PYTHONPATH=python after an in-place build, or
  a venv with `pip install ./python`), e.g.
  rootfs/busybox.sh /tmp/bb && PYTHONPATH=python python3 bench/python_overhead.py /tmp/bb 300
"""
import asyncio
import statistics
import sys
import threading
import time

import nsbox
from nsbox import _nsbox
from nsbox import sandbox as _sandbox


def main():
    rootfs = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    inner = []
    real_run = _nsbox.run

    def timed_run(*a):
        t = time.perf_counter()
        try:
            return real_run(*a)
        finally:
            inner.append(time.perf_counter() - t)

    class Shim:
        """_nsbox with run() timed; everything else passed through."""
        def __getattr__(self, name):
            return timed_run if name == "run" else getattr(_nsbox, name)

    _sandbox._nsbox = Shim()
    sb = nsbox.Sandbox(rootfs=rootfs, timeout=0)
    for _ in range(10):   # warm up (page cache, seccomp cache)
        sb.run(["/bin/true"])
    inner.clear()

    def measure(fn):
        inner.clear()
        outer = []
        for _ in range(runs):
            t = time.perf_counter()
            fn()
            outer.append(time.perf_counter() - t)
        over = sorted((o - i) * 1e3 for o, i in zip(outer, inner))
        return over, sorted(o * 1e3 for o in outer)

    sync_over, sync_total = measure(lambda: sb.run(["/bin/true"]))
    box = {}
    t = threading.Thread(target=lambda: box.update(v=measure(lambda: sb.run(["/bin/true"]))))
    t.start()
    t.join()
    thread_over = box["v"][0]
    loop = asyncio.new_event_loop()
    async_over, _ = measure(lambda: loop.run_until_complete(sb.arun(["/bin/true"])))
    loop.close()

    def q(v, p):
        return v[min(len(v) - 1, int(p * len(v)))]

    print("runs: %d of /bin/true on %s (libnsbox %s, Python %s)" % (runs, rootfs, nsbox.version(),
                                                                    sys.version.split()[0]))
    print("whole run (Sandbox.run):    median %.3f ms  p90 %.3f ms" % (statistics.median(sync_total),
                                                                      q(sync_total, 0.9)))
    print("SDK overhead, Sandbox.run (main thread):  median %.3f ms  p90 %.3f ms  max %.3f ms" % (
        statistics.median(sync_over), q(sync_over, 0.9), sync_over[-1]))
    print("SDK overhead, Sandbox.run in another thread: median %.3f ms  p90 %.3f ms  max %.3f ms" % (
        statistics.median(thread_over), q(thread_over, 0.9), thread_over[-1]))
    print("SDK overhead, Sandbox.arun: median %.3f ms  p90 %.3f ms  max %.3f ms" % (
        statistics.median(async_over), q(async_over, 0.9), async_over[-1]))
    ok = statistics.median(sync_over) < 1.0
    print("target: under 1 ms per run: %s" % ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
