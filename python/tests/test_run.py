"""Sandbox.run and Result: the record, every field against the CLI's --json,
and how runs end (exit codes, signals, limits)."""
import os

import pytest

import nsbox

# Fields whose values differ between two runs of the same command.
VOLATILE = {"id", "duration_ms"}


def compare_records(sdk, cli_rec):
    assert set(sdk) == set(cli_rec), "the SDK's record has the CLI's keys"
    for k in cli_rec:
        if k in VOLATILE:
            assert type(sdk[k]) is type(cli_rec[k]), k
        elif k == "resources":
            assert set(sdk[k]) == set(cli_rec[k])
            assert sdk[k]["cpu_source"] == cli_rec[k]["cpu_source"]
            for f in sdk[k]:
                assert (sdk[k][f] is None) == (cli_rec[k][f] is None), f
        else:
            assert sdk[k] == cli_rec[k], k


def check_attributes(r):
    """Every record key the spec names is an attribute with the record's value."""
    for k in ("status", "exit_code", "signal", "stdout_truncated", "stderr_truncated", "stdout_bytes",
              "timed_out", "oom_killed", "pids_limit_hit", "duration_ms", "resources", "limits", "isolation",
              "network", "denied", "exit_status", "id", "command", "stderr_bytes"):
        assert getattr(r, k) == r.record[k], k
    assert r.stdout == (r.record["stdout"] or "")
    assert r.stderr == (r.record["stderr"] or "")
    assert [c.path for c in r.changes] == [c["path"] for c in r.record["changes"]]
    assert (r.error is None) == (r.record["error"] is None)


SCRIPT = "echo out; echo err >&2; exit 3"


def test_record_matches_cli(rootfs, cli):
    opts = dict(rootfs=rootfs, memory="64m", pids=20, timeout=10, max_output="1k", hostname="box",
                env={"A": "1"}, workdir="/tmp")
    r = nsbox.Sandbox(**opts).run(["sh", "-c", SCRIPT])
    rec, rc = cli("run", "--json", "--rootfs", rootfs, "--memory", "64m", "--pids-limit", "20", "--timeout", "10",
                  "--max-output", "1k", "--hostname", "box", "-e", "A=1", "-w", "/tmp", "--", "sh", "-c", SCRIPT)
    compare_records(r.record, rec)
    check_attributes(r)
    assert r.exit_code == 3 and rc == 3 and r.exit_status == 3
    assert r.stdout == "out\n" and r.stderr == "err\n"
    assert not r.ok and r.status == "exited"
    assert r.limits["memory_bytes"] == 64 << 20 and r.limits["pids"] == 20


def test_code_record_matches_cli(default_image, cli):
    code = "import sys\nprint('x')\n1/0\n"
    r = nsbox.run_code(code, image=default_image, timeout=30)
    rec, rc = cli("run-code", "--lang", "python", "--json", "--image", default_image, "--timeout", "30", "-c", code)
    compare_records(r.record, rec)
    check_attributes(r)
    assert r.error.kind == "runtime_error" and "ZeroDivisionError" in r.error.message
    assert r.exit_code == rc == 1


def test_ok_and_str(rootfs):
    r = nsbox.run(["echo", "hello"], rootfs=rootfs)
    assert r.ok and r.stdout == "hello\n" and r.error is None
    assert str(r) == "hello\n[exited with code 0]"


def test_shell_string_and_stdin(rootfs):
    sb = nsbox.Sandbox(rootfs=rootfs)
    assert sb.run("echo $((6*7))").stdout == "42\n"
    assert sb.run(["cat"], stdin="from stdin").stdout == "from stdin"
    assert sb.run(["wc", "-c"], stdin=b"x" * 200000).stdout.strip() == "200000"
    r, w = os.pipe()
    os.write(w, b"through a pipe")
    os.close(w)
    assert sb.run(["cat"], stdin=r).stdout == "through a pipe"
    os.close(r)


def test_timeout(rootfs):
    r = nsbox.run(["sleep", "100"], rootfs=rootfs, timeout="500ms")
    assert r.timed_out and r.status == "timed_out" and not r.ok and r.exit_status == 124
    assert "timed out" in str(r)
    # A run's timeout overrides the sandbox's.
    sb = nsbox.Sandbox(rootfs=rootfs, timeout=100)
    assert sb.run(["sleep", "100"], timeout=0.5).timed_out


def test_oom(rootfs):
    r = nsbox.run(["probe", "hog", "256"], rootfs=rootfs, memory="32m")
    if r.limits["enforced_by"].startswith("cgroup"):
        assert r.oom_killed and r.status == "oom_killed" and r.exit_status == 137
        assert "out of memory" in str(r)
    else:   # rlimit: the allocation fails instead
        assert r.exit_code == 3 and "hog_failed_at=" in r.stdout


