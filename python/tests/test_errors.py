"""Failures of nsbox itself raise SandboxError; values are checked up front."""
import errno

import pytest

import nsbox


def test_missing_image():
    with pytest.raises(nsbox.SandboxError) as e:
        nsbox.run(["true"], image="no-such-image-for-pytest")
    assert e.value.step == "rootfs" and e.value.errno == errno.ENOENT
    assert "no-such-image-for-pytest" in e.value.message
    assert e.value.hint and "image build" in e.value.hint
    assert not isinstance(e.value, nsbox.IsolationUnavailable)


@pytest.mark.parametrize("kw", [dict(memory="12x"), dict(cpus="lots"), dict(timeout="soon"), dict(pids=-1),
                                dict(network="carrier-pigeon"), dict(workspace_mode="sideways"),
                                dict(settings={"no.such.key": "1"})])
def test_bad_value_raises_at_construction(kw):
    with pytest.raises(nsbox.SandboxError) as e:
        nsbox.Sandbox(**kw)
    assert e.value.step in ("config", "policy") and e.value.errno == errno.EINVAL


@pytest.mark.parametrize("kw", [dict(memory=object()), dict(timeout=[1]), dict(volumes=[42]),
                                dict(allow_hosts="example.com")])
def test_wrong_types(kw):
    with pytest.raises(TypeError):
        nsbox.Sandbox(**kw)


def test_image_and_rootfs_conflict(rootfs):
    with pytest.raises(ValueError):
        nsbox.Sandbox("default", rootfs=rootfs)


def test_forbidden_volume(rootfs):
    sb = nsbox.Sandbox(rootfs=rootfs, volumes=["/etc:/mnt:ro"])
    with pytest.raises(nsbox.SandboxError) as e:
        sb.run(["true"])
    assert e.value.step == "volume" and "forbidden" in e.value.message


def test_setup_failure_carries_the_record(rootfs):
    # A working directory that does not exist fails inside the sandbox's setup.
    with pytest.raises(nsbox.SandboxError) as e:
        nsbox.run(["true"], rootfs=rootfs, workdir="/no/such/dir")
    assert e.value.record is not None and e.value.record["status"] == "setup_failed"
    assert e.value.step == e.value.record["error"]["step"]


def test_isolation_unavailable_is_a_sandbox_error():
    e = nsbox.SandboxError._from("namespaces", errno.EPERM,
                                 "create user namespace: Operation not permitted (hint: enable them)")
    assert isinstance(e, nsbox.IsolationUnavailable) and isinstance(e, nsbox.SandboxError)
    assert e.hint == "enable them" and e.message == "create user namespace: Operation not permitted"
    assert type(nsbox.SandboxError._from("rootfs", errno.ENOENT, "x")) is nsbox.SandboxError


def test_from_env(rootfs):
    sb = nsbox.Sandbox.from_env({"NSBOX_ROOTFS": rootfs, "NSBOX_MEMORY": "48m", "NSBOX_TIMEOUT": "7s"})
    r = sb.run(["true"])
    assert r.limits["memory_bytes"] == 48 << 20 and r.limits["timeout_ms"] == 7000
    # Keywords win over the environment, as options do in the CLI.
    r = nsbox.Sandbox.from_env({"NSBOX_ROOTFS": rootfs, "NSBOX_MEMORY": "48m"}, memory="40m").run(["true"])
    assert r.limits["memory_bytes"] == 40 << 20
    with pytest.raises(nsbox.SandboxError) as e:
        nsbox.Sandbox.from_env({"NSBOX_MEMORY": "12x"})
    assert "NSBOX_MEMORY" in str(e.value)
