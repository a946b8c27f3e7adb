#!/bin/bash
# Launch performance against bubblewrap, as root and as an unprivileged user
# (nsbox-test, with subordinate ids), with hyperfine:
#   - /bin/true on the same busybox root filesystem (nsbox with its default
#     limits, all namespaces and seccomp; bwrap with its full isolation flags);
#   - python3 -c pass in nsbox's default image against the host's python3;
#   - sandboxes per second with 4 parallel streams of /bin/true, and bwrap's;
#   - the supervisor's peak resident memory during a run (and bwrap's);
#   - where the time goes: /bin/true with one step switched off at a time
#     (network namespace, seccomp, the overlay root; root: the cgroup;
#     rootless: the full id map), and the run's steps by NSBOX_TRACE;
#   - crun and runc on the same root filesystem when they are installed.
# Each hyperfine invocation times every command of a comparison; ROUNDS of them
# alternate the order, and the times are pooled: medians, the 25th-75th
# percentile spread, and the ratios to the reference.
# nsbox is the real binary, never libtool's wrapper: the installed one when
# NSBOX names it, else the build tree's, relinked beside a copy of libnsbox
# with an $ORIGIN run path (LD_LIBRARY_PATH would also slow bwrap down).
# Usage: bench/launch.sh [BUILDDIR] [ROUNDS] [RUNS]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here}
rounds=${2:-${BENCH_ROUNDS:-5}}
runs=${3:-${BENCH_RUNS:-40}}
streams=4
trace_runs=${BENCH_TRACE_RUNS:-40}
per_stream=${BENCH_PER_STREAM:-50}

