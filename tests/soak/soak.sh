#!/bin/bash
# `make soak`: the fault soak (docs/fuzzing.md, "Fault soak"). SOAK_RUNS
# sandboxes (1000), SOAK_JOBS at a time (4): a quarter with a copy-on-write
# workspace (some in one shared session, used concurrently), a third of the
# supervisors SIGKILLed at a random moment (during setup, while the payload
# runs, or during the changes scan), the state directory on a tiny tmpfs
# (payloads that fill it get ENOSPC), corrupt images, image imports (half
# killed), network helpers and rootless runs. Afterwards nothing may be
# left: no process, cgroup, mount, socket, temporary directory, run state
# or half-made image; every run that was not killed printed a valid record;
# every session still reads; the host workspace is unchanged.
#
# It runs as root in a private mount and pid namespace of its own, with
# fresh tmpfs over /tmp, nsbox's state directory and its image store, so
# every leftover found there is the soak's: any process but the soak's own
# shell, anything in /tmp (other users of the machine are not seen, and the
# host's state and images are not touched). Only the pids it started are
# ever signalled.
#
# usage: soak.sh   (environment: top_builddir top_srcdir BUSYBOX SOAK_RUNS
#                   SOAK_JOBS SOAK_SEED SOAK_STATE_SIZE)
set -u
: "${top_builddir:?run through 'make soak'}"
: "${top_srcdir:?run through 'make soak'}"
RUNS=${SOAK_RUNS:-1000}
JOBS=${SOAK_JOBS:-4}
SEED=${SOAK_SEED:-$$}
STATE_SIZE=${SOAK_STATE_SIZE:-12m}

