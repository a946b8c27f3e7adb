#!/bin/sh
# Build a minimal root filesystem from a static busybox: every applet, the
# mount points nsbox needs, and a non-root 'sandbox' user (uid 1000).
# Usage: rootfs/busybox.sh DEST
set -eu
dest=${1:?usage: rootfs/busybox.sh DEST}
bb=${BUSYBOX:-$(command -v busybox || true)}
if [ -z "$bb" ] || ! "$bb" --list >/dev/null 2>&1; then
	echo "busybox.sh: no busybox found (apt-get install busybox-static)" >&2
	exit 1
fi
if ! file -L "$bb" 2>/dev/null | grep -q 'statically linked'; then
	echo "busybox.sh: $bb is not statically linked (apt-get install busybox-static)" >&2
	exit 1
fi
mkdir -p "$dest"
cd "$dest"
mkdir -p bin etc proc dev tmp sys home/sandbox root workspace
cp "$bb" bin/busybox
for applet in $(bin/busybox --list); do
	[ "$applet" = busybox ] || ln -sf busybox "bin/$applet"
done
cat >etc/passwd <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >etc/group <<'GROUP'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GROUP
: >etc/resolv.conf   # for --network user to bind its resolver over
chmod 755 . bin etc home workspace
chmod 700 root
chmod 1777 tmp
