# nsbox warm pool, Python: run by a .pth line in a user site directory while
# the interpreter starts (`python3 /tmp/main.py` with PYTHONUSERBASE pointing
# at it). There it takes back what it changed (the variable, the user site
# directory on sys.path and in site's attributes), so that the rest of the
# start-up (the other .pth files, sitecustomize) sees a cold run's state, and
# puts a finder first on sys.meta_path that acts on the last import site.py
# makes, `usercustomize`. The finder takes itself off, waits for the code on
# stdin (the pool's channel), writes it where `nsbox run-code` puts it,
# replaces stdin with /dev/null as a cold run has it, and goes on with the
# search as a cold run's import would (an image's own usercustomize is still
# found). It is an instance of an existing type, not a class of its own, and
# it empties this text's globals when done: nothing of it stays reachable or
# listed (object.__subclasses__, gc.get_objects). The script that now runs
# sees the interpreter a cold run would: same argv, __file__, sys.path,
# os.environ, sys.modules (nothing is imported here).
# TARGET and PRELOAD (a tuple of module names, imported before the wait:
# Pool(preload=[...])) are set by the pool before this text runs.
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


def _nsbox_warm_arm(g):
    import os
    import sys
    site = sys.modules["site"]
    user_site = site.USER_SITE
    os.environ.pop("PYTHONUSERBASE", None)
    while user_site in sys.path:
        sys.path.remove(user_site)
    sys.path_importer_cache.pop(user_site, None)
    site.USER_BASE = None
    site.USER_SITE = None
    site.getusersitepackages()
    warm = g["_nsbox_warm"]
    bootstrap = sys.modules.get("_frozen_importlib")

    def find_spec(name, path=None, target=None):
        if name != "usercustomize" or path is not None:
            return None
        sys.meta_path.remove(finder)
        del finder.find_spec   # no cycle left: all of it goes by refcount
        sys.path_importer_cache.pop(user_site, None)
        for module in PRELOAD:  # noqa: F821 (given by the pool)
            try:
                __import__(module)
            except BaseException as e:
                os.write(2, ("nsbox: warm pool: preload %s: %s: %s\n" % (module, type(e).__name__, e)).encode())
                os._exit(125)
        # What start-up (and the preload) left for the cyclic collector
        # (classes a module replaced with C ones, such as functools'
        # partial) is gone by now in a cold run, whose start kept
        # allocating: collect it here too, without leaving gc imported.
        # Before the wait, not after: a full collection is about 1 ms that
        # the run would otherwise wait for. Nothing cyclic is made after
        # it: the wait's buffers, and the hook's own functions once
        # g.clear() breaks their cycle with g, go by refcount.
        had_gc = "gc" in sys.modules
        __import__("gc").collect()
        if not had_gc:
            sys.modules.pop("gc", None)
        warm(TARGET)  # noqa: F821 (given by the .pth line)
        g.clear()
        # The search goes on from the start of sys.meta_path (importlib
        # would skip the finder after this one, which we took off).
        more = getattr(bootstrap, "_find_spec", None)
        return more(name, path, target) if more else None

    finder = type(sys.implementation)(find_spec=find_spec)
    sys.meta_path.insert(0, finder)


_nsbox_warm_arm(globals())
