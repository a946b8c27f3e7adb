#!/bin/sh
# Set up nsbox on a fresh Debian/Ubuntu machine and run a first sandbox:
# install the build and test dependencies, build, install a busybox image
# named 'busybox' into the image store, and run a command in it.
# Run it from the source tree; it uses sudo for apt-get when not root.
set -eu
cd "$(dirname "$0")"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if command -v apt-get >/dev/null; then
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
		build-essential autoconf automake libtool pkg-config file \
		libseccomp-dev libcap-dev libmnl-dev libyaml-dev check \
		busybox-static uidmap python3 util-linux >/dev/null
fi
[ -x configure ] || ./autogen.sh >/dev/null
[ -f Makefile ] || ./configure --enable-werror >/dev/null
make -j"$(nproc)" >/dev/null
if [ "$(id -u)" -eq 0 ]; then
	store=/var/lib/nsbox/images
else
	store=${XDG_DATA_HOME:-$HOME/.local/share}/nsbox/images
fi
[ -x "$store/busybox/rootfs/bin/busybox" ] || rootfs/busybox.sh "$store/busybox/rootfs"
./src/cli/nsbox run --image busybox -- sh -c 'echo "hello from $(hostname): uid=$(id -u) pid=$$"'
