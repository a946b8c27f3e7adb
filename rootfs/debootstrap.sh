#!/bin/sh
# nsbox's images from Debian: a minimal Debian with a non-root 'sandbox' user
# (uid 1000, home /home/sandbox) and /workspace, and the packages of a recipe:
#   minimal  python3 (venv, pip), nodejs, npm, git
#   default  minimal + numpy, pandas, requests, httpx, matplotlib (Debian's
#            python3-* packages), curl, ca-certificates, procps
#   dev      default + build-essential, autoconf, pkg-config
# Run by `nsbox image build [--recipe NAME]` (embedded in it), as root.
# Usage: debootstrap.sh DEST MIRROR SUITE COMPONENTS [RECIPE]
set -eu
dest=$1 mirror=$2 suite=$3 components=$4 recipe=${5:-default}
minimal="python3 python3-venv python3-pip nodejs npm git"
stack="python3-numpy python3-pandas python3-requests python3-httpx python3-matplotlib curl ca-certificates procps"
# matplotlib's fonttools needs "python3-scipy | python3-munkres": apt takes the
# first, and scipy brings pythran with g++, boost's and OpenBLAS's headers
# (800 MiB). munkres, named here, satisfies it in 100 KiB.
stack="$stack python3-munkres"
case $recipe in
minimal) packages=$minimal ;;
default) packages="$minimal $stack" ;;
dev) packages="$minimal $stack build-essential autoconf pkg-config" ;;
*)
	echo "nsbox: no image recipe '$recipe' (minimal, default, dev)" >&2
	exit 2
	;;
esac
if ! command -v debootstrap >/dev/null 2>&1; then
	echo "nsbox: debootstrap is not installed (apt-get install debootstrap)" >&2
	exit 3
fi
# Step lines are what `nsbox image build` shows on the terminal (it keeps the
# rest, the tools' output, in a log file): keep the "nsbox: [" prefix.
# The setuid/setgid bits, file capabilities and device nodes debootstrap
# creates are removed by nsbox after this script, before the image is
# published (payloads run with no_new_privs; the store is world-traversable).
step() { echo "nsbox: [$1/6] $2" >&2; }

step 1 "debootstrap $suite from $mirror (minimal base)"
# The base alone: debootstrap's own resolver stumbles over npm's hundreds of
# dependencies, apt in the new system resolves them properly.
debootstrap --variant=minbase --components="$components" --include=ca-certificates \
	"$suite" "$dest" "$mirror" >&2

step 2 "apt-get install ($recipe) $packages"
mount -t proc proc "$dest/proc"
trap 'umount "$dest/proc" 2>/dev/null || true' EXIT
# shellcheck disable=SC2086 # $packages is a list of package names
chroot "$dest" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get install -y -q \
	--no-install-recommends $packages >&2
umount "$dest/proc"
trap - EXIT

step 3 "the sandbox user (1000:1000, /home/sandbox) and /workspace"
chroot "$dest" groupadd -g 1000 sandbox
chroot "$dest" useradd -u 1000 -g 1000 -m -d /home/sandbox -s /bin/bash sandbox
mkdir -p "$dest/workspace"
chown 1000:1000 "$dest/workspace"

# PEP 668: Debian marks its Python "externally managed", so pip refuses to
# install anything outside a virtual environment. In a sandbox that is thrown
# away after the run, with a read-only root, pip cannot break the system's
# packages: it installs into the user's site directory (the sandbox's
# writable home) instead. So the marker goes, and `pip install PKG` works.
step 4 "pip: no externally-managed marker (PEP 668); installs go to the sandbox user's home"
rm -f "$dest"/usr/lib/python3*/EXTERNALLY-MANAGED

# What is removed, and how much of it, is said on the terminal.
kib() { [ $# -gt 0 ] && du -skc "$@" 2>/dev/null | tail -n 1 | cut -f 1 || echo 0; }
removed=
gone() {   # gone WHAT PATH...: remove the paths, note WHAT and its size
	what=$1
	shift
	k=$(kib "$@")
	rm -rf "$@"
	[ "${k:-0}" -gt 0 ] && removed="$removed${removed:+, }$what $((k / 1024)) MiB"
	total=$((${total:-0} + ${k:-0}))
}
chroot "$dest" apt-get clean
# Documentation, but each package's copyright file; manuals; translations of
# programs' messages (the sandbox speaks C.UTF-8); the Python packages' own
# test suites (never imported); apt's lists and caches; logs.
find "$dest/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
docs=$(kib "$dest/usr/share/doc")
find "$dest/usr/share/doc" -depth -mindepth 1 -type d -empty -delete 2>/dev/null || true
gone "documentation" "$dest"/usr/share/man "$dest"/usr/share/info "$dest"/usr/share/doc-base \
	"$dest"/usr/share/lintian "$dest"/usr/share/gtk-doc
gone "translations" "$dest"/usr/share/locale/*
# shellcheck disable=SC2046 # one path per line, none with blanks
gone "Python test suites" $(find "$dest"/usr/lib/python3/dist-packages -type d -name tests -prune 2>/dev/null)
gone "apt lists and caches" "$dest"/var/lib/apt/lists/* "$dest"/var/cache/apt/*.bin "$dest"/var/cache/debconf/*-old
gone "logs and build leftovers" "$dest"/var/log/*.log "$dest"/var/log/apt/* "$dest"/root/.npm "$dest"/root/.cache \
	"$dest"/tmp/* "$dest"/debootstrap
mkdir -p "$dest/usr/share/man" "$dest/var/lib/apt/lists/partial"
step 5 "stripped $((total / 1024)) MiB: $removed (copyright files kept: $((docs / 1024)) MiB)"

# debootstrap copied the build host's resolver settings: they do not belong
# in the image. An empty file stays, for --network user to bind its own over.
rm -f "$dest/etc/resolv.conf"
: >"$dest/etc/resolv.conf"

step 6 "recording the contents"
dpkg-query --admindir="$dest/var/lib/dpkg" -W -f '${Package} ${Version}\n' >"$dest/../packages.txt"
chmod 755 "$dest"
