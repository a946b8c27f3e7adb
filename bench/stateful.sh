#!/bin/bash
# The stateful sandbox (issue 28's Speed; issue 29's preloaded pool), as root
# and, when the user exists with subordinate ids, as nsbox-test (rootless):
#   - through the Python SDK (bench/stateful.py): a 1 MiB file written and
#     read back, a context cell print(1), nsbox.connect(name),
#     LiveSandbox.exec(["true"]), and a pool that preloaded pandas (when the
#     stack image has pandas) next to one that did not and a cold run;
#   - through the CLI: `nsbox exec NAME -- true` (hyperfine, no shell);
# Each figure is printed with p50, p95, p99, its goal and whether it holds.
# nsbox is the real binary (the installed one when NSBOX names it, else the
# build tree's, relinked beside a copy of libnsbox with an $ORIGIN run path)
# and its monitor sits beside the copy of libnsbox, where the library looks.
# Usage: bench/stateful.sh [BUILDDIR] [RUNS] [POOL_RUNS]
# BENCH_IMAGE: the image of the started sandboxes (default: default);
# BENCH_STACK_IMAGE: an image with pandas for the pool (default: BENCH_IMAGE).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here}" && pwd)
runs=${2:-${BENCH_STATEFUL_RUNS:-500}}
pool_runs=${3:-${BENCH_POOL_RUNS:-100}}
img=${BENCH_IMAGE:-default}
stack=${BENCH_STACK_IMAGE:-$img}
PY=/usr/bin/python3
command -v hyperfine >/dev/null || { echo "bench: hyperfine is not installed (apt-get install hyperfine)"; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (it also runs as the user nsbox-test)"; exit 1; }
[ -e "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] ||
	{ echo "bench: python3-dev is needed for the stateful sandbox benchmark"; exit 1; }
[ -d "/var/lib/nsbox/images/$img/rootfs" ] || { echo "bench: no image '$img' (nsbox image build)"; exit 1; }
T=$(mktemp -d /tmp/nsbox-bench-stateful.XXXXXX)
chmod 755 "$T"
names=()
finish() {
	# Sandboxes a failed round left running, then the staging.
	for n in "${names[@]}"; do
		for who in $users; do as "$who" "$N" stop "$n" >/dev/null 2>&1 || true; done
	done
	rm -rf "$T"
}
users=root
trap finish EXIT

# ---- the binaries ---------------------------------------------------------------
# shellcheck source=lib.sh
. "$here/bench/lib.sh"
lib=$build/src/lib/.libs
[ -f "$lib/libnsbox.so.0" ] || { echo "bench: build nsbox first ($build): the SDK's extension links it"; exit 1; }
stage_nsbox "$build"
# The SDK's extension against the same libnsbox (found through
# LD_LIBRARY_PATH, so that the monitor beside it is the one started).
cp -r "$here/python" "$T/python"
rm -rf "$T/python/build" "$T/python"/*.egg-info "$T/python"/nsbox/*.so
(cd "$T/python" && NSBOX_INCLUDE_DIR="$here/src/include" NSBOX_LIBRARY_DIR="$lib" \
	NSBOX_NO_RPATH=1 "$PY" setup.py -q build_ext --inplace -t "$T/build") >"$T/build.log" 2>&1 ||
	{ cat "$T/build.log"; exit 1; }
chmod -R a+rX "$T"

# ---- who runs it ----------------------------------------------------------------
bench_users
row() { $PY "$here/bench/stateful.py" row "$@"; }

echo "== stateful sandbox ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "nsbox: $how; image '$img', pool image '$stack'; $runs rounds ($pool_runs for pools)"
for who in $users; do
	echo "-- as $who"
	as "$who" env LD_LIBRARY_PATH="$T/bin" PYTHONPATH="$T/python" \
		"$PY" "$here/bench/stateful.py" sdk "$img" "$stack" "$runs" "$pool_runs"

	# The CLI: one process per exec, as a shell script or an agent's tool call.
	name=bench-cli-$$-$who
	names+=("$name")
	out=$T/out-$who
	mkdir -p "$out" && chmod 777 "$out"
	# (stderr: rootless, the warning that limits are rlimits; the SDK said it)
	as "$who" "$N" start --name "$name" --image "$img" >/dev/null 2>"$out/start.log" ||
		{ cat "$out/start.log"; exit 1; }
	as "$who" hyperfine -N -w 20 -r "$runs" --export-json "$out/exec.json" "$N exec $name -- true" \
		>"$out/h.log" 2>&1 || { cat "$out/h.log"; exit 1; }
	row "nsbox exec NAME -- true (CLI)" - "$out/exec.json"

	as "$who" "$N" stop "$name" >/dev/null
done
# Issue 28's snapshot figures (a sandbox holding 100 MiB of new files
# snapshotted <= 1 s, a start from it <= 20 ms) wait for `nsbox snapshot`.
"$N" snapshot --help >/dev/null 2>&1 ||
	echo "snapshot, start --from: not measured (this build has no 'nsbox snapshot')"
