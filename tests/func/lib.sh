# shellcheck shell=bash
# Shared setup for the functional tests: a throwaway busybox root filesystem
# with the static probe, a staged copy of nsbox that an unprivileged user can
# run, helpers to run as each identity, and a pass/fail tally.
# Exit codes follow automake: 0 pass, 1 fail, 77 skip (with the reason printed).
set -u

: "${top_builddir:?run through 'make check'}"
: "${top_srcdir:?run through 'make check'}"

PASSED=0
FAILED=0

skip() { echo "SKIP: $*"; exit 77; }
pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }

# check DESCRIPTION COMMAND...: pass when the command succeeds.
check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

# expect_eq DESCRIPTION EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi
}

# squeeze TEXT: its words joined by single spaces (what `echo $TEXT` gave).
squeeze() {
	local w
	read -r -d '' -a w <<<"$1" || true
	echo "${w[*]}"
}

finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}

T=$(mktemp -d /tmp/nsbox-test.XXXXXX) || exit 99
chmod 755 "$T"
cleanup() {
	# Everything a test started is stopped by now; remove only our tree.
	rm -rf "$T"
}
trap cleanup EXIT

BUSYBOX=${BUSYBOX:-$(command -v busybox || true)}
[ -n "$BUSYBOX" ] || skip "busybox (static) is not installed: apt-get install busybox-static"
file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic executable' ||
	skip "$BUSYBOX is not statically linked: apt-get install busybox-static"
PROBE=$top_builddir/tests/helpers/probe
[ -x "$PROBE" ] || skip "the probe was not built ($PROBE)"

# make_rootfs DIR: bin/ with busybox applets and the probe, the mount points
# nsbox needs, and a passwd with the sandbox user.
make_rootfs() {
	local r=$1
	mkdir -p "$r"/bin "$r"/proc "$r"/dev "$r"/tmp "$r"/sys "$r"/etc "$r"/home/sandbox "$r"/mnt
	cp "$BUSYBOX" "$r/bin/busybox"
	cp "$PROBE" "$r/bin/probe"
	for a in sh echo cat ls id hostname ps sleep true false env pwd test kill wc head tr seq yes dd nc printf tar find grep mkdir; do
		ln -sf busybox "$r/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/home/sandbox:/bin/sh\n' >"$r/etc/passwd"
	printf 'not a program\n' >"$r/bin/notexec"
	chmod 644 "$r/bin/notexec"
	chmod -R a+rX "$r"
}
ROOTFS=$T/rootfs
make_rootfs "$ROOTFS"

# Stage the binary and library where every user can read them (the build
# tree may be in a private home directory).
mkdir -p "$T/bin"
cp "$top_builddir/src/cli/.libs/nsbox" "$T/bin/nsbox"
cp -P "$top_builddir"/src/lib/.libs/libnsbox.so* "$T/bin/"
# The import module and the monitor of started sandboxes, beside the library
# where libnsbox looks first.
cp "$top_builddir/src/lib/.libs/libnsbox-import.so" "$T/bin/"
cp "$top_builddir/src/monitor/nsbox-monitor" "$T/bin/"
chmod -R a+rX "$T/bin"
export LD_LIBRARY_PATH=$T/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# shellcheck disable=SC2034 # used by the tests that source this file
NSBOX=$T/bin/nsbox

