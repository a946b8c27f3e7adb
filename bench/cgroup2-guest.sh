# shellcheck shell=sh disable=SC2086 # commands are strings, split into words on purpose
# The launch bench on a pure cgroup v2 host: sourced by the qemu guest's
# /init (tests/cgroup2/guest-init.sh) when bench/cgroup2.sh put it there as
# /bin/nsbox-bench.sh. As root, and as uid 1000 in a delegated subtree (no
# newuidmap in the guest: a single-id map), /bin/true in nsbox (limits by
# cgroup v2, the run cloned straight into its cgroup) against the same run
# without a cgroup and against bwrap, 4 parallel streams, the supervisor's
# resident memory by mapping and one run's NSBOX_TRACE. Every line it prints for the host
# starts with "bench| "; the guest runs under software emulation, so only
# ratios within the guest mean anything.
say() { echo "bench| $*"; }
runs=${BENCH_GUEST_RUNS:-30}
R=/rootfs
BW="bwrap --unshare-all --die-with-parent --ro-bind $R / --proc /proc --dev /dev --tmpfs /tmp --cap-drop ALL"

# median_ms CSV NAME: the median of NAME's runs from hyperfine's CSV, in ms.
median_ms() { awk -F, -v n="$2" '$1 == n { printf "%.2f", $4 * 1000 }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
# busybox date has no %N: /proc/uptime, in hundredths of a second
now_s() { cut -d" " -f1 /proc/uptime; }

# bench_as WHO EXTRA RUNAS...: the rows for one user.
bench_as() {
	who=$1 extra=$2
	shift 2
	nsbox_cmd="nsbox run $extra --rootfs $R --timeout 0 -- /bin/true"
	by=$("$@" nsbox run --json $extra --rootfs $R -- true | sed -n 's/.*"enforced_by":"\([^"]*\)".*/\1/p')
	say "-- as $who (limits enforced by: ${by:-?})"
	csv=/tmp/bench-out/$(echo "$who" | cut -c1-4).csv
	mkdir -p /tmp/bench-out
	chmod 1777 /tmp/bench-out
	"$@" hyperfine -N -w 3 -r "$runs" --style none --export-csv "$csv" \
		-n nsbox "$nsbox_cmd" \
		-n nocgroup "env NSBOX_TEST_NO_CGROUP=1 NSBOX_QUIET=1 nsbox run --rootfs $R --timeout 0 -- /bin/true" \
		-n nsboxenv "env NSBOX_BENCH=1 $nsbox_cmd" \
		-n bwrap "$BW /bin/true" >/dev/null 2>/tmp/h.err || {
		say "hyperfine failed as $who: $(tail -n 2 /tmp/h.err | tr '\n' ' ')"
		for c in "$nsbox_cmd" "$BW /bin/true"; do
			"$@" $c >/dev/null 2>/tmp/c.err || say "  $c: exit $?: $(tail -n 2 /tmp/c.err | tr '\n' ' ')"
		done
		return
	}
	n=$(median_ms "$csv" nsbox) b=$(median_ms "$csv" bwrap)
	ne=$(median_ms "$csv" nsboxenv) nc=$(median_ms "$csv" nocgroup)
	say "$(printf '%-44s %9s %9s %7s' '/bin/true, median ms (vs bwrap)' "$n" "$b" "$(ratio "$n" "$b")")"
	say "$(printf '%-44s %9s %9s %7s' '  through env: default, no cgroup (rlimits)' "$ne" "$nc" "$(awk -v a="$nc" -v b="$ne" 'BEGIN { printf "%+.2f", a - b }')")"

	# 4 parallel streams of 10 runs each
	for c in "$nsbox_cmd" "$BW /bin/true"; do
		s=$(now_s)
		for k in 1 2 3 4; do
			("$@" sh -c "for i in 1 2 3 4 5 6 7 8 9 10; do $c >/dev/null 2>&1; done") &
		done
		wait
		e=$(now_s)
		awk -v s="$s" -v e="$e" 'BEGIN { printf "%.1f\n", 40 / (e - s) }'
	done >/tmp/tp.txt
	nt=$(sed -n 1p /tmp/tp.txt) bt=$(sed -n 2p /tmp/tp.txt)
	say "$(printf '%-44s %9s %9s %7s' '4 streams, sandboxes/s (vs bwrap)' "$nt" "$bt" "$(ratio "$nt" "$bt")")"

	# The supervisor's resident memory half-way through a run, and bwrap's,
	# with where its pages are, by mapping (smaps).
	k=0
	for c in "nsbox run $extra --rootfs $R -- sleep 1" "$BW /bin/sleep 1"; do
		k=$((k + 1))
		"$@" $c >/dev/null 2>&1 &
		pid=$!
		sleep 0.5
		awk '/^[0-9a-f]+-[0-9a-f]+ / { m = NF >= 6 ? $6 : "[anon]" } /^Rss:/ { r[m] += $2 }
			END { for (m in r) if (r[m]) printf "%s %d\n", m, r[m] }' /proc/$pid/smaps >/tmp/maps.$k 2>/dev/null
		wait $pid
	done
	nr=$(awk '{ s += $2 } END { print s + 0 }' /tmp/maps.1) br=$(awk '{ s += $2 } END { print s + 0 }' /tmp/maps.2)
	say "$(printf '%-44s %9s %9s %7s' 'supervisor RSS half-way, KiB (bwrap)' "$nr" "$br" "$(ratio "$nr" "$br")")"
	say "  by mapping, nsbox: $(sort -k2 -n -r /tmp/maps.1 | awk '{ printf "%s %s, ", $1, $2 }')"
	say "  bwrap: $(sort -k2 -n -r /tmp/maps.2 | awk '{ printf "%s %s, ", $1, $2 }')"

	# NSBOX_TRACE: the run of median length of 9
	for i in 1 2 3 4 5 6 7 8 9; do
		"$@" env NSBOX_TRACE=1 $nsbox_cmd 2>/tmp/trace.$i >/dev/null
		echo "$(tail -n 1 /tmp/trace.$i | awk '{ print $3 }') $i"
	done | sort -n | sed -n 5p >/tmp/mid.txt
	mid=$(cut -d' ' -f2 /tmp/mid.txt)
	say "its steps, the run of median length of 9 (NSBOX_TRACE):"
	sed -n 's/^nsbox trace: /  /p' "/tmp/trace.$mid" | while IFS= read -r l; do say "$l"; done
}

say "== cgroup v2 guest: kernel $(uname -r), $(nproc) CPUs, qemu software emulation; $runs runs per command"
bench_as root ""

D=/sys/fs/cgroup/deleg
mkdir -p $D/user
echo "+memory +pids +cpu" >$D/cgroup.subtree_control
chown 1000:1000 $D $D/cgroup.procs $D/cgroup.subtree_control $D/cgroup.threads $D/user $D/user/cgroup.procs
echo $$ >$D/user/cgroup.procs
bench_as "uid 1000, a delegated subtree (single-id map)" "--cgroup-parent=$D" probe runas 1000 1000
say "done"
