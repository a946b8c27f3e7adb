#!/bin/bash
# Launch latency: nsbox vs bubblewrap (and crun/runc when installed) running
# /bin/true on the same busybox root filesystem, alternating, N rounds.
# Prints each tool's median and p90 in milliseconds and the ratios to bwrap.
# Usage: bench/launch.sh [BUILDDIR] [ROUNDS]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here}
rounds=${2:-300}
nsbox=$build/src/cli/nsbox
[ -x "$nsbox" ] || { echo "build nsbox first ($nsbox)"; exit 1; }
command -v bwrap >/dev/null || { echo "bench: bwrap not installed (apt-get install bubblewrap)"; exit 1; }

T=$(mktemp -d /tmp/nsbox-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
"$here/rootfs/busybox.sh" "$T/rootfs"
R=$T/rootfs
# Run the real binary, not libtool's wrapper script.
real=$build/src/cli/.libs/nsbox
if [ -x "$real" ]; then
	export LD_LIBRARY_PATH=$build/src/lib/.libs
	nsbox=$real
fi

declare -A cmd
cmd[nsbox]="$nsbox run --rootfs $R --timeout 0 -- /bin/true"
cmd[nsbox-json]="$nsbox run --json --rootfs $R --timeout 0 -- /bin/true"
cmd[bwrap]="bwrap --unshare-all --die-with-parent --ro-bind $R / --proc /proc --dev /dev --tmpfs /tmp --cap-drop ALL /bin/true"
tools="nsbox nsbox-json bwrap"

# crun/runc need an OCI bundle; generate one with the same root filesystem.
for rt in crun runc; do
	command -v $rt >/dev/null || continue
	b=$T/bundle-$rt
	mkdir -p "$b"
	(cd "$b" && $rt spec $([ "$(id -u)" -ne 0 ] && echo --rootless) >/dev/null 2>&1) || continue
	python3 - "$b/config.json" "$R" <<'PY'
import json, sys
p, root = sys.argv[1], sys.argv[2]
c = json.load(open(p))
c["root"] = {"path": root, "readonly": True}
c["process"]["args"] = ["/bin/true"]
c["process"]["terminal"] = False
json.dump(c, open(p, "w"))
PY
	cmd[$rt]="$rt run --bundle $b nsbox-bench-\$\$-\$i"
	tools="$tools $rt"
done

for t in $tools; do
	if ! out=$(eval "${cmd[$t]//\$i/warmup}" 2>&1); then
		echo "bench: '$t' does not run here, skipped: $(echo "$out" | tail -n 1)"
		tools=${tools/$t/}
	fi
done

now() { local t=$EPOCHREALTIME; echo "${t/./}"; }
for t in $tools; do : >"$T/$t.txt"; done
for ((i = 0; i < rounds; i++)); do
	for t in $tools; do
		c=${cmd[$t]//\$i/$i}
		s=$(now)
		eval "$c" >/dev/null 2>&1
		e=$(now)
		echo $((e - s)) >>"$T/$t.txt"
	done
done

stat() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.3f %.3f", a[int((NR+1)/2)]/1000, a[int(NR*0.9)]/1000}'; }
read -r bw_med _ <<<"$(stat "$T/bwrap.txt")"
echo "launch latency of /bin/true, $rounds alternating rounds, $(nproc) cores, kernel $(uname -r)"
printf '%-12s %10s %10s %14s\n' tool median_ms p90_ms median/bwrap
for t in $tools; do
	read -r med p90 <<<"$(stat "$T/$t.txt")"
	printf '%-12s %10s %10s %14s\n' "$t" "$med" "$p90" "$(awk -v a="$med" -v b="$bw_med" 'BEGIN{printf "%.2f", a/b}')"
done