def test_pids_limit(rootfs):
    r = nsbox.run(["probe", "forkbomb"], rootfs=rootfs, pids=16, timeout=20)
    forks = int(r.stdout.split("forks=")[1].split()[0])
    assert 8 <= forks <= 16
    assert "fork_errno=Resource temporarily unavailable" in r.stdout
    if r.limits["enforced_by"].startswith("cgroup"):   # rlimits cannot tell
        assert r.pids_limit_hit


def test_truncation(rootfs):
    r = nsbox.run("yes | head -c 100000", rootfs=rootfs, max_output="1k")
    assert r.stdout_truncated and not r.stderr_truncated
    assert r.stdout_bytes == 100000
    assert len(r.stdout) < 2000


def test_signal(rootfs):
    r = nsbox.run("kill -9 $$", rootfs=rootfs)
    assert r.status == "signaled" and r.signal == 9 and r.exit_code is None and r.exit_status == 137
    assert "signal 9" in str(r)


def test_command_not_found_is_data(rootfs):
    r = nsbox.run(["no-such-command"], rootfs=rootfs)
    assert r.exit_status == 127 and r.error.kind == "exec" and "no-such-command" in r.error.message


def test_unknown_record_key_is_an_attribute(rootfs):
    r = nsbox.run(["true"], rootfs=rootfs)
    r.record["added_later"] = 5
    assert r.added_later == 5
    with pytest.raises(AttributeError):
        r.not_a_field


def test_fork_after_a_run(rootfs):
    """A child forked after a main-thread run can run sandboxes too."""
    assert nsbox.run(["true"], rootfs=rootfs).ok
    pid = os.fork()
    if pid == 0:
        import signal
        signal.alarm(120)   # a hang fails the test instead of stopping the suite
        try:
            os._exit(0 if nsbox.run(["echo", "child"], rootfs=rootfs, timeout=30).stdout == "child\n" else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_result_pickles(rootfs):
    import pickle
    r = nsbox.run(["echo", "x"], rootfs=rootfs)
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.record == r.record and r2.stdout == "x\n"


def test_volumes_on_missing_mount_points(rootfs, tmp_path):
    # A volume onto a file and onto a nested directory the image lacks: the
    # mount points are made in the sandbox's own root, never in the image
    # (tests/func/mountpoints.test checks the image byte for byte), for a
    # run and for a started sandbox's exec alike.
    (tmp_path / "vol").mkdir()
    (tmp_path / "vol" / "file.conf").write_text("conf\n")
    (tmp_path / "vol" / "sub").write_text("sub\n")
    os.chmod(tmp_path, 0o755)
    vols = ["%s/vol/file.conf:/opt/new/new.conf:ro" % tmp_path, ("%s/vol" % tmp_path, "/mnt/a/b/c")]
    script = "cat /opt/new/new.conf; ls /mnt/a/b/c; test -e /opt/new/new.conf && echo ok"
    sb = nsbox.Sandbox(rootfs=rootfs, volumes=vols)
    r = sb.run(["sh", "-c", script])
    assert r.ok, r.stderr
    assert r.stdout.split() == ["conf", "file.conf", "sub", "ok"]
    assert not os.path.exists(os.path.join(rootfs, "opt", "new")) and not os.path.exists(os.path.join(rootfs, "mnt", "a"))
    with sb.start() as live:
        e = live.exec(["sh", "-c", script])
    assert e.ok, e.stderr
    assert e.stdout.split() == ["conf", "file.conf", "sub", "ok"]


def test_the_janitor_outlives_a_group_signal(rootfs):
    """An SDK run's cgroup janitor ignores what ends its caller's process
    group (a harness's SIGTERM, a hangup): else the run's cgroups stay
    behind. (The CLI blocks these for its signalfd, so its janitor always
    inherited that; an embedding program's did not.)"""
    import signal
    import threading
    import time
    by = nsbox.run(["true"], rootfs=rootfs).limits["enforced_by"]
    if not by.startswith("cgroup"):
        pytest.skip("no cgroup for this identity (limits by %s): a run has no janitor" % by)
    t = threading.Thread(target=nsbox.run, args=(["sleep", "2"],), kwargs={"rootfs": rootfs, "timeout": 60})
    t.start()
    jan = None
    for _ in range(200):
        for tid in os.listdir("/proc/self/task"):
            try:
                kids = open("/proc/self/task/%s/children" % tid).read().split()
            except OSError:
                continue
            for k in kids:
                try:
                    if open("/proc/%s/comm" % k).read().strip() == "nsbox-janitor":
                        jan = int(k)
                except OSError:
                    pass
        if jan:
            break
        time.sleep(0.05)
    try:
        assert jan, "the run's janitor was not found among our children"
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            os.kill(jan, sig)
        time.sleep(0.2)
        # a janitor that died is a zombie until its run reaps it
        state = open("/proc/%d/stat" % jan).read().rsplit(")", 1)[1].split()[0]
        assert state not in ("Z", "X"), "the janitor died of a signal (state %s)" % state
    finally:
        t.join()
