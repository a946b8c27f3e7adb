"""images(), check(), version()."""
import nsbox


def test_check_is_the_cli_report(cli):
    rep = nsbox.check()
    rec, _ = cli("check", "--json")
    assert [i["name"] for i in rep["items"]] == [i["name"] for i in rec["items"]]
    assert isinstance(rep["default_run_works"], bool)
    assert rep["default_run_works"], "this host runs sandboxes (the suite would skip otherwise)"
    names = [i["name"] for i in rep["items"]]
    assert "user namespaces" in names


def test_images_and_version():
    for i in nsbox.images():
        assert i.name and i.path.endswith("rootfs") and i.size_bytes >= 0
    assert nsbox.version()
