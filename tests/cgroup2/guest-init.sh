#!/bin/sh
# /init of the cgroup v2 test guest: a pure cgroup v2 host (what modern
# distributions run). Runs the limit tests as root and as a non-root user
# with a delegated subtree, prints "ok"/"not ok" lines and a total, and
# powers off.
export PATH=/bin LD_LIBRARY_PATH=/lib HOME=/tmp
# pivot_root cannot leave the initramfs: first move everything onto a tmpfs
# and make that the root (as an ordinary boot does with its disk).
if [ "$1" != stage2 ]; then
	mkdir -p /newroot
	mount -t tmpfs -o size=700m tmpfs /newroot
	cp -a /bin /lib /lib64 /etc /rootfs /init /newroot/
	mkdir -p /newroot/proc /newroot/sys /newroot/dev /newroot/tmp
	exec switch_root /newroot /init stage2
fi
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /sys/fs/cgroup
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "+memory +pids +cpu" >/sys/fs/cgroup/cgroup.subtree_control
echo "guest: kernel $(uname -r), cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# make bench's guest (tests/cgroup2/run.sh with CGROUP2_BENCH=1)
if [ -f /bin/nsbox-bench.sh ]; then
	# shellcheck source=../../bench/cgroup2-guest.sh
	. /bin/nsbox-bench.sh
	poweroff -f
fi

PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
notok() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
expect() { if [ "$2" = "$3" ]; then ok "$1"; else notok "$1: expected '$2', got '$3'"; fi; }
# field NAME: a scalar field of the JSON record in /tmp/r.json
field() { sed -n "s/.*\"$1\":\\(\"[^\"]*\"\\|[^,}]*\\).*/\\1/p" /tmp/r.json | tr -d '"'; }
# diagnose: say why a run failed to set up
diagnose() { [ "$(field status)" = setup_failed ] && echo "# setup failed: $(field message)"; }
leftovers() { find "$1" -maxdepth 1 -type d -name 'nsbox-*' | wc -l; }

R=/rootfs
# suite WHO RUNAS... : the same checks for root and for the delegated user.
suite() {
	who=$1
	shift
	parent=/sys/fs/cgroup
	[ "$who" = root ] || parent=/sys/fs/cgroup/deleg
	extra=
	[ "$who" = root ] || extra="--cgroup-parent=$parent"

	"$@" nsbox run --json ${extra:+"$extra"} --rootfs "$R" -- cat /proc/self/cgroup >/tmp/r.json
	diagnose
	expect "[$who] limits are enforced by cgroup v2" cgroup-v2 "$(field enforced_by)"
	expect "[$who] the sandbox sees its own cgroup as the root" '0::/\n' "$(field stdout)"

	"$@" nsbox run --json ${extra:+"$extra"} --memory 32m --rootfs "$R" -- probe hog 256 >/tmp/r.json
	expect "[$who] a memory hog is OOM-killed (exit 137)" 137 "$?"
	expect "[$who] status oom_killed" oom_killed "$(field status)"
	expect "[$who] oom_killed is true" true "$(field oom_killed)"
	peak=$(field peak_memory_bytes)
	if [ "${peak:-0}" -gt 1000000 ] && [ "$peak" -le 33554432 ]; then ok "[$who] peak memory $peak within the limit"; else notok "[$who] peak memory '$peak'"; fi

	"$@" nsbox run --json ${extra:+"$extra"} --pids-limit 16 --rootfs "$R" -- probe forkbomb >/tmp/r.json
	forks=$(field stdout | sed -n 's/.*forks=\([0-9]*\).*/\1/p')
	if [ "${forks:-99}" -le 16 ]; then ok "[$who] a fork bomb stops at the limit ($forks forks)"; else notok "[$who] fork bomb: $forks forks"; fi
	expect "[$who] pids_limit_hit is true" true "$(field pids_limit_hit)"

	"$@" nsbox run --json ${extra:+"$extra"} --cpus 0.5 --rootfs "$R" -- probe spin 3 >/tmp/r.json
	cpu=$(field cpu_user_ms)
	dur=$(field duration_ms)
	share=$(awk -v c="$cpu" -v d="$dur" 'BEGIN { printf "%d", 100 * c / d }')
	if [ "$share" -ge 30 ] && [ "$share" -le 70 ]; then ok "[$who] --cpus 0.5 holds a spinner at ${share}% of a CPU"; else notok "[$who] --cpus 0.5: ${share}% of a CPU"; fi

	# CPU time in the record comes from cpu.stat however the run ends (the
	# rusage of pid 1 misses what the kernel kills at teardown): each run
	# burns about 0.5 s of CPU time.
	for how in exited timed_out killed; do
		case $how in
		exited) cmd='probe burn 0.5' want=exited ;;
		timed_out) cmd='probe burn 0.5; sleep 60' want=timed_out ;;
		killed) cmd='(probe burn 0.5; kill -9 $$; sleep 60) & wait' want=signaled ;;
		esac
		"$@" nsbox run --json ${extra:+"$extra"} --cpus 1 --timeout 6s --rootfs "$R" -- sh -c "$cmd" >/tmp/r.json
		expect "[$who] a CPU burner that is $how: status" "$want" "$(field status)"
		cpu=$(awk -v u="$(field cpu_user_ms)" -v s="$(field cpu_system_ms)" 'BEGIN { printf "%d", u + s }')
		if [ "${cpu:-0}" -ge 150 ]; then ok "[$who] ...its record counts the CPU it burned ($cpu ms of about 500)"; else notok "[$who] ...its record says $cpu ms of about 500"; fi
		expect "[$who] ...from the cgroup" cgroup "$(field cpu_source)"
	done

	# --sysfs: the firmware tables and powercap are masked (empty).
	out=$("$@" nsbox run ${extra:+"$extra"} --sysfs --rootfs "$R" -- sh -c 'ls -A /sys/firmware /sys/devices/virtual/powercap 2>/dev/null | grep -v ":$" | grep -v "^$" | wc -l')
	expect "[$who] --sysfs: /sys/firmware and powercap are empty" 0 "$out"

	expect "[$who] no cgroup left after the runs" 0 "$(leftovers $parent)"
	"$@" nsbox run ${extra:+"$extra"} --rootfs "$R" -- probe daemon wait >/dev/null &
	pid=$!
	sleep 2
	kill -KILL $pid
	wait $pid 2>/dev/null
	i=0
	while [ "$(leftovers $parent)" -ne 0 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	expect "[$who] no cgroup left after SIGKILL of nsbox" 0 "$(leftovers $parent)"
}

suite root

nsbox check --json >/tmp/check.json
if grep -q '"name":"cgroups","status":"ok","required":false,"detail":"cgroup v2: run cgroups go below ' /tmp/check.json; then
	ok "[root] nsbox check reports cgroup v2"
else
	notok "[root] nsbox check: $(cat /tmp/check.json)"
fi

# A delegated subtree for uid 1000, as systemd's Delegate=yes makes one: the
# user owns the directory, cgroup.procs and cgroup.subtree_control, and its
# processes live in a leaf of their own.
D=/sys/fs/cgroup/deleg
mkdir -p $D/user
echo "+memory +pids +cpu" >$D/cgroup.subtree_control
chown 1000:1000 $D $D/cgroup.procs $D/cgroup.subtree_control $D/cgroup.threads $D/user $D/user/cgroup.procs
echo $$ >$D/user/cgroup.procs
suite user probe runas 1000 1000

echo "cgroup2: $PASSED passed, $FAILED failed"
poweroff -f