die() { echo "soak: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "soak: SKIP: needs root (private mounts over the state directory)"; exit 77; }
command -v unshare >/dev/null || die "unshare (util-linux) is missing"
BUSYBOX=${BUSYBOX:-$(command -v busybox || true)}
[ -n "$BUSYBOX" ] || die "busybox (static) is not installed"

if [ -z "${SOAK_INSIDE:-}" ]; then
	top_builddir=$(cd "$top_builddir" && pwd)
	export top_builddir top_srcdir BUSYBOX SOAK_INSIDE=1 SOAK_SEED=$SEED
	exec unshare --mount --propagation private --pid --fork --mount-proc -- bash "$0" "$@"
fi

# ---- the private world ------------------------------------------------------
# The work directory is outside /tmp, which a tmpfs covers next (a build
# tree under /tmp, as CI's may be, would be hidden by it).
W=$(mktemp -d /var/tmp/nsbox-soak.XXXXXX) || die "mktemp in /var/tmp"
# nsbox staged like the functional tests do, before /tmp is covered.
mkdir -p "$W/bin"
cp "$top_builddir/src/cli/.libs/nsbox" "$W/bin/nsbox" || die "nsbox is not built"
cp -P "$top_builddir"/src/lib/.libs/libnsbox.so* "$top_builddir/src/lib/.libs/libnsbox-import.so" "$W/bin/"
STATE=/var/lib/nsbox/state
IMAGES=/var/lib/nsbox/images
mkdir -p "$STATE" "$IMAGES" 2>/dev/null
mount -t tmpfs -o size=64m,mode=1777 soak-tmp /tmp || die "mount /tmp"
mount -t tmpfs -o "size=$STATE_SIZE,mode=0755" soak-state "$STATE" || die "mount $STATE"
mount -t tmpfs -o size=256m,mode=0755 soak-images "$IMAGES" || die "mount $IMAGES"
export TMPDIR=/tmp
cd "$W" || die "cd $W"   # the working directory may be under the covered /tmp

export LD_LIBRARY_PATH=$W/bin
NSBOX=$W/bin/nsbox

ROOTFS=$W/rootfs
mkdir -p "$ROOTFS"/bin "$ROOTFS"/proc "$ROOTFS"/dev "$ROOTFS"/tmp "$ROOTFS"/sys "$ROOTFS"/etc "$ROOTFS"/home/sandbox "$ROOTFS"/workspace
cp "$BUSYBOX" "$ROOTFS/bin/busybox"
for a in sh echo cat ls rm mkdir seq sleep true dd head touch; do ln -sf busybox "$ROOTFS/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/home/sandbox:/bin/sh\n' >"$ROOTFS/etc/passwd"
chmod -R a+rX "$ROOTFS"

# Corrupt images in the (private) store.
mkimg() { mkdir -p "$IMAGES/$1"; printf '{"name":"%s"}\n' "$1" >"$IMAGES/$1/meta.json"; }
mkimg bad-file; echo 'not a directory' >"$IMAGES/bad-file/rootfs"
mkimg bad-link; ln -s / "$IMAGES/bad-link/rootfs"
mkimg bad-empty; mkdir "$IMAGES/bad-empty/rootfs"
mkimg bad-elf; cp -a "$ROOTFS" "$IMAGES/bad-elf/rootfs"; head -c 700 "$BUSYBOX" >"$IMAGES/bad-elf/rootfs/bin/busybox"
mkimg bad-meta; cp -a "$ROOTFS" "$IMAGES/bad-meta/rootfs"; printf '\0\377{' >"$IMAGES/bad-meta/meta.json"
mkimg bad-loop; mkdir -p "$IMAGES/bad-loop/rootfs"; ln -s bin "$IMAGES/bad-loop/rootfs/bin"
mkdir -p "$IMAGES/bad-nometa/rootfs"
CORRUPT=(bad-file bad-link bad-empty bad-elf bad-meta bad-loop bad-nometa)
# Archives to import: a root filesystem with 600 small files (an import
# long enough to be killed in), the same cut short, and garbage.
mkdir -p "$W/imp/root/data"
cp -a "$ROOTFS/." "$W/imp/root/"
for n in $(seq 1 600); do head -c 4096 /dev/urandom >"$W/imp/root/data/$n"; done
tar -C "$W/imp/root" -cf "$W/imp/good.tar" .
head -c 1500000 "$W/imp/good.tar" >"$W/imp/cut.tar"
head -c 100000 /dev/urandom >"$W/imp/garbage.tar"
rm -rf "$W/imp/root"
chmod -R a+rX "$W/imp"

# The host workspace, and what it must still be at the end.
WS=$W/workspace
mkdir -p "$WS/src" "$WS/docs"
for f in a b c; do echo "file $f" >"$WS/src/$f.txt"; done
seq 1 2000 >"$WS/docs/numbers"
ln -s src/a.txt "$WS/link"
chmod 640 "$WS/src/b.txt"
manifest() { (cd "$WS" && find . -printf '%p %y %m %U:%G %s %T@ %l\n' | sort && find . -type f -exec sha256sum {} + | sort); }
manifest >"$W/ws.before"

grep -v ' /proc\b\| /sys\b' /proc/self/mountinfo | awk '{print $5}' | sort >"$W/mounts.before"
mkdir -p "$W/rec" "$W/err" "$W/pids" "$W/kind"
# The unprivileged user of the functional tests, with subordinate ids.
ROOTLESS=
if id nsbox-test >/dev/null 2>&1 && grep -q '^nsbox-test:' /etc/subuid && command -v setpriv >/dev/null; then
	ROOTLESS=nsbox-test
	mkdir -p "$W/home" "$W/xdg"
	chown nsbox-test: "$W/home" "$W/xdg"
	chmod 755 "$W"
fi

# ---- load (SOAK_LOAD=1, `make soak-load`) -------------------------------------
# SOAK_LOAD_JOBS (16) sandboxes at once for SOAK_LOAD_SECONDS (600), each
# under memory and pids pressure (a 48 MiB limit its payload overruns, a
# pids limit of 24 it forks past) and killed by its --timeout (1 to 3 s;
# two slots run 120 s sandboxes that keep the pressure up). What is
# measured: how late each timeout fired (duration_ms minus the timeout in
# the record), and every supervisor's RSS, sampled each second.
# (Not in CI: ten minutes of 16 sandboxes is the point of it.)
load() {
	local jobs=${SOAK_LOAD_JOBS:-16} secs=${SOAK_LOAD_SECONDS:-600} end
	end=$(($(date +%s) + secs))
	mkdir -p "$W/load" "$W/live"
	echo "load: $jobs sandboxes at a time for ${secs}s"
	# 30 MiB in the sandbox's tmpfs (charged to it) and an 8 MiB buffer:
	# near the limit; every fourth sandbox asks 64 MiB and is OOM-killed.
	# Then forks past the pids limit, in a subshell (a failed fork ends a
	# shell).
	local pressure='head -c 30m /dev/zero >/tmp/fill; dd if=/dev/zero of=/dev/null bs=${MB}M count=1 2>/dev/null; (for n in $(seq 1 40); do sleep $HOLD & done) 2>/dev/null; rm -f /tmp/fill'
	slot() {
		local k=$1 n=0 t pid
		while [ "$(date +%s)" -lt "$end" ]; do
			n=$((n + 1))
			if [ "$k" -lt 2 ]; then
				t=$(((end - $(date +%s)) * 1000))
				[ "$t" -gt 120000 ] && t=120000
				[ "$t" -lt 1000 ] && t=1000
				pay="HOLD=1; MB=8; while :; do $pressure; sleep 1; done"
			else
				t=$((1000 + (RANDOM % 3) * 1000))
				pay="HOLD=1000; MB=$([ $((n % 4)) -eq 0 ] && echo 64 || echo 8); $pressure; sleep 1000"
			fi
			"$NSBOX" run --json --rootfs "$ROOTFS" --memory 48m --pids-limit 24 --timeout "${t}ms" \
				-- sh -c "$pay" >"$W/load/$k-$n.json" 2>/dev/null &
			pid=$!
			echo "$t" >"$W/load/$k-$n.timeout"
			echo "$k-$n" >"$W/live/$pid"
			wait "$pid"
			rm -f "$W/live/$pid"
		done
	}
	sampler() {
		local t0 p rss
		t0=$(date +%s)
		while [ "$(date +%s)" -lt "$end" ]; do
			for p in "$W"/live/*; do
				p=${p##*/}
				[ "$p" = '*' ] && continue
				rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
				[ -n "$rss" ] && echo "$(($(date +%s) - t0)) $(cat "$W/live/$p" 2>/dev/null) $rss"
			done
			sleep 1
		done >"$W/rss"
	}
	sampler &
	local k
	for k in $(seq 0 $((jobs - 1))); do slot "$k" & done
	wait
	python3 - "$W" <<'PY'
import glob, json, os, statistics, sys
w = sys.argv[1]
late, runs, oom, pids, bad = [], 0, 0, 0, 0
for f in glob.glob(f"{w}/load/*.json"):
    runs += 1
    try:
        r = json.load(open(f))
    except Exception:
        bad += 1
        continue
    oom += bool(r.get("oom_killed"))
    pids += bool(r.get("pids_limit_hit"))
    if r.get("timed_out"):
        late.append(r["duration_ms"] - int(open(f[:-5] + ".timeout").read()))
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
print(f"load: {runs} sandboxes, {len(late)} ended by their timeout, {oom} OOM-killed, {pids} hit the pids limit, {bad} without a record")
print(f"load: timeout lateness ms: p50 {q(late,.5):.1f}, p90 {q(late,.9):.1f}, p99 {q(late,.99):.1f}, max {max(late) if late else float('nan'):.1f}")
samples = [l.split() for l in open(f"{w}/rss") if len(l.split()) == 3]
rss = [int(s[2]) for s in samples]
by = {}
for t, who, kb in samples:
    by.setdefault(who, []).append((int(t), int(kb)))
mins = sorted({int(s[0]) // 60 for s in samples})
per_min = [statistics.median([int(s[2]) for s in samples if int(s[0]) // 60 == m]) for m in mins]
print(f"load: supervisor RSS KiB over {len(samples)} samples of {len(by)} supervisors: min {min(rss)}, median {statistics.median(rss):.0f}, max {max(rss)}")
print("load: median supervisor RSS KiB per minute: " + " ".join(f"{v:.0f}" for v in per_min))
long = [v for k, v in by.items() if k.split("-")[0] in ("0", "1") and len(v) > 30]
for v in long[:6]:
    print(f"load: a 120 s supervisor over {v[-1][0]-v[0][0]} s: first {v[0][1]}, max {max(k for _, k in v)}, last {v[-1][1]} KiB")
growth = [max(k for _, k in v) - v[0][1] for v in by.values() if len(v) > 1]
print(f"load: RSS growth within one supervisor's life, KiB: max {max(growth) if growth else 0}")
sys.exit(1 if bad else 0)
PY
}

if [ -n "${SOAK_LOAD:-}" ]; then
	load
	rc=$?
	[ "$rc" -eq 0 ] && [ -z "${SOAK_KEEP:-}" ] && rm -rf "$W"
	exit "$rc"
fi

# ---- one run ------------------------------------------------------------------
# run_one I: a sandbox of the kind drawn for I; killed or not, its kind and
# its supervisor's pid are written for the checks.
run_one() {
	local i=$1 kill=none ws=() img=(--rootfs "$ROOTFS") pay extra=()
	RANDOM=$((SEED + i * 7919))
	# The kinds in fixed proportions: a quarter with a workspace (i % 4 == 1),
	# a third killed (i % 3 == 0: in setup, in the payload, or, with a
	# workspace, in the changes scan), corrupt images and timeouts among the
	# others. Only the moments of the kills are random.
	local wsrun=false
	[ $((i % 4)) -eq 1 ] && wsrun=true
	if [ $((i % 3)) -eq 0 ]; then
		if $wsrun; then
			kill=$(echo setup payload scan | cut -d' ' -f$((i / 12 % 3 + 1)))
		else
			kill=$(echo setup payload | cut -d' ' -f$((i / 3 % 2 + 1)))
		fi
	fi
	pay='echo hello; echo err >&2'
	if $wsrun; then
		ws=(--workspace "$WS")
		case $((RANDOM % 4)) in
		0) ws+=(--session shared) ;;                    # one session, used concurrently
		1) ws+=(--session "s$((RANDOM % 6))") ;;
		esac
		local v=$((RANDOM % 4))
		[ "$kill" = scan ] && v=1
		case $v in
		0) pay='dd if=/dev/zero of=/workspace/big bs=1M count=9 2>/dev/null; echo $?' ;;   # ENOSPC
		*) pay='echo new >/workspace/new; echo x >>/workspace/src/a.txt; rm -f /workspace/src/c.txt; mkdir -p /workspace/gen; for n in $(seq 1 400); do echo $n >/workspace/gen/$n; done' ;;
		esac
		# a scan worth aiming at: 4000 more files, then the marker the soak waits for
		[ "$kill" = scan ] && pay="$pay; for n in \$(seq 401 4400); do echo \$n >/workspace/gen/\$n; done; touch /workspace/zz-scan-$i"
	elif [ $((i % 20)) -eq 2 ]; then
		img=(--image "${CORRUPT[$((RANDOM % ${#CORRUPT[@]}))]}")
	elif [ $((i % 20)) -eq 6 ] || [ $((i % 20)) -eq 14 ]; then
		extra=(--timeout 150ms); pay='sleep 5'
	elif [ $((i % 20)) -eq 16 ]; then
		run_import "$i"
		return
	elif [ $((i % 20)) -eq 10 ]; then
		extra=(--network user)                   # pasta or slirp4netns beside it
	elif [ $((i % 20)) -eq 18 ]; then
		extra=(--allow-host example.com)         # the filtering proxy
	fi
	[ "$kill" = payload ] || [ "$kill" = setup ] && pay="$pay; sleep 1"
	# Every fifth run without a workspace as an unprivileged user (the
	# rootless path: newuidmap, no cgroup of its own), when there is one.
	local as=()
	if [ -n "$ROOTLESS" ] && ! $wsrun && [ $((i % 5)) -eq 3 ]; then
		as=(setpriv --reuid "$ROOTLESS" --regid "$ROOTLESS" --init-groups env HOME="$W/home" XDG_STATE_HOME="$W/xdg")
		img=(--rootfs "$ROOTFS")
		extra=()
	fi
	echo "$kill ${ws[*]:+workspace} ${ws[*]:2} ${img[*]} ${extra[*]} ${as[*]:+rootless}" >"$W/kind/$i"
	"${as[@]}" "$NSBOX" run --json "${img[@]}" "${ws[@]}" "${extra[@]}" \
		-- sh -c "$pay" >"$W/rec/$i" 2>"$W/err/$i" &
	local pid=$!
	echo "$pid" >"$W/pids/$i"
	case $kill in
	setup) sleep "$(printf '0.%03d' $((RANDOM % 20)))"; kill -KILL "$pid" 2>/dev/null ;;
	payload) sleep "0.$((150 + RANDOM % 700))"; kill -KILL "$pid" 2>/dev/null ;;
	scan)
		# the payload's last file, seen in its upper layer: the scan is next
		# (polled without a pause: the scan is short)
		local until=$((SECONDS + 30))
		while [ $SECONDS -lt $until ] && kill -0 "$pid" 2>/dev/null; do
			compgen -G "$STATE/*/*/upper/zz-scan-$i" >/dev/null && break
		done
		sleep "$(printf '0.%03d' $((2 + RANDOM % 40)))"
		kill -KILL "$pid" 2>/dev/null ;;
	esac
	wait "$pid" 2>/dev/null
	echo $? >"$W/kind/$i.rc"
}

