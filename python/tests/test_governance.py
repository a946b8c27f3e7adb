"""audit.log, audit.artifacts and the import gate through the SDK: the same
duties, by the same library code, as nsbox run and run-code."""
import json
import os
import stat

import pytest

import nsbox


def lines(path):
    with open(path, "rb") as f:
        return [json.loads(raw) for raw in f]


def test_audit_line_per_run(rootfs, tmp_path):
    log = tmp_path / "audit.log"
    sb = nsbox.Sandbox(rootfs=rootfs, settings={"audit.log": str(log)})
    assert sb.run(["sh", "-c", "x=OUT; echo SECRET-$x-PUT; exit 3"]).exit_code == 3
    assert sb.run(["true"]).exit_code == 0
    got = lines(log)
    assert [l["exit_status"] for l in got] == [3, 0]
    assert all(l["host_uid"] == os.getuid() and "command_sha256" in l for l in got)
    assert "SECRET-OUT-PUT" not in log.read_text()   # the output never
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_audit_log_that_cannot_be_opened_refuses_the_run(rootfs, tmp_path):
    marker = tmp_path / "ran"
    sb = nsbox.Sandbox(rootfs=rootfs, settings={"audit.log": str(tmp_path)},   # a directory
                       volumes=[(str(tmp_path), "/out")])
    with pytest.raises(nsbox.SandboxError):
        sb.run(["touch", "/out/ran"])
    assert not marker.exists()


def test_audit_on_error_warn_runs_with_a_warning(rootfs, tmp_path):
    sb = nsbox.Sandbox(rootfs=rootfs, settings={"audit.log": str(tmp_path), "audit.on_error": "warn"})
    with pytest.warns(RuntimeWarning, match="running without an audit line"):
        assert sb.run(["true"]).exit_code == 0


def test_artifacts(rootfs, tmp_path):
    d = tmp_path / "art"
    sb = nsbox.Sandbox(rootfs=rootfs, settings={"audit.artifacts": str(d)})
    r = sb.run(["sh", "-c", "exit 4"])
    runs = os.listdir(d)
    assert len(runs) == 1
    rec = json.loads((d / runs[0] / "result.json").read_text())
    assert rec["id"] == r.id and rec["exit_status"] == 4
    for name in os.listdir(d / runs[0]):
        assert stat.S_IMODE((d / runs[0] / name).stat().st_mode) == 0o600


def test_import_gate_blocks(default_image, tmp_path):
    log = tmp_path / "audit.log"
    with pytest.raises(nsbox.SandboxError, match="^Security policy blocked import: os$") as ei:
        nsbox.run_code("import os\nprint('ran')", image=default_image,
                       settings={"code.import_gate": "block", "audit.log": str(log)})
    assert ei.value.record["code"]["blocked_imports"] == ["os"]
    (line,) = lines(log)
    assert line["status"] == "setup_failed"


@pytest.mark.parametrize("code,hit", [
    ("from subprocess import run", "subprocess"),
    ("__import__('socket')", "socket"),
    ("import importlib\nimportlib.import_module('shutil')", "shutil"),
    ("import os.path", "os.path"),
])
def test_import_gate_forms(default_image, code, hit):
    with pytest.raises(nsbox.SandboxError, match="Security policy blocked import") as ei:
        nsbox.run_code(code, image=default_image, settings={"code.import_gate": "block"})
    assert hit in ei.value.record["code"]["blocked_imports"]


def test_import_gate_warn_runs(default_image):
    with pytest.warns(RuntimeWarning, match="Security policy blocked import: os"):
        r = nsbox.run_code("import os\nprint('ran')", image=default_image,
                           settings={"code.import_gate": "warn"})
    assert r.exit_code == 0 and r.stdout == "ran\n"
    assert r.record["code"]["import_gate"] == "warn"
    assert r.record["code"]["blocked_imports"] == ["os"]


def test_import_gate_passes_clean_code(default_image):
    r = nsbox.run_code("import json\nprint(json.dumps(1))", image=default_image,
                       settings={"code.import_gate": "block"})
    assert r.exit_code == 0 and r.stdout == "1\n"
