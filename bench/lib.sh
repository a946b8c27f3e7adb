# shellcheck shell=bash disable=SC2034 # N, how and users are the sourcing script's
# Sourced by the bench scripts: the nsbox under test staged in $T/bin, and
# the users the rounds run as. Needs T (the bench's scratch directory).

# stage_nsbox BUILD: libnsbox (with its import module, and nsbox-monitor,
# which the library finds beside itself) copied into $T/bin, and the nsbox
# command there: the installed one when NSBOX names it, else the build
# tree's relinked with an $ORIGIN run path (LD_LIBRARY_PATH would slow
# bubblewrap down too). Sets N (its path) and how (what it is).
stage_nsbox() {
	local build=$1 lib=$1/src/lib/.libs
	mkdir -p "$T/bin"
	if [ -f "$lib/libnsbox.so.0" ]; then
		cp -P "$lib"/libnsbox.so* "$T/bin/"
		cp "$lib/libnsbox-import.so" "$T/bin/" 2>/dev/null || true
		cp "$build/src/monitor/nsbox-monitor" "$T/bin/" 2>/dev/null || true
	fi
	if [ -n "${NSBOX:-}" ]; then
		cp "$NSBOX" "$T/bin/nsbox"
		how="installed $(command -v "$NSBOX" || echo "$NSBOX")"
	else
		if [ ! -f "$lib/libnsbox.so.0" ] || [ ! -f "$build/src/cli/main.o" ]; then
			echo "bench: build nsbox first ($build)"
			exit 1
		fi
		# The CLI's own convenience libraries, as src/cli/nsbox is linked.
		# shellcheck disable=SC2046 # pkg-config prints separate words
		${CC:-cc} -o "$T/bin/nsbox" "$build/src/cli/main.o" "$build/src/cli/.libs/libcli.a" \
			"$build/src/cli/.libs/libmcp.a" -L"$T/bin" -lnsbox $(pkg-config --libs jansson) -Wl,-rpath,'$ORIGIN'
		how="build tree $build, relinked with an \$ORIGIN run path"
	fi
	chmod -R a+rX "$T/bin"
	N=$T/bin/nsbox
}

# bench_users: users is root, and nsbox-test (with a private HOME under $T)
# when it has subordinate ids; else it says why it is root only.
bench_users() {
	users=root
	if id nsbox-test >/dev/null 2>&1 && grep -q '^nsbox-test:' /etc/subuid 2>/dev/null; then
		users="root nsbox-test"
		mkdir -p "$T/home-nsbox-test"
		chown nsbox-test: "$T/home-nsbox-test"
	else
		echo "bench: no user nsbox-test with subordinate ids: root only (the test suite creates it)"
	fi
}

# as USER CMD...: CMD with USER's ids and its private HOME (hyperfine itself
# runs as the user, so the commands it times carry no wrapper).
as() {
	local who=$1
	shift
	if [ "$who" = root ]; then "$@"; else
		env HOME="$T/home-$who" setpriv --reuid="$(id -u "$who")" --regid="$(id -g "$who")" --init-groups -- "$@"
	fi
}