# run_import I: `nsbox image import` of a good, cut or garbage archive
# (half of them killed, at 0-80 ms): a good one that ends is an image, the
# others fail and leave none.
run_import() {
	local i=$1 kill=none src pid n
	n=$((i / 20))
	src=$(echo good good cut garbage | cut -d' ' -f$((n % 4 + 1)))
	[ $((n % 2)) -eq 0 ] && kill=setup
	echo "$kill import $src" >"$W/kind/$i"
	"$NSBOX" image import "imp$i" "$W/imp/$src.tar" >/dev/null 2>"$W/err/$i" &
	pid=$!
	echo "$pid" >"$W/pids/$i"
	[ "$kill" != none ] && { sleep "$(printf '0.%03d' $((RANDOM % 80)))"; kill -KILL "$pid" 2>/dev/null; }
	wait "$pid" 2>/dev/null
	local rc=$?
	echo "$rc" >"$W/kind/$i.rc"
	if [ "$rc" -ne 137 ]; then
		if [ "$src" = good ] && { [ "$rc" -ne 0 ] || ! [ -d "$IMAGES/imp$i/rootfs" ]; }; then
			echo "import of a good archive: exit $rc, $(cat "$W/err/$i")" >"$W/rec/$i"
		elif [ "$src" != good ] && { [ "$rc" -eq 0 ] || [ -e "$IMAGES/imp$i" ]; }; then
			echo "import of a $src archive: exit $rc" >"$W/rec/$i"
		else
			echo ok >"$W/rec/$i"
		fi
	fi
	"$NSBOX" image rm "imp$i" >/dev/null 2>&1
}

