#!/bin/bash
# --network user: what the helper costs at launch and in throughput.
# In a network namespace of its own (a test host joined by veth to a second
# namespace, the "world", which serves a file over HTTP), it times N launches
# of /bin/true with --network none and with each installed helper, then
# downloads SIZE MB from the world with each helper and with --network host
# (the host's own stack, the baseline), ROUNDS times each. Prints medians and
# ratios. Needs root (it builds the namespaces); the machine's own network is
# never touched.  Usage: bench/netuser.sh [BUILDDIR] [N] [SIZE_MB] [ROUNDS]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here}
n=${2:-100}
size=${3:-200}
rounds=${4:-3}
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (it builds network namespaces)"; exit 1; }
if [ -z "${NSBOX_BENCH_PRIVATE:-}" ]; then
	exec env NSBOX_BENCH_PRIVATE=1 unshare --net --mount --propagation private "$0" "$@"
fi
nsbox=$build/src/cli/.libs/nsbox
if [ -x "$nsbox" ]; then export LD_LIBRARY_PATH=$build/src/lib/.libs; else nsbox=$build/src/cli/nsbox; fi
[ -x "$nsbox" ] || { echo "build nsbox first"; exit 1; }

T=$(mktemp -d /tmp/nsbox-bench.XXXXXX)
chmod 755 "$T"
PIDS=
# Under set -e a failing command would end the trap early: each one may fail.
trap 'kill $PIDS 2>/dev/null; wait 2>/dev/null; umount /dev/net/tun 2>/dev/null || :; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
"$here/rootfs/busybox.sh" "$T/rootfs" >/dev/null
R=$T/rootfs

ip link set lo up
unshare --net sleep 3600 &
W=$!
PIDS=$W
sleep 0.2
ip link add nsbx0 type veth peer name nsbx1 netns "$W"
ip addr add 10.77.0.1/24 dev nsbx0
ip link set nsbx0 up
ip route add default via 10.77.0.2
IN="nsenter --net=/proc/$W/ns/net"
$IN ip link set lo up
$IN ip addr add 10.77.0.2/24 dev nsbx1
$IN ip link set nsbx1 up
mkdir "$T/www"
head -c "${size}M" /dev/zero >"$T/www/blob"
(cd "$T/www" && exec $IN python3 -m http.server --bind 10.77.0.2 8080 >/dev/null 2>&1) &
PIDS="$PIDS $!"
# Stock udev makes /dev/net/tun 0666; give this namespace that mode privately.
if [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
	mknod -m 666 "$T/tun" c 10 200
	mount --bind "$T/tun" /dev/net/tun
fi
for _ in $(seq 50); do $IN true 2>/dev/null; nc -z 10.77.0.2 8080 2>/dev/null && break; sleep 0.1; done

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000)); }
launch() {   # launch MODE [HELPER]: median microseconds of N launches
	for _ in $(seq "$n"); do
		NSBOX_NETWORK_HELPER=${2:-auto} ms "$nsbox" run --network "$1" --rootfs "$R" --timeout 0 -- /bin/true
	done | median
}
fetch() {   # fetch MODE [HELPER]: median microseconds of ROUNDS downloads
	for _ in $(seq "$rounds"); do
		NSBOX_NETWORK_HELPER=${2:-auto} ms "$nsbox" run --network "$1" --rootfs "$R" --timeout 0 -- \
			wget -q -O /dev/null http://10.77.0.2:8080/blob
	done | median
}

helpers=
for h in pasta slirp4netns; do command -v $h >/dev/null && helpers="$helpers $h"; done
# table WHAT BASE_MODE: the baseline mode, then each helper, with ratios.
table() {
	local what=$1 base t h
	base=$($what "$2")
	printf '  %-30s %8.1f\n' "--network $2" "$(echo "$base / 1000" | bc -l)"
	for h in $helpers; do
		t=$($what user "$h")
		printf '  %-30s %8.1f   %+7.1f ms  %.2fx' "--network user ($h)" "$(echo "$t / 1000" | bc -l)" \
			"$(echo "($t - $base) / 1000" | bc -l)" "$(echo "$t / $base" | bc -l)"
		[ "$what" = fetch ] && printf '  %.0f MB/s' "$(echo "$size / ($t / 1000000)" | bc -l)"
		echo
	done
}
echo "launch of /bin/true, median of $n (ms):"
table launch none
echo "download of $size MB over HTTP from the world namespace, median of $rounds (ms):"
table fetch host
