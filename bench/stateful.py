#!/usr/bin/env python3
"""The stateful sandbox (issue 28's Speed, issue 29's preloaded pool) through
the Python SDK, in one started sandbox of IMAGE:
  - a 1 MiB file written and read back (live.files.write + read), and each
    half alone;
  - a context cell `print(1)`;
  - nsbox.connect(name), a handle to the running sandbox (its INFO request
    answered), and the handle let go;
  - LiveSandbox.exec(["true"]);
  - a snapshot of the sandbox holding 100 MiB of new files, and a sandbox
    started from it (issue 28's Speed);
and, when STACK_IMAGE has pandas, issue 29's snippet through a pool that
preloaded pandas, next to the same snippet through a pool that did not and
run cold (Sandbox.run_code).

Each figure: p50, p95 and p99 over the rounds, the goal, and whether it holds.
`bench/stateful.sh` runs this as root and as nsbox-test (rootless), and
prints the CLI's `nsbox exec NAME -- true` in the same format (`row` below).

Usage: bench/stateful.py sdk IMAGE STACK_IMAGE RUNS POOL_RUNS
       bench/stateful.py row LABEL GOAL_MS HYPERFINE_JSON
(the package importable: PYTHONPATH=python after an in-place build of the
extension, as `make bench` does)
"""
import json
import os
import sys
import time

# Goals, milliseconds at p50 (issue 28's Speed; issue 29's Speed and size).
GOAL_FILES = 5.0
GOAL_CELL = 1.0
GOAL_CONNECT = 5.0
GOAL_PRELOAD = 10.0
GOAL_SNAPSHOT = 1.0      # seconds
GOAL_START_FROM = 20.0

# The snippet of issue 29's goal (its text spells `pd` without the alias).
PANDAS = "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2]}).sum())\n"
PANDAS_OUT = "a    3\ndtype: int64\n"


def pct(v, p):
    """The p-th percentile, nearest rank."""
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def header():
    print("%-44s %8s %8s %8s %5s  %-9s %s" % ("", "p50 ms", "p95 ms", "p99 ms", "n", "goal", "holds"))


def row(label, ms, goal=None):
    p50 = pct(ms, 50)
    if goal is None:
        g, holds = "-", ""
    else:
        g, holds = "<= %g ms" % goal, "yes" if p50 <= goal else "NO"
    print("%-44s %8.2f %8.2f %8.2f %5d  %-9s %s" % (label, p50, pct(ms, 95), pct(ms, 99), len(ms), g, holds))
    sys.stdout.flush()