start=$(date +%s)
echo "soak: $RUNS sandboxes, $JOBS at a time, seed $SEED, state on a ${STATE_SIZE} tmpfs"
running=0
for i in $(seq 1 "$RUNS"); do
	run_one "$i" &
	running=$((running + 1))
	if [ "$running" -ge "$JOBS" ]; then
		wait -n
		running=$((running - 1))
	fi
	[ $((i % 100)) -eq 0 ] && echo "soak: $i started ($(($(date +%s) - start))s)"
done
wait
echo "soak: all runs ended in $(($(date +%s) - start))s"

# ---- afterwards ---------------------------------------------------------------
failures=0
bad() { echo "LEFTOVER/FAIL: $*"; failures=$((failures + 1)); }

# Every process in our pid namespace but this shell (pid 1) and the
# listing's own.
marked() {
	local p me=$BASHPID stat
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" -eq 1 ] || [ "$p" -eq "$me" ] && continue
		stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		stat=${stat##*) }
		read -r _ ppid _ <<<"$stat"
		[ "$ppid" -eq "$me" ] && continue
		echo "$p $(cat "/proc/$p/comm" 2>/dev/null)"
	done
}
# The janitors of killed supervisors remove the cgroups in the background
# (they wait up to 30 s for the last process): give them that long.
for t in $(seq 1 60); do
	[ -z "$(marked)" ] && break
	sleep 1
done
left=$(marked)
[ -z "$left" ] || bad "processes: $(echo "$left" | tr '\n' ';')"

# One more run with a workspace reaps what killed supervisors left in runs/.
"$NSBOX" run --rootfs "$ROOTFS" --workspace "$WS" -- true >/dev/null 2>&1 || bad "the final run failed"

cat "$W"/pids/* | sort -u >"$W/our-pids"
cgs=$(find /sys/fs/cgroup -maxdepth 6 -type d -name 'nsbox-*' 2>/dev/null |
	awk -F/ 'NR==FNR {ours[$1]; next} {n = $NF; sub(/^nsbox-(supervisor-)?/, "", n); sub(/-.*/, "", n); if (n in ours) print}' "$W/our-pids" -)
