#!/usr/bin/env python3
"""Long-lived sandboxes through the Python SDK, in nsbox's 'default' image:
  - exec of /bin/true in a running sandbox (LiveSandbox.exec: record and all);
  - a context cell `x += 1` (Python, then Node);
and, for scale, a cold Sandbox.run(["/bin/true"]) and the host's bare
`python3 -c pass`.

Usage: bench/live.py [RUNS] (the package importable: PYTHONPATH=python after
an in-place build of the extension, as `make bench` does)
"""
import subprocess
import sys
import time

import nsbox


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def show(name, ms):
    print("%-34s p50 %7.2f ms  p95 %7.2f ms  (n=%d)" % (name, pct(ms, 50), pct(ms, 95), len(ms)))


def timed(fn, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    sb = nsbox.Sandbox("default")
    with sb.start() as live:
        for _ in range(10):
            live.exec(["/bin/true"])
        assert live.exec(["/bin/true"]).ok
        show("SDK exec /bin/true", timed(lambda: live.exec(["/bin/true"]), runs))
        for lang, cell in (("python", "x += 1"), ("node", "x += 1")):
            ctx = live.context(lang)
            ctx.run("x = 0")
            for _ in range(10):
                ctx.run(cell)

            def one():
                r = ctx.run(cell)
                assert r.ok, r.record
            show("SDK %s context cell 'x += 1'" % lang, timed(one, runs))
            r = ctx.run("print(x)" if lang == "python" else "console.log(x)")
            assert r.stdout.strip() == str(runs + 10), r.record
            ctx.close()
    show("cold Sandbox.run /bin/true", timed(lambda: sb.run(["/bin/true"]), max(20, runs // 5)))
    show("host python3 -c pass", timed(lambda: subprocess.run(["/usr/bin/python3", "-c", "pass"]), max(20, runs // 5)))


if __name__ == "__main__":
    main()
