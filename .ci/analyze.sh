#!/bin/bash
# Static analysis of nsbox (make analyze): cppcheck, clang's static analyzer
# (the checkers scan-build runs, driven per file with `clang --analyze`),
# GCC's -fanalyzer over src/, and shellcheck over the shell scripts.
# Exits 1 on any finding that .ci/analyzer-suppressions.txt does not justify.
#   .ci/analyze.sh [BUILDDIR] [cppcheck|clang|gcc|shellcheck]...
# BUILDDIR holds config.h (default: the source tree). Findings are printed as
# TOOL|FILE|LINE|CHECK|MESSAGE; a suppression line names TOOL|FILE|CHECK|TEXT
# (TEXT: a fixed string the message must contain) and, after the last |, why.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
shift || true
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(cppcheck clang gcc shellcheck)
cd "$src" || exit 2
[ -f "$build/config.h" ] || { echo "analyze: no config.h in $build (run ./configure)" >&2; exit 2; }
jobs=$(nproc 2>/dev/null || echo 2)
out=$(mktemp -d /tmp/nsbox-analyze.XXXXXX)
trap 'rm -rf "$out"' EXIT

# What the build compiles: every C file under src/ but the generated tables.
mapfile -t csrc < <(git ls-files 'src/*.c' 2>/dev/null || find src -name '*.c' | sort)
cflags=(-std=gnu11 -DHAVE_CONFIG_H -Isrc/include -Isrc/lib -Isrc/cli "-I$build" -include config.h -DPKGLIBDIR='"/usr/lib/nsbox"'
	-DPKGLIBEXECDIR='"/usr/libexec/nsbox"')

run_cppcheck() {
	cppcheck -q --std=c11 --enable=warning,portability,performance -j"$jobs" \
		--template='cppcheck|{file}|{line}|{id}|{message}' \
		-DHAVE_CONFIG_H -D__GNUC__ -DPKGLIBDIR='"/usr/lib/nsbox"' -DPKGLIBEXECDIR='"/usr/libexec/nsbox"' -Isrc/include -Isrc/lib -Isrc/cli "--include=$build/config.h" \
		--suppress=missingIncludeSystem "${csrc[@]}" 2>&1 | grep '^cppcheck|'
}

run_clang() {
	# One clang per file; -analyzer-output=text prints the path to each report.
	printf '%s\n' "${csrc[@]}" | xargs -P"$jobs" -I{} \
		clang --analyze -Xclang -analyzer-output=text "${cflags[@]}" -o /dev/null {} >"$out/clang.log" 2>&1
	sed -nE 's/^([^:]+):([0-9]+):[0-9]+: warning: (.*) \[([a-zA-Z.]+)\]$/clang|\1|\2|\4|\3/p' "$out/clang.log"
}

run_gcc() {
	printf '%s\n' "${csrc[@]}" | xargs -P"$jobs" -I{} \
		gcc -fanalyzer -fdiagnostics-plain-output -O0 "${cflags[@]}" -c -o /dev/null {} >"$out/gcc.log" 2>&1
	sed -nE 's/^([^:]+):([0-9]+):[0-9]+: warning: (.*) \[-W([a-z-]+)\]$/gcc|\1|\2|\4|\3/p' "$out/gcc.log" |
		sed -E 's/ \[CWE-[0-9]+\]//'
}

run_shellcheck() {
	# Every shell script the tree tracks: by extension or by #! line.
	local f files=()
	while IFS= read -r f; do
		case $f in
		*.sh | *.test | *.bash) files+=("$f") ;;
		*) head -c 64 "$f" 2>/dev/null | head -n 1 | grep -qE '^#!.*/(env )?(ba|da)?sh\b' && files+=("$f") ;;
		esac
	done < <(git ls-files)
	shellcheck -f gcc "${files[@]}" | sed -nE 's/^([^:]+):([0-9]+):[0-9]+: [a-z]+: (.*) \[(SC[0-9]+)\]$/shellcheck|\1|\2|\4|\3/p'
}

for t in "${tools[@]}"; do
	s=$(date +%s)
	"run_$t" >"$out/$t.found"
	echo "analyze: $t: $(wc -l <"$out/$t.found") raw findings in $(($(date +%s) - s))s" >&2
done
cat "$out"/*.found | sort -u >"$out/all.raw"

# clang 14's analyzer does not run __attribute__((cleanup)) handlers, so every
# _cleanup_ variable it sees leave scope is a "potential leak". Such reports
# are dropped when that file declares the variable with _cleanup_; leaks stay
# checked by gcc -fanalyzer, which runs the cleanups (GCC lowers them itself).
while IFS='|' read -r t f l c m; do
	if [ "$t|$c" = "clang|unix.Malloc" ] && [[ $m =~ ^Potential\ leak\ of\ memory\ pointed\ to\ by\ \'([A-Za-z0-9_]+)\'$ ]] &&
		grep -qE "_cleanup_[a-z_]*(\([a-z_]+\))? [^=;]*[* ]${BASH_REMATCH[1]}( =|;)" "$f"; then
		continue
	fi
	printf '%s|%s|%s|%s|%s\n' "$t" "$f" "$l" "$c" "$m"
done <"$out/all.raw" >"$out/all"

# Drop the justified findings; an entry that no longer matches is reported
# (it may hide a future real one).
supp=.ci/analyzer-suppressions.txt
awk -F'|' -v supp="$supp" -v used="$out/used" '
BEGIN {
	while ((getline l < supp) > 0) {
		if (l ~ /^[ \t]*(#|$)/) continue
		n = split(l, f, "|")
		if (n < 5 || f[5] ~ /^[ \t]*$/) { print "analyze: suppression without a reason: " l > "/dev/stderr"; bad = 1; continue }
		k++; st[k] = f[1]; sf[k] = f[2]; sc[k] = f[3]; sx[k] = f[4]; sl[k] = l
	}
}
{
	for (i = 1; i <= k; i++)
		if ($1 == st[i] && $2 == sf[i] && $4 == sc[i] && index($5, sx[i])) { hit[i] = 1; next }
	print; found = 1
}
END {
	for (i = 1; i <= k; i++)
		if (!hit[i] && index(tools, " " st[i] " ")) print "analyze: stale suppression (nothing matches): " sl[i] > "/dev/stderr"
	exit bad
}' tools=" ${tools[*]} " "$out/all" >"$out/left"
rc=$?
if [ -s "$out/left" ]; then
	echo "analyze: $(wc -l <"$out/left") unjustified findings:"
	cat "$out/left"
	for t in clang gcc; do
		[ -s "$out/$t.log" ] && grep -q "^$t|" "$out/left" && cp "$out/$t.log" "$build/analyze-$t.log" &&
			echo "analyze: the $t paths to each finding are in $build/analyze-$t.log"
	done
	exit 1
fi
[ $rc -eq 0 ] || exit 1
echo "analyze: clean (${tools[*]})"