[ -z "$cgs" ] || bad "cgroups: $cgs"

grep -v ' /proc\b\| /sys\b' /proc/self/mountinfo | awk '{print $5}' | sort >"$W/mounts.after"
diff -q "$W/mounts.before" "$W/mounts.after" >/dev/null || bad "mounts: $(diff "$W/mounts.before" "$W/mounts.after" | grep '^[<>]' | tr '\n' ' ')"

socks=$(find /tmp "$STATE" "$W" -type s 2>/dev/null)
[ -z "$socks" ] || bad "sockets: $socks"
tmps=$(ls -A /tmp)
[ -z "$tmps" ] || bad "temporary files in /tmp: $tmps"
runs=$(ls -A "$STATE/runs" 2>/dev/null)
[ -z "$runs" ] || bad "run state in $STATE/runs: $runs"
"$NSBOX" image ls >/dev/null 2>&1 || bad "nsbox image ls failed"
store=$(find "$IMAGES" -mindepth 1 -maxdepth 1 ! -name 'bad-*' -printf '%f ')
[ -z "$store" ] || bad "left in the image store: $store"
half=$(find "$STATE/sessions" -mindepth 1 -maxdepth 1 -name '.*' -printf '%f\n' 2>/dev/null)
[ -z "$half" ] || bad "half-made sessions: $half"

