"""Output callbacks see output while the run goes on; threads run at once."""
import os
import threading

import pytest

import nsbox


def test_callback_sees_output_before_the_end(rootfs):
    # The payload waits for an answer that the callback gives only after it
    # has seen the first line: were output delivered only at the end, the
    # run would time out.
    r_fd, w_fd = os.pipe()
    seen = []

    def on_out(text):
        seen.append(text)
        if "first" in "".join(seen) and w_fd >= 0:
            os.write(w_fd, b"go\n")

    try:
        r = nsbox.run(["sh", "-c", "echo first; read x; echo got $x; echo e >&2"], rootfs=rootfs, timeout=30,
                      stdin=r_fd, on_stdout=on_out, on_stderr=lambda t: seen.append(("err", t)))
    finally:
        os.close(r_fd)
        os.close(w_fd)
    assert not r.timed_out
    assert r.stdout == "first\ngot go\n"
    assert "".join(s for s in seen if isinstance(s, str)) == r.stdout
    assert ("err", "e\n") in seen


def test_callback_gets_everything_beyond_the_capture(rootfs):
    got = []
    r = nsbox.run("yes | head -c 300000", rootfs=rootfs, max_output="1k", on_stdout=got.append)
    assert r.stdout_truncated and len("".join(got)) == 300000 == r.stdout_bytes


def test_callback_exception_kills_the_run(rootfs):
    def boom(text):
        raise RuntimeError("stop: " + text.strip())

    with pytest.raises(RuntimeError, match="stop: hi"):
        nsbox.run(["sh", "-c", "echo hi; sleep 1000"], rootfs=rootfs, timeout=600, on_stdout=boom)


def test_utf8_split_across_chunks(rootfs):
    got = []
    # 40000 'é' (2 bytes each): reads of 64 KiB split some of them.
    r = nsbox.run("x='%s'; i=0; while [ $i -lt 400 ]; do printf %%s \"$x\"; i=$((i+1)); done" % ("é" * 100),
                  rootfs=rootfs, max_output="1m", on_stdout=got.append)
    assert "".join(got) == r.stdout == "é" * 40000


def test_two_threads_run_at_once(rootfs):
    # Each payload waits until both have started: only runs that proceed at
    # the same time (the GIL released) get past the barrier.
    barrier = threading.Barrier(2, timeout=60)
    results = {}

    def worker(n):
        r_fd, w_fd = os.pipe()

        def on_out(text):
            if "ready" in text:
                barrier.wait()
                os.write(w_fd, b"go\n")
        try:
            results[n] = nsbox.run(["sh", "-c", "echo ready; read x; echo %d $x" % n], rootfs=rootfs,
                                   timeout=120, stdin=r_fd, on_stdout=on_out)
        except BaseException as e:
            results[n] = e
        finally:
            os.close(r_fd)
            os.close(w_fd)

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[1].stdout == "ready\n1 go\n" and results[2].stdout == "ready\n2 go\n"