# ensure_test_user: as root, the unprivileged user 'nsbox-test' with a range
# of subordinate ids (the newuidmap path), created here when missing so that
# the suite needs nothing prepared beforehand. Tests may run in parallel: the
# creation is serialised by a lock. Fails (with the reason printed) when the
# user cannot be made; the tests then run as root and nobody only.
ensure_test_user() {
	(
		flock 9
		if ! id nsbox-test >/dev/null 2>&1; then
			command -v useradd >/dev/null || { echo "note: no useradd: tests run as root and nobody only"; exit 1; }
			useradd --create-home --shell /bin/sh --comment "nsbox test suite" nsbox-test ||
				{ echo "note: cannot create the user nsbox-test: tests run as root and nobody only"; exit 1; }
		fi
		for f in /etc/subuid /etc/subgid; do
			grep -q '^nsbox-test:' "$f" 2>/dev/null && continue
			# useradd allocates a range itself where login.defs says so;
			# otherwise take the first 65536 ids above every range in use.
			local top
			top=$(awk -F: '{e = $2 + $3; if (e > m) m = e} END {print (m > 100000 ? m : 100000)}' "$f" 2>/dev/null)
			echo "nsbox-test:${top:-100000}:65536" >>"$f" ||
				{ echo "note: cannot add nsbox-test to $f"; exit 1; }
		done
	) 9>/run/nsbox-test-user.lock
}

# The identities to test: root, and (as root) an unprivileged user without
# subordinate ids (one-id map) and, when CI created it, one with them.
if [ "$(id -u)" -eq 0 ]; then
	USERS="root nobody"
	ensure_test_user && USERS="$USERS nsbox-test"
	command -v setpriv >/dev/null || skip "setpriv is missing (util-linux)"
else
	USERS=self
fi

# as USER CMD...: run CMD as USER with a private HOME. It is a script that
# execs, so `as USER nsbox ... &` leaves $! as nsbox's own pid.
cat >"$T/bin/as" <<'AS'
#!/bin/sh
who=$1
shift
# make coverage: each user's processes write their gcov counts under a
# directory of their own (merged into the report afterwards).
if [ -n "${NSBOX_COVERAGE_PREFIX:-}" ] && [ "$who" != root ] && [ "$who" != self ]; then
	GCOV_PREFIX=$NSBOX_COVERAGE_PREFIX/$who
	export GCOV_PREFIX
fi
case $who in
root | self) exec "$@" ;;
nobody) exec env HOME="$NSBOX_T/home-nobody" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@" ;;
*) exec env HOME="$NSBOX_T/home-$who" setpriv --reuid="$(id -u "$who")" --regid="$(id -g "$who")" --init-groups -- "$@" ;;
esac
AS
chmod 755 "$T/bin/as"
export NSBOX_T=$T
for who in $USERS; do
	case $who in
	root | self) ;;
	nobody) mkdir -p "$T/home-nobody" && chown 65534:65534 "$T/home-nobody" ;;
	*) mkdir -p "$T/home-$who" && chown "$(id -u "$who"):$(id -g "$who")" "$T/home-$who" ;;
	esac
done
AS=$T/bin/as
# Try a command up to N times, a tenth of a second apart, until it succeeds.
until_true() {
	local n=$1
	shift
	for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
	return 1
}
as() { "$AS" "$@"; }
# home_of USER: a directory USER can write to.
home_of() { case $1 in root | self) echo "$T" ;; *) echo "$T/home-$1" ;; esac; }

# kv KEY: the value of KEY=... in the probe output on stdin.
kv() { sed -n "s/^$1=//p" | head -n 1; }

# json EXPR FILE: evaluate a Python expression over the record `r`.
json() {
	python3 -c 'import json,sys; r=json.load(open(sys.argv[2])); v=eval(sys.argv[1]); print(json.dumps(v) if not isinstance(v,str) else v)' "$1" "$2"
}

# marker_procs MARKER: host processes whose command line contains MARKER.
marker_procs() {
	# The bracket keeps the pattern from matching this grep's own arguments.
	# A returned nsbox command's janitor (its fork, with its command line)
	# may still be finishing: it is not the run's, and it exits by itself
	# (limits.test checks that none outlives its run).
	local pat="${1%?}[${1#"${1%?}"}]" f n=0
	while read -r f; do
		[ -n "$f" ] || continue
		[ "$(cat "${f%/cmdline}/comm" 2>/dev/null)" = nsbox-janitor ] || n=$((n + 1))
	done < <(grep -la -- "$pat" /proc/[0-9]*/cmdline 2>/dev/null)
	echo "$n"
}

command -v python3 >/dev/null || skip "python3 is needed to read JSON records"