# Every session reads, as a listing and as its changes.
sessions=$(ls "$STATE/sessions" 2>/dev/null)
"$NSBOX" session ls >"$W/session-ls" 2>&1 || bad "nsbox session ls: $(cat "$W/session-ls")"
for s in $sessions; do
	"$NSBOX" session changes --json "$s" >"$W/session-$s.json" 2>"$W/session-$s.err" ||
		bad "session $s does not read: $(cat "$W/session-$s.err")"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$W/session-$s.json" 2>/dev/null ||
		bad "session $s: changes are not JSON"
done

manifest >"$W/ws.after"
cmp -s "$W/ws.before" "$W/ws.after" || bad "the host workspace changed: $(diff "$W/ws.before" "$W/ws.after" | head -5 | tr '\n' ' ')"

# Records: every run not killed printed exactly one valid record, with the
# exit status nsbox exited with.
python3 - "$W" "$RUNS" >"$W/records" <<'EOF' || bad "records: $(grep -v '^summary' "$W/records" | head -20 | tr '\n' ';')"
import json, os, sys
w, runs = sys.argv[1], int(sys.argv[2])
bad = 0
kinds = {}
killed = enospc = setup_failed = timed_out = 0
phases = {"setup": 0, "payload": 0, "scan": 0, "import": 0}
late = 0
imports = 0
for i in range(1, runs + 1):
    kind = open(f"{w}/kind/{i}").read().split()
    rc = int(open(f"{w}/kind/{i}.rc").read())
    if kind[0] != "none":
        if rc != 137:   # ended before the kill came: then it has a record too
            late += 1
            kind[0] = "none"
        else:
            killed += 1
            phases["import" if kind[1] == "import" else kind[0]] += 1
            continue
    if kind[1] == "import":
        imports += 1
        verdict = open(f"{w}/rec/{i}").read().strip()
        if verdict != "ok":
            bad += 1
            print(f"run {i} ({' '.join(kind)}): {verdict}")
        continue
    try:
        rec = json.load(open(f"{w}/rec/{i}"))
        assert isinstance(rec, dict) and rec["version"] == 1, "not a version-1 record"
        assert rec["exit_status"] == rc, f"exit_status {rec['exit_status']} but nsbox exited {rc}"
        assert rec["status"] in ("exited", "signaled", "timed_out", "setup_failed", "oom_killed", "pids_limit"), rec["status"]
        if rec["status"] == "setup_failed":
            setup_failed += 1
            assert rec["error"] and rec["error"]["message"], "setup_failed without an error"
        if rec.get("timed_out"):
            timed_out += 1
        if "No space left" in json.dumps(rec):
            enospc += 1
    except Exception as e:
        bad += 1
        print(f"run {i} ({' '.join(kind)}, exit {rc}): {e!r}: {open(f'{w}/err/{i}').read()[:300]}")
