#!/bin/bash
# Images: the default image's size and contents, a declarative build from it
# (first, then again with nothing changed, then with its last step changed),
# the cold import of the data stack in it, and what the writable home costs
# a launch. Root (builds go to root's store; everything made here is removed).
# Usage: bench/image.sh [BUILDDIR] [RUNS]
# BENCH_IMAGE: the image to measure (default: default).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here}" && pwd)
runs=${2:-${BENCH_IMAGE_RUNS:-20}}
img=${BENCH_IMAGE:-default}
store=/var/lib/nsbox/images
layers=/var/lib/nsbox/layers
[ "$(id -u)" -eq 0 ] || { echo "bench: the image benchmark needs root (root's store)"; exit 1; }
[ -d "$store/$img/rootfs" ] || { echo "bench: no image '$img' (nsbox image build)"; exit 1; }
command -v hyperfine >/dev/null || { echo "bench: hyperfine is needed"; exit 1; }
T=$(mktemp -d /tmp/nsbox-bench-image.XXXXXX)
chmod 755 "$T"
name=bench-image-$$
pre=$(find "$layers" -mindepth 1 -maxdepth 1 -printf "%f\n" 2>/dev/null | sort)
finish() {
	rm -rf "${store:?}/$name"
	comm -13 <(printf '%s\n' "$pre") <(find "$layers" -mindepth 1 -maxdepth 1 -printf "%f\n" 2>/dev/null | sort) |
		while read -r l; do [ -n "$l" ] && rm -rf "${layers:?}/$l"; done
	rm -rf "$T"
}
trap finish EXIT
mkdir -p "$T/bin" "$T/ctx/app"
cp "$build/src/cli/.libs/nsbox" "$T/bin/"
cp -P "$build"/src/lib/.libs/libnsbox.so* "$build/src/lib/.libs/libnsbox-import.so" "$T/bin/"
export LD_LIBRARY_PATH=$T/bin
N=$T/bin/nsbox
echo 'print("app")' >"$T/ctx/app/main.py"
chmod -R a+rX "$T"
p50() {   # p50 JSON LABEL: the median of a hyperfine export
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]["times"]; r.sort()
print("%-48s p50 %8.1f ms  (n=%d)" % (sys.argv[2], r[len(r)//2]*1e3, len(r)))' "$1" "$2"
}

echo "== images ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(uname -r))"
python3 - "$store/$img" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/meta.json"))
print("%-48s %8.1f MiB  (%s)" % ("image '%s' size" % m["name"], m["size_bytes"] / 2**20, m.get("source", "")))
PY
steps=(--from "$img" --env MODE=bench --copy app:/opt/app --run 'python3 /opt/app/main.py > /opt/app/out')
t0=$(date +%s%N)
(cd "$T/ctx" && "$N" image build "$name" "${steps[@]}") >/dev/null 2>&1
t1=$(date +%s%N)
printf '%-48s %8.1f s\n' "build from '$img', 3 steps (first)" "$(echo "($t1 - $t0) / 1000000000" | bc -l)"
(cd "$T/ctx" && hyperfine -N -w 2 -r "$runs" --export-json "$T/kept.json" \
	"$N image build $name --from $img --env MODE=bench --copy app:/opt/app --run 'python3 /opt/app/main.py > /opt/app/out'") \
	>"$T/h.log" 2>&1 && p50 "$T/kept.json" "rebuild, nothing changed (kept)"
t0=$(date +%s%N)
(cd "$T/ctx" && "$N" image build "$name" "${steps[@]}" --run 'echo changed > /opt/app/x') >/dev/null 2>&1
t1=$(date +%s%N)
printf '%-48s %8.1f s\n' "rebuild, one step added (cached steps, new image)" "$(echo "($t1 - $t0) / 1000000000" | bc -l)"

hyperfine -N -w 2 -r "$runs" --export-json "$T/imp.json" \
	"$N run-code --image $img --lang python -c 'import pandas, numpy, requests, httpx, matplotlib'" >"$T/h.log" 2>&1 &&
	p50 "$T/imp.json" "run-code: import pandas, numpy, requests, httpx, matplotlib"
hyperfine -N -w 5 -r "$runs" --export-json "$T/pass.json" "$N run-code --image $img --lang python -c pass" \
	>"$T/h.log" 2>&1 && p50 "$T/pass.json" "run-code: pass"

# The writable home: a busybox root whose user has a home (overlay on a
# tmpfs), against the same without one.
bb=$(command -v busybox)
for v in home nohome; do
	r=$T/root-$v
	mkdir -p "$r/bin" "$r/proc" "$r/dev" "$r/tmp" "$r/etc" "$r/home/sandbox"
	cp "$bb" "$r/bin/busybox"
	ln -s busybox "$r/bin/true"
	h=/home/sandbox
	[ "$v" = nohome ] && h=/nonexistent
	printf 'sandbox:x:1000:1000::%s:/bin/sh\n' "$h" >"$r/etc/passwd"
	chmod -R a+rX "$r"
done
hyperfine -N -w 20 -r $((runs * 10)) --export-json "$T/home.json" \
	"$N run --rootfs $T/root-home -- /bin/true" "$N run --rootfs $T/root-nohome -- /bin/true" >"$T/h.log" 2>&1 &&
	python3 -c 'import json,sys; rs=json.load(open(sys.argv[1]))["results"]
m=[sorted(r["times"])[len(r["times"])//2]*1e3 for r in rs]
print("%-48s p50 %8.2f ms  (without a home: %.2f ms, +%.2f ms)" % ("launch /bin/true with a writable home", m[0], m[1], m[0]-m[1]))' "$T/home.json"
