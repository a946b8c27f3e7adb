#!/bin/bash
# The warm pool's latency through the Python SDK (bench/pool.py): builds the
# extension against BUILDDIR's libnsbox in a temporary directory and runs it.
# Usage: bench/pool.sh [BUILDDIR] [RUNS] [SIZE]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here}" && pwd)
PY=/usr/bin/python3
[ -e "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] ||
	{ echo "bench: python3-dev is needed for the pool benchmark"; exit 1; }
T=$(mktemp -d /tmp/nsbox-bench-pool.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp -r "$here/python" "$T/python"
rm -rf "$T/python/build" "$T/python"/*.egg-info "$T/python"/nsbox/*.so
(cd "$T/python" && NSBOX_INCLUDE_DIR="$here/src/include" NSBOX_LIBRARY_DIR="$build/src/lib/.libs" \
	"$PY" setup.py -q build_ext --inplace -t "$T/build") >"$T/build.log" 2>&1 || { cat "$T/build.log"; exit 1; }
echo "== warm pool, Python SDK ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs)"
PYTHONPATH="$T/python" "$PY" "$here/bench/pool.py" "${2:-${BENCH_POOL_RUNS:-200}}" "${3:-2}"