command -v hyperfine >/dev/null || { echo "bench: hyperfine is not installed (apt-get install hyperfine)"; exit 1; }
command -v bwrap >/dev/null || { echo "bench: bwrap is not installed (apt-get install bubblewrap)"; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (it also runs as the user nsbox-test)"; exit 1; }

T=$(mktemp -d /tmp/nsbox-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
mkdir -m 1777 "$T/out"
"$here/rootfs/busybox.sh" "$T/rootfs" >/dev/null
R=$T/rootfs

# ---- the binary, and who runs it --------------------------------------------
# shellcheck source=lib.sh
. "$here/bench/lib.sh"
stage_nsbox "$build"
"$N" run --rootfs "$R" -- true 2>/dev/null || { echo "bench: '$N run' fails here"; exit 1; }
bench_users

# compare USER NAME=CMD ...: pooled hyperfine rounds; prints "NAME median p25 p75" lines.
compare() {
	local who=$1
	shift
	local r cmds=("$@")
	rm -f "$T"/out/*.json
	for ((r = 0; r < rounds; r++)); do
		local args=() c k
		for ((k = 0; k < ${#cmds[@]}; k++)); do
			c=${cmds[$((r % 2 ? ${#cmds[@]} - 1 - k : k))]}
			args+=(-n "${c%%=*}" "${c#*=}")
		done
		as "$who" hyperfine -N -w 3 -r "$runs" --style none --export-json "$T/out/$r.json" "${args[@]}" >/dev/null 2>&1 ||
			{ echo "bench: hyperfine failed for $who: ${args[*]}" >&2; return 1; }
	done
	python3 - "$T/out" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
times = {}
for r in range(rounds):
    for res in json.load(open(f"{d}/{r}.json"))["results"]:
        times.setdefault(res["command"], []).extend(t * 1000 for t in res["times"])
for name, t in times.items():
    q = statistics.quantiles(t, n=4)
    print(name, f"{statistics.median(t):.2f}", f"{q[0]:.2f}", f"{q[2]:.2f}", len(t))
PY
}

# throughput USER CMD...: sandboxes per second with $streams parallel loops.
throughput() {
	local who=$1
	shift
	# shellcheck disable=SC2016 # the inner script expands its own variables
	as "$who" bash -c 'streams=$1 per=$2
		shift 2
		s=$EPOCHREALTIME
		for ((k = 0; k < streams; k++)); do
			(for ((i = 0; i < per; i++)); do "$@" >/dev/null 2>&1; done) &
		done
		wait
		e=$EPOCHREALTIME
		awk -v s="$s" -v e="$e" -v n=$((streams * per)) "BEGIN { printf \"%.1f\", n / (e - s) }"' \
		bash "$streams" "$per_stream" "$@"
}

# peak_rss USER CMD...: the peak resident set (VmHWM) and the proportional
# set (Pss) of the process CMD starts, sampled until it exits, in KiB.
peak_rss() {
	local who=$1
	shift
	python3 - "$who" "$T" "$@" <<'PY'
import os, subprocess, sys, time
who, t, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
if who != "root":
    import pwd
    pw = pwd.getpwnam(who)
    cmd = ["env", f"HOME={t}/home-{who}", "setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
           "--init-groups", "--"] + cmd
    # setpriv execs the command: the pid stays the same.
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
hwm = pss = 0
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("VmHWM:"):
                hwm = max(hwm, int(line.split()[1]))
        for line in open(f"/proc/{p.pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                pss = max(pss, int(line.split()[1]))
    except (OSError, ValueError):
        pass
    time.sleep(0.01)
print(hwm, pss)
PY
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
field() { awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$3"; }

bw=(bwrap --unshare-all --die-with-parent --ro-bind "$R" / --proc /proc --dev /dev --tmpfs /tmp --cap-drop ALL)
host_py=$(command -v /usr/bin/python3 || command -v python3 || true)
image=/var/lib/nsbox/images/default

echo "nsbox launch bench, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -sr), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nsbox: $how; $(hyperfine --version); $rounds rounds x $runs runs per command, alternating order"
echo

for who in $users; do
	echo "== as $who$([ "$who" = root ] || echo " (rootless, newuidmap/newgidmap; no cgroup: rlimit limits)")"
	printf '%-34s %10s %10s %8s  %s\n' "" "nsbox" "reference" "ratio" "(goal)"

	compare "$who" "nsbox=$N run --rootfs $R --timeout 0 -- /bin/true" "bwrap=${bw[*]} /bin/true" >"$T/true.txt"
	n_med=$(field nsbox 2 "$T/true.txt") b_med=$(field bwrap 2 "$T/true.txt")
	printf '%-34s %10s %10s %8s  %s\n' "/bin/true, median ms (vs bwrap)" "$n_med" "$b_med" "$(ratio "$n_med" "$b_med")" "(<= 1.00)"
	printf '%-34s %10s %10s\n' "  p25-p75 ms" "$(field nsbox 3 "$T/true.txt")-$(field nsbox 4 "$T/true.txt")" \
		"$(field bwrap 3 "$T/true.txt")-$(field bwrap 4 "$T/true.txt")"

	if [ -d "$image/rootfs" ] && [ -n "$host_py" ] && "$N" run -- python3 -c pass 2>/dev/null; then
		compare "$who" "nsbox=$N run --timeout 0 -- python3 -c pass" "host=$host_py -c pass" >"$T/py.txt"
		n_med=$(field nsbox 2 "$T/py.txt") h_med=$(field host 2 "$T/py.txt")
		printf '%-34s %10s %10s %8s  %s\n' "python3 -c pass, ms (vs host)" "$n_med" "$h_med" "$(ratio "$n_med" "$h_med")" "(<= 1.25)"
	else
		echo "python3 -c pass: skipped (no default image: 'nsbox image build'; or no host python3)"
	fi

	n_tp=$(throughput "$who" "$N" run --rootfs "$R" --timeout 0 -- /bin/true)
	b_tp=$(throughput "$who" "${bw[@]}" /bin/true)
	printf '%-34s %10s %10s %8s  %s\n' "$streams streams, sandboxes/s (vs bwrap)" "$n_tp" "$b_tp" "$(ratio "$n_tp" "$b_tp")" "(>= 1.00)"

	read -r n_hwm n_pss <<<"$(peak_rss "$who" "$N" run --rootfs "$R" -- sleep 0.3)"
	read -r b_hwm b_pss <<<"$(peak_rss "$who" "${bw[@]}" /bin/sleep 0.3)"
	printf '%-34s %10s %10s %8s  %s\n' "supervisor peak RSS, KiB (bwrap)" "$n_hwm" "$b_hwm" "$(ratio "$n_hwm" "$b_hwm")" "(<= 2048 KiB)"
	printf '%-34s %10s %10s\n' "  its PSS, KiB" "$n_pss" "$b_pss"

	# Where the time goes: the same run with one step switched off, each
	# through env (so each pays the same exec of env), interleaved.
	abl=("default=env NSBOX_BENCH=1 $N run --rootfs $R --timeout 0 -- /bin/true"
		"no network namespace (--network host)=env NSBOX_BENCH=1 $N run --rootfs $R --timeout 0 --network host -- /bin/true"
		"no seccomp filter (--seccomp unconfined)=env NSBOX_BENCH=1 $N run --rootfs $R --timeout 0 --seccomp unconfined -- /bin/true"
		"root not an overlay (NSBOX_TEST_NO_OVERLAY_ROOT)=env NSBOX_TEST_NO_OVERLAY_ROOT=1 $N run --rootfs $R --timeout 0 -- /bin/true")
	if [ "$who" = root ]; then
		abl+=("no cgroup, rlimits (NSBOX_TEST_NO_CGROUP)=env NSBOX_TEST_NO_CGROUP=1 NSBOX_QUIET=1 $N run --rootfs $R --timeout 0 -- /bin/true")
	else
		abl+=("single-id map (NSBOX_SINGLE_IDMAP)=env NSBOX_SINGLE_IDMAP=1 $N run --rootfs $R --timeout 0 -- /bin/true")
	fi
	abl+=("bwrap=env NSBOX_BENCH=1 ${bw[*]} /bin/true")
	if compare "$who" "${abl[@]}" >"$T/abl.txt"; then
		echo "where the time goes, /bin/true through env, median ms (difference to the default):"
		python3 - "$T/abl.txt" <<'PY'
import sys
rows = [l.rsplit(" ", 4) for l in open(sys.argv[1]) if l.strip()]
base = float(dict((r[0], r[1]) for r in rows)["default"])
for name, med, p25, p75, n in rows:
    print("  %-50s %7s  %+6.2f" % (name, med, float(med) - base))
PY
	fi

	# The same run's steps (NSBOX_TRACE), medians over $trace_runs runs.
	if as "$who" bash -c 'n=$1; shift; for ((i = 0; i < n; i++)); do NSBOX_TRACE=1 "$@" 2>&1 >/dev/null; done' \
		bash "$trace_runs" "$N" run --rootfs "$R" --timeout 0 -- /bin/true >"$T/trace.txt"; then
		echo "its steps (NSBOX_TRACE, $trace_runs runs): median us since nsbox_spawn, and the difference to the row above"
		python3 - "$T/trace.txt" <<'PY'
import re, statistics, sys
at = {}
for line in open(sys.argv[1]):
    m = re.match(r"nsbox trace:\s+(\d+) \(\+\s*\d+\) (.*)", line)
    if m:
        at.setdefault(m.group(2).strip(), []).append(int(m.group(1)))
rows = sorted((statistics.median(t), name) for name, t in at.items())
prev = 0
for med, name in rows:
    print("  %-74s %6d  %+6d" % (name, med, med - prev))
    prev = med
PY
	fi

	for rt in crun runc; do
		if ! command -v "$rt" >/dev/null; then
			echo "$rt: skipped (not installed)"
			continue
		fi
		b=$T/bundle-$rt-$who
		mkdir -p "$b"
		chmod 755 "$b"
		spec=(spec)
		[ "$who" = root ] || spec+=(--rootless)
		(cd "$b" && "$rt" "${spec[@]}" >/dev/null 2>&1) || { echo "$rt: skipped (no spec)"; continue; }
		python3 - "$b/config.json" "$R" <<'PY'
import json, sys
p, root = sys.argv[1], sys.argv[2]
c = json.load(open(p))
c["root"] = {"path": root, "readonly": True}
c["process"]["args"] = ["/bin/true"]
c["process"]["terminal"] = False
json.dump(c, open(p, "w"))
PY
		chmod -R a+rX "$b"
		if ! out=$(as "$who" "$rt" run --bundle "$b" "nsbox-bench-$$" 2>&1); then
			echo "$rt: skipped (does not run here: $(tail -n 1 <<<"$out"))"
			continue
		fi
		compare "$who" "nsbox=$N run --rootfs $R --timeout 0 -- /bin/true" \
			"$rt=$rt run --bundle $b nsbox-bench-$$" >"$T/rt.txt" || { echo "$rt: skipped (failed under hyperfine)"; continue; }
		n_med=$(field nsbox 2 "$T/rt.txt") r_med=$(field "$rt" 2 "$T/rt.txt")
		printf '%-34s %10s %10s %8s\n' "/bin/true, median ms (vs $rt)" "$n_med" "$r_med" "$(ratio "$n_med" "$r_med")"
	done
	echo
done
