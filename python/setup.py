"""Build the nsbox package and its C extension over libnsbox.

Where libnsbox is found, in order:
  1. NSBOX_INCLUDE_DIR / NSBOX_LIBRARY_DIR (e.g. a build tree's src/include and
     src/lib/.libs; the test suite uses these),
  2. pkg-config libnsbox (set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a private
     prefix).
The extension records the library directory as its run path (RUNPATH), so an
installed nsbox in a private prefix is found without LD_LIBRARY_PATH; set
NSBOX_NO_RPATH=1 to leave it out (distribution packages), NSBOX_RPATH=DIR to
record another directory (make install links against the build tree and
records the install prefix's).

The build never writes into the source tree: build/ and the egg-info go to
NSBOX_BUILD_DIR, or to a private temporary directory removed when the build
ends. Warnings are errors only with NSBOX_WERROR=1 (the test suite sets it).
The metadata is in pyproject.toml.
"""
import atexit
import os
import shlex
import shutil
import subprocess
import tempfile

from setuptools import Extension, setup


def _pkgconfig(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "libnsbox"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(
            "nsbox: libnsbox not found (%s). Install nsbox first (make install), "
            "then set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, or set NSBOX_INCLUDE_DIR "
            "and NSBOX_LIBRARY_DIR." % e)
    return shlex.split(out)


def _library():
    inc, lib = os.environ.get("NSBOX_INCLUDE_DIR"), os.environ.get("NSBOX_LIBRARY_DIR")
    if inc and lib:
        return [inc], [lib]
    cflags, libs = _pkgconfig("--cflags"), _pkgconfig("--libs-only-L")
    return [f[2:] for f in cflags if f.startswith("-I")], [f[2:] for f in libs if f.startswith("-L")] or \
        [_pkgconfig("--variable=libdir")[0]]


include_dirs, library_dirs = _library()
rpath = [] if os.environ.get("NSBOX_NO_RPATH") else \
    [os.environ["NSBOX_RPATH"]] if os.environ.get("NSBOX_RPATH") else library_dirs


def _build_dir():
    d = os.environ.get("NSBOX_BUILD_DIR")
    if d:
        return os.path.abspath(d)
    d = tempfile.mkdtemp(prefix="nsbox-pybuild-")
    atexit.register(shutil.rmtree, d, True)
    return d


build_dir = _build_dir()
werror = ["-Werror"] if os.environ.get("NSBOX_WERROR") == "1" else []

setup(
    packages=["nsbox", "nsbox.integrations"],
    package_data={"nsbox": ["py.typed", "_nsbox.pyi"]},
    options={"build": {"build_base": os.path.join(build_dir, "build")},
             "egg_info": {"egg_base": build_dir}},
    ext_modules=[Extension(
        "nsbox._nsbox",
        sources=["src/_nsbox.c", "src/run.c", "src/pool.c", "src/live.c"],
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        runtime_library_dirs=rpath,
        libraries=["nsbox"],
        extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", *werror, "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
    )],
)
