#!/bin/bash
# make check-cgroup2: boot a Debian kernel under qemu (software emulation)
# with an initramfs holding busybox, nsbox and its libraries, and run the
# cgroup v2 limit tests there as root and as a delegated non-root user
# (with CGROUP2_BENCH=1, the launch bench instead: bench/cgroup2-guest.sh).
# Skips (exit 77) with the reason only when qemu or the kernel cannot be had.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
skip() { echo "SKIP: $*"; exit 77; }

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
command -v cpio >/dev/null || skip "cpio is not installed (apt-get install cpio)"
BUSYBOX=${BUSYBOX:-$(command -v busybox)}
[ -n "$BUSYBOX" ] || skip "busybox is not installed (apt-get install busybox-static)"

W=$(mktemp -d /tmp/nsbox-cgroup2.XXXXXX)
trap 'rm -rf "$W"' EXIT

# The kernel: Debian's cloud flavour has the virtio and serial drivers built
# in, so it boots from an initramfs alone. Cached between runs.
cache=${NSBOX_KERNEL_CACHE:-$top_builddir/.kernel-cache}
mkdir -p "$cache"
pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | sed -n 's/.*Depends: \(linux-image-[0-9].*\)/\1/p' | head -n 1)
[ -n "$pkg" ] || skip "apt cannot resolve linux-image-cloud-amd64 (run apt-get update)"
# first GLOB...: the first path a glob matched, or nothing
first() { if [ -e "$1" ]; then echo "$1"; fi; }
deb=$(first "$cache/${pkg}"_*.deb)
if [ -z "$deb" ]; then
	(cd "$cache" && apt-get download "$pkg" >/dev/null 2>&1) || skip "cannot download $pkg"
	deb=$(first "$cache/${pkg}"_*.deb)
fi
mkdir -p "$W/kernel"
dpkg-deb -x "$deb" "$W/kernel"
vmlinuz=$(first "$W"/kernel/boot/vmlinuz-*)

# The initramfs: busybox, nsbox with the libraries it links, the probe, and
# a busybox root filesystem for the sandboxes.
R=$W/initramfs
mkdir -p "$R"/bin "$R"/lib "$R"/lib64 "$R"/proc "$R"/sys "$R"/dev "$R"/tmp "$R"/etc
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"; done
real=$top_builddir/src/cli/.libs/nsbox
[ -x "$real" ] || real=$top_builddir/src/cli/nsbox
cp "$real" "$R/bin/nsbox"
cp -L "$top_builddir"/src/lib/.libs/libnsbox.so.0 "$R/lib/"
# with_libs PROGRAM: the shared libraries PROGRAM links, into the guest's /lib.
with_libs() {
	ldd "$1" | awk '/=> \//{print $3} /^\s*\/lib64/{print $1}' | while read -r lib; do cp -L "$lib" "$R/lib/"; done
}
LD_LIBRARY_PATH=$top_builddir/src/lib/.libs with_libs "$real"
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
cp "$top_builddir/tests/helpers/probe" "$R/bin/probe"
printf 'root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/tmp:/bin/sh\n' >"$R/etc/passwd"
BUSYBOX=$BUSYBOX "$top_srcdir/rootfs/busybox.sh" "$R/rootfs" >/dev/null
cp "$top_builddir/tests/helpers/probe" "$R/rootfs/bin/probe"
cp "$top_srcdir/tests/cgroup2/guest-init.sh" "$R/init"
# CGROUP2_BENCH=1 (make bench): the guest runs bench/cgroup2-guest.sh instead
# of the tests, with bwrap and hyperfine beside nsbox.
if [ -n "${CGROUP2_BENCH:-}" ]; then
	for tool in bwrap hyperfine; do
		path=$(command -v "$tool") || skip "$tool is not installed (apt-get install $([ "$tool" = bwrap ] && echo bubblewrap || echo hyperfine))"
		cp "$path" "$R/bin/"
		with_libs "$path"
	done
	cp "$top_srcdir/bench/cgroup2-guest.sh" "$R/bin/nsbox-bench.sh"
fi
chmod 755 "$R/init"
(cd "$R" && find . | cpio -o -H newc 2>/dev/null) | gzip -1 >"$W/initrd.gz"

echo "booting $(basename "$vmlinuz") under qemu (software emulation)..."
start=$(date +%s)
timeout 600 qemu-system-x86_64 -m 1024 -smp 2 -nographic -no-reboot -nodefaults -serial stdio \
	-kernel "$vmlinuz" -initrd "$W/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet rdinit=/init" >"$W/console.log" 2>&1
echo "guest ran for $(($(date +%s) - start))s"
grep -E '^(guest:|ok -|not ok -|cgroup2:|# |bench\| )' "$W/console.log" | tr -d '\r' | sed 's/^bench| //'
if [ -n "${CGROUP2_BENCH:-}" ]; then
	# The bench asserts nothing: it ran to its end, and every row was measured.
	grep -aq '^bench| done' "$W/console.log" || { echo "the guest's bench did not finish; its console:"; tail -n 40 "$W/console.log"; exit 1; }
	! grep -aq '^bench| .*failed' "$W/console.log"
	exit
fi
summary=$(grep -a '^cgroup2: ' "$W/console.log" | tr -d '\r')
if [ -z "$summary" ]; then
	echo "the guest did not finish; its console:"
	tail -n 40 "$W/console.log"
	exit 1
fi
passed=${summary#cgroup2: } passed=${passed%% *}
failed=${summary% failed} failed=${failed##* }
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
