# nsbox warm pool, Python: run by a .pth line in a user site directory while
# the interpreter starts (`python3 /tmp/main.py` with PYTHONUSERBASE pointing
# at it). It does not wait there: it puts a finder first on sys.meta_path
# that acts on the last import site.py makes, `usercustomize`, so that the
# rest of the start-up (the other .pth files, sitecustomize) is done before
# the code arrives. The finder takes itself off, waits for the code on stdin
# (the pool's channel), writes it where `nsbox run-code` puts it, replaces
# stdin with /dev/null as a cold run has it, takes back what it changed (the
# variable, the user site directory), and declines the import: the search
# goes on as a cold run's does (an image's own usercustomize is still found).
# The script that now runs sees the interpreter a cold run would: same argv,
# __file__, sys.path, os.environ, sys.modules (nothing is imported here).
# TARGET is set by the pool before this text runs.
def _nsbox_warm(target):
    import os
    import sys
    parts = []
    try:
        while True:
            b = os.read(0, 1 << 16)
            if not b:
                break
            parts.append(b)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            data = memoryview(b"".join(parts))
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
    except OSError as e:
        os.write(2, ("nsbox: warm pool: take the code: %s\n" % e.strerror).encode())
        os._exit(125)
    site = sys.modules["site"]
    user_site = site.USER_SITE
    os.environ.pop("PYTHONUSERBASE", None)
    while user_site in sys.path:
        sys.path.remove(user_site)
    sys.path_importer_cache.pop(user_site, None)
    site.USER_BASE = None
    site.USER_SITE = None
    site.getusersitepackages()


class _NsboxWarmFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "usercustomize" or path is not None:
            return None
        import sys
        sys.meta_path.remove(cls)
        _nsbox_warm(TARGET)  # noqa: F821 (given by the .pth line)
        return None


def _nsbox_warm_arm():
    import sys
    sys.meta_path.insert(0, _NsboxWarmFinder)


_nsbox_warm_arm()