def timed(fn, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def has_pandas(image):
    """Whether IMAGE's Python can import pandas (asked of the image itself)."""
    import nsbox
    r = nsbox.Sandbox(image).run_code("import pandas")
    return r.ok


def sdk(image, stack, runs, pool_runs):
    import warnings
    import nsbox
    seen = set()

    def once(message, category, *rest):
        # Rootless: "no usable cgroup ... rlimits instead", once, shortened.
        text = str(message)
        if text not in seen:
            seen.add(text)
            if "no usable cgroup" in text:
                text = "no usable cgroup for this user: limits are rlimits"
            print("note: %s" % text)
    warnings.showwarning = once
    # Room for the snapshot's 100 MiB in /tmp (100m by default, and the
    # memory limit is the default's).
    sb = nsbox.Sandbox(image, tmpfs_size="256m", memory="1g")
    name = "bench-stateful-%d" % os.getpid()
    header()
    with sb.start(name=name) as live:
        # Files: 1 MiB of random bytes, written, read back, compared.
        data = os.urandom(1 << 20)
        path = "/tmp/bench.bin"
        for _ in range(5):
            live.files.write(path, data)
            assert live.files.read(path) == data

        def roundtrip():
            live.files.write(path, data)
            if live.files.read(path) != data:
                raise AssertionError("1 MiB read back differs")
        row("files 1 MiB write+read (SDK)", timed(roundtrip, runs), GOAL_FILES)
        row("  write alone", timed(lambda: live.files.write(path, data), runs))
        row("  read alone", timed(lambda: live.files.read(path), runs))

        # A context cell.
        ctx = live.context("python")
        for _ in range(10):
            ctx.run("print(1)")

        def cell():
            r = ctx.run("print(1)")
            if r.stdout != "1\n":
                raise AssertionError(r.record)
        row("context cell print(1) (SDK)", timed(cell, runs), GOAL_CELL)
        ctx.close()

        # Attaching by name: what another process of the same user does.
        def attach():
            c = nsbox.connect(name)
            if c.id != live.id:
                raise AssertionError("connect attached to another sandbox")
            c.close()
        for _ in range(5):
            attach()
        row("nsbox.connect(name) (SDK)", timed(attach, runs), GOAL_CONNECT)

        # An exec.
        for _ in range(10):
            live.exec(["true"])
        assert live.exec(["true"]).ok

        def ex():
            r = live.exec(["true"])
            if not r.ok:
                raise AssertionError(r.record)
        row("LiveSandbox.exec(['true']) (SDK)", timed(ex, runs))

        # Snapshots: 100 MiB of new files in /tmp, kept; sandboxes started
        # from the snapshot (start() returns when the files are in).
        r = live.exec("head -c 104857600 /dev/urandom > /tmp/big && echo ok")
        if r.stdout != "ok\n":
            print("snapshots: skipped (100 MiB could not be written in /tmp: %s)" % r.stderr.strip())
            return pool_part(stack, pool_runs)
        snaps = []

        def snap():
            snaps.append("bench-snap-%d-%d" % (os.getpid(), len(snaps)))
            live.snapshot(snaps[-1])
        try:
            row("snapshot, 100 MiB of new files (SDK)", timed(snap, max(3, runs // 20)), GOAL_SNAPSHOT * 1e3)

            def start_from():
                t = time.perf_counter()
                s2 = nsbox.Sandbox().start(from_snapshot=snaps[0])
                dt = (time.perf_counter() - t) * 1e3
                s2.close()
                return dt
            start_from()
            row("start from it (SDK start(from_snapshot=))", [start_from() for _ in range(max(5, runs // 10))],
                GOAL_START_FROM)
            # The same with 1 MiB of files: the start's own cost, without
            # the copy of 100 MiB into the new sandbox's /tmp.
            live.exec("rm /tmp/big")
            snap()
            snaps.insert(0, snaps.pop())
            start_from()
            row("  from a snapshot of 1 MiB of files", [start_from() for _ in range(max(5, runs // 10))])
        finally:
            for n in snaps:
                nsbox.remove_snapshot(n)
    pool_part(stack, pool_runs)


def pool_part(stack, pool_runs):
    import nsbox

    # The preloaded pool.
    if not stack:
        print("preloaded pool: skipped (no image with pandas: BENCH_STACK_IMAGE names one)")
        return
    if not has_pandas(stack):
        print("preloaded pool: skipped (image '%s' has no pandas: BENCH_STACK_IMAGE names one)" % stack)
        return
    ssb = nsbox.Sandbox(stack)
    cold = timed(lambda: ssb.run_code(PANDAS), max(10, pool_runs // 5))
    # A pool counts a sandbox ready when its spawn returns, before its
    # interpreter has started and imported what it preloads; the call that
    # takes it waits for the rest. So that the figure is the pool that keeps
    # up (its interpreters waiting for the code), each call is made after
    # the pool is full and 1.5 times a cold run of the snippet more: time
    # for the newest interpreter's import. The wait spins: a call after half
    # a second of idle CPUs is 2-3 times slower on this project's VM, a
    # process on the host as much as a sandbox (docs/performance.md).
    settle = max(0.5, 1.5 * pct(cold, 50) / 1e3)
    for label, preload, wait in (("pool preload=['pandas']: pandas snippet", ["pandas"], settle),
                                 ("  called 20 ms after the pool is full", ["pandas"], 0.02),
                                 ("pool, no preload: pandas snippet", [], settle)):
        n = pool_runs if wait > 0.02 else max(10, pool_runs // 2)
        with nsbox.Pool(ssb, size=2, preload=preload) as pool:
            ms, inside = [], []
            for i in range(n + 3):
                while pool.cost()["ready"] < pool.size:
                    time.sleep(0.005)
                end = time.perf_counter() + wait
                while time.perf_counter() < end:
                    pass
                t = time.perf_counter()
                r = pool.run_code(PANDAS)
                dt = (time.perf_counter() - t) * 1e3
                if r.stdout != PANDAS_OUT:
                    raise AssertionError(r.record)
                p = r.record.get("pool") or {}
                if not p.get("warm") or p.get("preloaded", []) != preload:
                    raise AssertionError("not a warm run as asked: %s" % json.dumps(p))
                if i >= 3:
                    ms.append(dt)
                    inside.append(r.duration_ms)
        row(label, ms, GOAL_PRELOAD if preload and wait > 0.02 else None)
        if preload and wait > 0.02:
            row("  of which in the sandbox (record)", inside)
            print("  (its record's pool: %s; calls %.2f s after the pool is full)"
                  % (json.dumps(p, sort_keys=True), wait))
    row("cold Sandbox.run_code: pandas snippet", cold)


def hyperfine_row(label, goal, path):
    times = json.load(open(path))["results"][0]["times"]
    row(label, [t * 1e3 for t in times], float(goal) if goal != "-" else None)


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "sdk":
        sdk(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) == 5 and sys.argv[1] == "row":
        hyperfine_row(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 2 and sys.argv[1] == "header":
        header()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
