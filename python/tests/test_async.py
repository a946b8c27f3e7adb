"""asyncio: concurrent runs, and cancellation that leaves nothing behind."""
import asyncio
import os
import uuid

import pytest

import nsbox
from conftest import cgroups_of, marker_processes


def test_eight_concurrent_runs(rootfs):
    sb = nsbox.Sandbox(rootfs=rootfs, timeout=60)

    async def main():
        return await asyncio.gather(*(sb.arun(["sh", "-c", "echo %d" % i]) for i in range(8)))

    results = asyncio.run(main())
    assert [r.stdout for r in results] == ["%d\n" % i for i in range(8)]
    assert len({r.id for r in results}) == 8


def test_eight_concurrent_code_runs(default_image):
    sb = nsbox.Sandbox(default_image, timeout=60)

    async def main():
        return await asyncio.gather(*(sb.arun_code("print(%d * 6)" % i) for i in range(8)))

    assert [r.stdout for r in asyncio.run(main())] == ["%d\n" % (i * 6) for i in range(8)]


def test_async_conveniences(rootfs, bashroot):
    async def main():
        return (await nsbox.arun(["echo", "a"], rootfs=rootfs),
                await nsbox.arun_code("echo b", "bash", rootfs=bashroot))
    a, b = asyncio.run(main())
    assert a.stdout == "a\n" and b.stdout == "b\n"


def test_cancel_kills_and_leaves_nothing(rootfs):
    marker = "nsbox-cancel-" + uuid.uuid4().hex
    mounts_before = open("/proc/self/mountinfo").read()
    seen = {}

    async def main():
        loop = asyncio.get_running_loop()
        started = asyncio.Event()

        def on_out(text):
            if "started" in text and not started.is_set():
                # The payload runs: note its processes and cgroups now.
                pids = marker_processes(marker)
                seen["pids"] = pids
                seen["cgroups"] = sorted({d for p in pids for d in cgroups_of(p)})
                loop.call_soon_threadsafe(started.set)

        sb = nsbox.Sandbox(rootfs=rootfs, timeout=600)
        task = asyncio.ensure_future(sb.arun(["sh", "-c", "echo started; sleep 1000; : " + marker],
                                             on_stdout=on_out))
        await asyncio.wait_for(started.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen["pids"], "the payload was seen running"
    assert marker_processes(marker) == [], "no process of the sandbox is left"
    for d in seen["cgroups"]:
        assert not os.path.exists(d), "the run's cgroup %s is gone" % d
    assert open("/proc/self/mountinfo").read() == mounts_before, "no mount is left"
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_cancel_before_the_sandbox_exists(rootfs):
    """Cancelled at once: the kill is remembered and applied when it starts."""
    marker = "nsbox-early-" + uuid.uuid4().hex

    async def main():
        sb = nsbox.Sandbox(rootfs=rootfs, timeout=600)
        task = asyncio.ensure_future(sb.arun(["sh", "-c", "sleep 1000; : " + marker]))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert marker_processes(marker) == []


def test_errors_reach_the_task():
    async def main():
        await nsbox.arun(["true"], image="no-such-image-for-pytest")
    with pytest.raises(nsbox.SandboxError):
        asyncio.run(main())


def test_keyboard_interrupt_kills_a_sync_run(rootfs):
    """Ctrl-C during Sandbox.run in the main thread: the handler runs while
    the sandbox still runs (not once the run ended), its KeyboardInterrupt
    kills the sandbox, and nothing of it is left."""
    import signal
    import threading
    import time
    marker = "nsbox-sigint-" + uuid.uuid4().hex
    state = {}

    def handler(signum, frame):
        state["alive"] = bool(marker_processes(marker))
        raise KeyboardInterrupt

    def sender():
        for _ in range(6000):
            if marker_processes(marker):
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    old = signal.signal(signal.SIGINT, handler)
    try:
        threading.Thread(target=sender, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            nsbox.run(["sh", "-c", "sleep 1000; : " + marker], rootfs=rootfs, timeout=60)
    finally:
        signal.signal(signal.SIGINT, old)
    assert state["alive"], "the signal was handled while the sandbox ran"
    assert marker_processes(marker) == []


def test_keyboard_interrupt_during_the_hand_over(rootfs, monkeypatch):
    """Ctrl-C whose handler runs inside the hand-over to the worker thread
    (submit() waits for a new thread to start; under load the run is queued
    and already running by then): the run is still killed and waited for."""
    import concurrent.futures
    import time
    from nsbox import sandbox as sandbox_module
    marker = "nsbox-handover-" + uuid.uuid4().hex
    seen = {}

    class Interrupted(concurrent.futures.ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            super().submit(*args, **kwargs)
            for _ in range(6000):
                if marker_processes(marker):
                    seen["running"] = True
                    break
                time.sleep(0.01)
            raise KeyboardInterrupt

    worker = Interrupted(1)
    monkeypatch.setattr(sandbox_module, "_main_worker", worker)
    try:
        with pytest.raises(KeyboardInterrupt):
            nsbox.run(["sh", "-c", "sleep 1000; : " + marker], rootfs=rootfs, timeout=60)
        assert seen.get("running"), "the interrupt came while the run was running"
        assert marker_processes(marker) == [], "the run was left running"
    finally:
        worker.shutdown(wait=False)


def test_keyboard_interrupt_before_the_run_starts(monkeypatch):
    """Ctrl-C while the run waits in the worker's queue: it never starts."""
    import concurrent.futures
    import threading
    from nsbox import sandbox as sandbox_module
    gate = threading.Event()

    class Busy(concurrent.futures.ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            super().submit(gate.wait)            # the worker is busy
            super().submit(*args, **kwargs)        # the run queued behind it
            raise KeyboardInterrupt

    worker = Busy(1)
    monkeypatch.setattr(sandbox_module, "_main_worker", worker)
    started = []
    with pytest.raises(KeyboardInterrupt):
        sandbox_module._interruptible(lambda handle: started.append(handle))
    gate.set()
    worker.shutdown(wait=True)
    assert started == [], "a run interrupted before it started ran anyway"


def test_keyboard_interrupt_while_an_async_run_starts(rootfs, monkeypatch):
    """A KeyboardInterrupt raised while an async run's thread starts (outside
    asyncio.run, whose SIGINT handler cancels instead): the run, already
    under way, is killed and waited for."""
    import threading
    import time
    marker = "nsbox-astart-" + uuid.uuid4().hex
    seen = {}

    class Interrupted(threading.Thread):
        def start(self):
            super().start()
            if self.name == "nsbox-run":
                for _ in range(6000):
                    if marker_processes(marker):
                        seen["running"] = True
                        break
                    time.sleep(0.01)
                raise KeyboardInterrupt

    monkeypatch.setattr(threading, "Thread", Interrupted)
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(nsbox.arun(["sh", "-c", "sleep 1000; : " + marker], rootfs=rootfs, timeout=60))
    finally:
        monkeypatch.undo()
        loop.close()
    assert seen.get("running"), "the interrupt came while the run was running"
    assert marker_processes(marker) == [], "the run was left running"


def test_a_cancelled_handle_starts_nothing(rootfs):
    import errno
    from nsbox import _nsbox
    h = _nsbox.Handle()
    h.kill()
    assert h.cancelled
    for _ in range(2):   # a cancelled handle stays cancelled: nothing starts
        with pytest.raises(_nsbox.Error) as e:
            _nsbox.run(None, (("rootfs", rootfs, "test"),), ["true"], None, None, -1, None, h, 0)
        assert e.value.args[:2] == ("run", errno.ECANCELED)