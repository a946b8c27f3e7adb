#!/bin/sh
# nsbox's default image: a minimal Debian with Python 3 (venv, pip), Node.js,
# npm and git, a non-root 'sandbox' user (uid 1000, home /home/sandbox) and
# /workspace. Run by `nsbox image build` (embedded in it), as root.
# Usage: debootstrap.sh DEST MIRROR SUITE COMPONENTS
set -eu
dest=$1 mirror=$2 suite=$3 components=$4
if ! command -v debootstrap >/dev/null 2>&1; then
	echo "nsbox: debootstrap is not installed (apt-get install debootstrap)" >&2
	exit 3
fi
# Step lines are what `nsbox image build` shows on the terminal (it keeps the
# rest, the tools' output, in a log file): keep the "nsbox: [" prefix.
# The setuid/setgid bits, file capabilities and device nodes debootstrap
# creates are removed by nsbox after this script, before the image is
# published (payloads run with no_new_privs; the store is world-traversable).
step() { echo "nsbox: [$1/5] $2" >&2; }

step 1 "debootstrap $suite from $mirror (minimal base)"
# The base alone: debootstrap's own resolver stumbles over npm's hundreds of
# dependencies, apt in the new system resolves them properly.
debootstrap --variant=minbase --components="$components" --include=ca-certificates \
	"$suite" "$dest" "$mirror" >&2

step 2 "apt-get install python3 python3-venv python3-pip nodejs npm git"
mount -t proc proc "$dest/proc"
trap 'umount "$dest/proc" 2>/dev/null || true' EXIT
chroot "$dest" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get install -y -q \
	--no-install-recommends python3 python3-venv python3-pip nodejs npm git >&2
umount "$dest/proc"
trap - EXIT

step 3 "the sandbox user (1000:1000, /home/sandbox) and /workspace"
chroot "$dest" groupadd -g 1000 sandbox
chroot "$dest" useradd -u 1000 -g 1000 -m -d /home/sandbox -s /bin/bash sandbox
mkdir -p "$dest/workspace"
chown 1000:1000 "$dest/workspace"

step 4 "stripping caches, documentation and logs"
chroot "$dest" apt-get clean
rm -rf "$dest"/var/lib/apt/lists/* "$dest"/var/cache/apt/*.bin "$dest"/var/cache/debconf/*-old \
	"$dest"/usr/share/doc/* "$dest"/usr/share/man/* "$dest"/usr/share/info/* \
	"$dest"/var/log/*.log "$dest"/var/log/apt/* "$dest"/root/.npm "$dest"/tmp/* \
	"$dest"/debootstrap

# debootstrap copied the build host's resolver settings: they do not belong
# in the image. An empty file stays, for --network user to bind its own over.
rm -f "$dest/etc/resolv.conf"
: >"$dest/etc/resolv.conf"

step 5 "recording the contents"
dpkg-query --admindir="$dest/var/lib/dpkg" -W -f '${Package} ${Version}\n' >"$dest/../packages.txt"
chmod 755 "$dest"
