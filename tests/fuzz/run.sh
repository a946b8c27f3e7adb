#!/bin/bash
# `make fuzz`: run each libFuzzer harness for FUZZ_SECONDS, FUZZ_JOBS at a
# time, starting from its seed corpus (tests/fuzz/corpus/NAME, read-only)
# and the inputs earlier runs found (tests/fuzz/work/NAME in the build
# tree). Prints executions, coverage and the result per harness; a crash,
# leak, timeout or sanitizer report fails the run with the input kept in
# tests/fuzz/artifacts/NAME/ (add it to the corpus once it is fixed).
#
# usage: run.sh SRCDIR BUILDDIR HARNESS...
set -u
srcdir=$1
builddir=$2
shift 2
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
cd "$builddir" || exit 1
mkdir -p tests/fuzz/logs

run_one() {
	h=$1
	work=tests/fuzz/work/$h
	art=tests/fuzz/artifacts/$h
	log=tests/fuzz/logs/$h.log
	mkdir -p "$work" "$art"
	dict=()
	[ -f "$srcdir/tests/fuzz/dict/$h.dict" ] && dict=("-dict=$srcdir/tests/fuzz/dict/$h.dict")
	# -timeout: one input running 10 s is a hang; -rss_limit_mb: a
	# blow-up is a finding too. Leaks are reported by LeakSanitizer.
	# (Leaks inside libseccomp itself are not ours: lsan.supp says why.)
	LSAN_OPTIONS="suppressions=$srcdir/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
	./tests/fuzz/fuzz-"$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" \
		"$work" "$srcdir/tests/fuzz/corpus/$h" >"$log" 2>&1
	echo $? >"$log.rc"
}

# FUZZ_JOBS at a time.
running=0
for h in "$@"; do
	[ -x "tests/fuzz/fuzz-$h" ] || { echo "fuzz: tests/fuzz/fuzz-$h was not built" >&2; exit 1; }
	rm -f "tests/fuzz/logs/$h.log.rc"
	run_one "$h" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n 2>/dev/null || wait
		running=$((running - 1))
	fi
done
wait

status=0
printf '%-14s %12s %9s %7s %7s  %s\n' harness executions exec/s cov corpus result
for h in "$@"; do
	log=tests/fuzz/logs/$h.log
	rc=$(cat "$log.rc" 2>/dev/null || echo 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
	corp=$(grep -oE 'corp: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
	if [ "$rc" -eq 0 ]; then
		result=ok
	else
		result="FAILED (exit $rc): see $log and tests/fuzz/artifacts/$h/"
		status=1
	fi
	printf '%-14s %12s %9s %7s %7s  %s\n' "$h" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${corp:-?}" "$result"
done
if [ "$status" -ne 0 ]; then
	for h in "$@"; do
		rc=$(cat "tests/fuzz/logs/$h.log.rc" 2>/dev/null || echo 1)
		[ "$rc" -eq 0 ] && continue
		echo "==== $h (tests/fuzz/logs/$h.log, last lines)"
		grep -vE '^#[0-9]+' "tests/fuzz/logs/$h.log" | tail -n 40
	done
fi
exit "$status"
