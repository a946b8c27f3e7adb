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
import sys
import time

import nsbox


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def show(name, ms):
    print("%-34s p50 %7.2f ms  p95 %7.2f ms  (n=%d)" % (name, pct(ms, 50), pct(ms, 95), len(ms)))


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
        show("%s warm run_code" % lang, warm)
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
    bare = []
    for i in range(max(runs // 10, 10)):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append((time.perf_counter() - t) * 1e3)
    show("host %s -c pass" % sys.executable, bare)


if __name__ == "__main__":
    main()
