#!/bin/sh
# Set up nsbox on a fresh Debian/Ubuntu machine and run the main job: install
# the build and test dependencies, build nsbox, install it (`make install`
# into /usr/local: the nsbox command, libnsbox, and the Python package for the
# system's python3; it runs ldconfig), build the default image (Python 3 with
# numpy, pandas, requests, httpx and matplotlib, Node.js, npm, git; as root,
# with debootstrap; kept if it exists and was built from the current recipe,
# built again if an older nsbox built it), and run a Python snippet that imports
# that stack in the default sandbox with the installed nsbox. Run it from the source tree;
# it uses sudo for the steps that need root when you are not root.
set -eu
cd "$(dirname "$0")"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if command -v apt-get >/dev/null; then
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
		build-essential autoconf automake libtool pkg-config file \
		libseccomp-dev libcap-dev libmnl-dev libyaml-dev libarchive-dev libjansson-dev check \
		busybox-static uidmap python3 util-linux debootstrap iproute2 \
		python3-dev python3-setuptools python3-wheel python3-pytest python3-venv \
		hyperfine bubblewrap redis-server python3-celery python3-redis python3-yaml python3-seccomp \
		skopeo docker-registry openssl bsdutils >/dev/null
	# The --network user helpers: not every release has passt (Ubuntu 22.04
	# has only slirp4netns), and nothing else needs them.
	for helpers in "passt slirp4netns" slirp4netns passt; do
		# shellcheck disable=SC2086 # $helpers is a list of package names
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $helpers >/dev/null 2>&1 && break
	done || echo "quickstart: neither passt nor slirp4netns could be installed: --network user is unavailable" >&2
fi
[ -x configure ] || ./autogen.sh >/dev/null
[ -f Makefile ] || ./configure --enable-werror >/dev/null
make -j"$(nproc)" >/dev/null
$SUDO make install >/dev/null
hash -r
$SUDO nsbox image build
nsbox run-code --lang python -c 'import pandas, numpy, requests, httpx, matplotlib' || {
	echo "quickstart: the default image lacks the data stack; rebuild it with" \
		"'sudo nsbox image build --rebuild' (its build log is named above)" >&2
	exit 1
}
nsbox run-code --lang python -c 'print(42)'
