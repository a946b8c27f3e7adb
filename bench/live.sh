#!/bin/bash
# Long-lived sandboxes: exec and context-cell latency through the library
# (tests/helpers/live), the CLI (nsbox exec, hyperfine) and the Python SDK
# (bench/live.py), as root and, when the user exists, as nsbox-test (rootless).
# Usage: bench/live.sh [BUILDDIR] [RUNS]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here}" && pwd)
runs=${2:-${BENCH_LIVE_RUNS:-300}}
PY=/usr/bin/python3
[ -e "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] ||
	{ echo "bench: python3-dev is needed for the long-lived sandbox benchmark"; exit 1; }
[ -x "$build/tests/helpers/live" ] || (cd "$build" && make -s tests/helpers/live >/dev/null)
T=$(mktemp -d /tmp/nsbox-bench-live.XXXXXX)
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
cp -r "$here/python" "$T/python"
rm -rf "$T/python/build" "$T/python"/*.egg-info "$T/python"/nsbox/*.so
(cd "$T/python" && NSBOX_INCLUDE_DIR="$here/src/include" NSBOX_LIBRARY_DIR="$build/src/lib/.libs" \
	NSBOX_NO_RPATH=1 "$PY" setup.py -q build_ext --inplace -t "$T/build") >"$T/build.log" 2>&1 ||
	{ cat "$T/build.log"; exit 1; }
mkdir -p "$T/bin"
# The monitor of started sandboxes sits beside the copy of libnsbox, where the
# library looks for it.
cp "$build/src/cli/.libs/nsbox" "$build/tests/helpers/.libs/live" "$build/src/monitor/nsbox-monitor" "$T/bin/"
cp -P "$build"/src/lib/.libs/libnsbox.so* "$build/src/lib/.libs/libnsbox-import.so" "$T/bin/"
chmod -R a+rX "$T"
export LD_LIBRARY_PATH=$T/bin
rootfs=/var/lib/nsbox/images/default/rootfs
[ -d "$rootfs" ] || { echo "bench: the default image is needed (nsbox image build)"; exit 1; }

echo "== long-lived sandboxes ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(uname -r))"
users=root
id nsbox-test >/dev/null 2>&1 && users="root nsbox-test"
for who in $users; do
	if [ "$who" = root ]; then as=(env); else
		mkdir -p "$T/home-$who" && chown "$who" "$T/home-$who"
		as=(env HOME="$T/home-$who" setpriv --reuid="$(id -u "$who")" --regid="$(id -g "$who")" --init-groups --)
	fi
	out=$T/out-$who
	mkdir -p "$out" && chmod 777 "$out"
	echo "-- as $who"
	"${as[@]}" "$T/bin/live" "$rootfs" bench "$runs"
	name=bench$$
	"${as[@]}" "$T/bin/nsbox" start --name "$name" --image default >/dev/null 2>&1
	if command -v hyperfine >/dev/null; then
		"${as[@]}" hyperfine -N -w 20 -r "$runs" --export-json "$out/h.json" \
			"$T/bin/nsbox exec $name -- /bin/true" >"$out/h.log" 2>&1 &&
			$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]["times"]; r.sort()
print("%-34s p50 %7.2f ms  p95 %7.2f ms  (n=%d)  (goal p50 <= 1.5 ms)" % ("CLI nsbox exec /bin/true", r[len(r)//2]*1e3, r[int(len(r)*.95)]*1e3, len(r)))' "$out/h.json"
		"${as[@]}" hyperfine -N -w 20 -r "$runs" --export-json "$out/h.json" \
			"$T/bin/nsbox exec $name --context b -c pass" >"$out/h.log" 2>&1 &&
			$PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]["times"]; r.sort()
print("%-34s p50 %7.2f ms  p95 %7.2f ms  (n=%d)" % ("CLI nsbox exec --context cell", r[len(r)//2]*1e3, r[int(len(r)*.95)]*1e3, len(r)))' "$out/h.json"
	fi
	"${as[@]}" "$T/bin/nsbox" stop "$name" >/dev/null 2>&1 || true
	"${as[@]}" env PYTHONPATH="$T/python" "$PY" "$here/bench/live.py" "$runs"
done
