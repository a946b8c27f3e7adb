"""Build the nsbox package and its C extension over libnsbox.

Where libnsbox is found, in order:
  1. NSBOX_INCLUDE_DIR / NSBOX_LIBRARY_DIR (e.g. a build tree's src/include and
     src/lib/.libs; the test suite uses these),
  2. pkg-config libnsbox (set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a private
     prefix).
The extension records the library directory as its run path (RUNPATH), so an
installed nsbox in a private prefix is found without LD_LIBRARY_PATH; set
NSBOX_NO_RPATH=1 to leave it out (distribution packages).
"""
import os
import shlex
import subprocess

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
rpath = [] if os.environ.get("NSBOX_NO_RPATH") else library_dirs

setup(
    name="nsbox",
    version="0.1.0",
    description="Run untrusted code in nsbox sandboxes from Python (bindings over libnsbox)",
    packages=["nsbox", "nsbox.integrations"],
    package_data={"nsbox": ["py.typed", "_nsbox.pyi"]},
    python_requires=">=3.9",
    ext_modules=[Extension(
        "nsbox._nsbox",
        sources=["src/_nsbox.c", "src/run.c", "src/pool.c", "src/live.c"],
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        runtime_library_dirs=rpath,
        libraries=["nsbox"],
        extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
    )],
)
