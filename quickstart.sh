#!/bin/sh
# Set up nsbox on a fresh Debian/Ubuntu machine and run the main job: install
# the build and test dependencies, build nsbox, build the default Python+Node
# image (as root, with debootstrap; kept if it exists), and run a Python
# snippet in the default sandbox. Run it from the source tree; it uses sudo
# for the steps that need root when you are not root.
set -eu
cd "$(dirname "$0")"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if command -v apt-get >/dev/null; then
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
		build-essential autoconf automake libtool pkg-config file \
		libseccomp-dev libcap-dev libmnl-dev libyaml-dev libarchive-dev check \
		busybox-static uidmap python3 util-linux debootstrap passt slirp4netns iproute2 >/dev/null
fi
[ -x configure ] || ./autogen.sh >/dev/null
[ -f Makefile ] || ./configure --enable-werror >/dev/null
make -j"$(nproc)" >/dev/null
$SUDO ./src/cli/nsbox image build
./src/cli/nsbox run-code --lang python -c 'print(42)'