print(f"summary: {runs} runs, {killed} killed by SIGKILL (setup {phases['setup']}, payload {phases['payload']}, "
      f"changes scan {phases['scan']}, image import {phases['import']}; {late} ended before their kill), {setup_failed} setup_failed, {timed_out} timed out, {enospc} saw ENOSPC, {imports} image imports ended, {bad} bad records")
sys.exit(1 if bad else 0)
EOF
grep '^summary' "$W/records" | sed 's/^summary: /soak: /'
echo "soak: workspaces: $(grep -l workspace "$W"/kind/[0-9]* | wc -l), corrupt images: $(grep -l 'image bad' "$W"/kind/[0-9]* | wc -l), rootless: $(grep -l rootless "$W"/kind/[0-9]* | wc -l) (${ROOTLESS:-no nsbox-test user}), sessions left: $(wc -w <<<"$sessions")"
echo "soak: leftovers: $failures (processes, cgroups, mounts, sockets, /tmp, runs/, sessions, image store, workspace)"
echo "soak: done in $(($(date +%s) - start))s"
if [ "$failures" -eq 0 ] && [ -z "${SOAK_KEEP:-}" ]; then
	umount "$IMAGES" "$STATE" /tmp 2>/dev/null
	rm -rf "$W"
else
	echo "soak: kept for inspection: $W (the state directory was a tmpfs of this namespace)"
fi
[ "$failures" -eq 0 ]
