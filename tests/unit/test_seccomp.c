/* Seccomp profiles as tables: {syscall, args, expected}, each row checked in
 * a forked child with the compiled filter loaded (libseccomp's own tests are
 * the model). To tell the filter's answer from the kernel's, the test shifts
 * every errno of the profile by 4000 before compiling: the kernel never
 * returns such values, so -4001 can only be the filter's EPERM and -4038
 * its ENOSYS. The structure of the filter is the shipped one. */
#include <check.h>
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp/seccomp.h"
#include "unit.h"

#define SHIFT 4000
enum expect { ALLOWED, DENIED_EPERM, DENIED_ENOSYS, KILLED };

typedef struct row {
	const char *what;
	long nr;
	unsigned long a[6];
	enum expect def, strict, docker;
} row;

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static const row rows[] = {
	{ "read", SYS_read, { (unsigned long) -1 }, ALLOWED, ALLOWED, ALLOWED },
	{ "getpid", SYS_getpid, { 0 }, ALLOWED, ALLOWED, ALLOWED },
	{ "mount", SYS_mount, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "umount2", SYS_umount2, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "pivot_root", SYS_pivot_root, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "open_tree", SYS_open_tree, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "move_mount", SYS_move_mount, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "fsopen", SYS_fsopen, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "chroot", SYS_chroot, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "unshare(CLONE_NEWUSER)", SYS_unshare, { CLONE_NEWUSER }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "setns", SYS_setns, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	/* CLONE_THREAD without CLONE_SIGHAND: EINVAL from the kernel if allowed */
	{ "clone(CLONE_THREAD)", SYS_clone, { CLONE_THREAD }, ALLOWED, ALLOWED, ALLOWED },
	{ "clone(CLONE_NEWUSER|CLONE_THREAD)", SYS_clone, { CLONE_NEWUSER | CLONE_THREAD }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "clone(CLONE_NEWNET|CLONE_THREAD)", SYS_clone, { CLONE_NEWNET | CLONE_THREAD }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "clone(CLONE_NEWNS|CLONE_THREAD)", SYS_clone, { CLONE_NEWNS | CLONE_THREAD }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "clone3", SYS_clone3, { 0 }, DENIED_ENOSYS, DENIED_ENOSYS, DENIED_ENOSYS },
	{ "keyctl", SYS_keyctl, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "add_key", SYS_add_key, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "request_key", SYS_request_key, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "bpf", SYS_bpf, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "perf_event_open", SYS_perf_event_open, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "userfaultfd", SYS_userfaultfd, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "io_uring_setup", SYS_io_uring_setup, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "io_uring_enter", SYS_io_uring_enter, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "kexec_load", SYS_kexec_load, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "init_module", SYS_init_module, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "finit_module", SYS_finit_module, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "delete_module", SYS_delete_module, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "reboot", SYS_reboot, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "swapon", SYS_swapon, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "acct", SYS_acct, { 1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "quotactl", SYS_quotactl, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "open_by_handle_at", SYS_open_by_handle_at, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "name_to_handle_at", SYS_name_to_handle_at, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "iopl(5)", SYS_iopl, { 5 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "ioperm", SYS_ioperm, { 0, 0, 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "clock_settime", SYS_clock_settime, { 0, 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "settimeofday", SYS_settimeofday, { 1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "clock_adjtime", SYS_clock_adjtime, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "personality(query)", SYS_personality, { 0xffffffff }, ALLOWED, ALLOWED, ALLOWED },
	{ "personality(READ_IMPLIES_EXEC)", SYS_personality, { 0x0400000 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "socket(AF_INET, SOCK_STREAM)", SYS_socket, { AF_INET, SOCK_STREAM | SOCK_CLOEXEC }, ALLOWED, ALLOWED, ALLOWED },
	{ "socket(AF_UNIX, SOCK_DGRAM)", SYS_socket, { AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC }, ALLOWED, ALLOWED, ALLOWED },
	{ "socket(AF_NETLINK, NETLINK_ROUTE)", SYS_socket, { AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 }, ALLOWED, ALLOWED, ALLOWED },
	{ "socket(AF_NETLINK, NETLINK_AUDIT)", SYS_socket, { AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 9 }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "socket(AF_PACKET)", SYS_socket, { AF_PACKET, SOCK_RAW, 0 }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "socket(AF_VSOCK)", SYS_socket, { AF_VSOCK, SOCK_STREAM, 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "socket(AF_INET, SOCK_RAW)", SYS_socket, { AF_INET, SOCK_RAW | SOCK_CLOEXEC, 1 }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "socket(AF_INET6, SOCK_RAW)", SYS_socket, { AF_INET6, SOCK_RAW, 58 }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "ioctl(TIOCSTI)", SYS_ioctl, { (unsigned long) -1, TIOCSTI }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "ioctl(TIOCSTI with high bits)", SYS_ioctl, { (unsigned long) -1, 0xffffffff00000000ul | TIOCSTI }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "ioctl(TIOCLINUX)", SYS_ioctl, { (unsigned long) -1, TIOCLINUX }, DENIED_EPERM, DENIED_EPERM, ALLOWED },
	{ "ioctl(TCGETS)", SYS_ioctl, { (unsigned long) -1, TCGETS }, ALLOWED, ALLOWED, ALLOWED },
	{ "ptrace", SYS_ptrace, { (unsigned long) -1 }, ALLOWED, DENIED_EPERM, ALLOWED },
	{ "process_vm_readv", SYS_process_vm_readv, { 0 }, ALLOWED, DENIED_EPERM, ALLOWED },
	{ "kcmp", SYS_kcmp, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	/* What no rule names: EPERM, as the kernel and Docker answer (clone3's
	 * ENOSYS above is the one a fallback needs) */
	{ "a syscall number nothing knows", 1000, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "sethostname (not allowed; CPython's test_socket skips on EPERM)", SYS_sethostname, { 0 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	{ "process_madvise (not in the allowlist)", SYS_process_madvise, { (unsigned long) -1 }, DENIED_EPERM, DENIED_EPERM, DENIED_EPERM },
	/* Docker's archMap adds x32 (and i386) to amd64; ours kill them */
	{ "an x32 system call", 0x40000000 | SYS_getpid, { 0 }, KILLED, KILLED, ALLOWED },
};

static void shift_errnos(sc_profile *p)
{
	p->default_errno += SHIFT;
	for (size_t i = 0; i < p->n_allow; i++)
		p->allow[i].errnum += SHIFT;
	for (size_t i = 0; i < p->n_deny; i++)
		p->deny[i].errnum += SHIFT;
}

static sc_bpf compile_text(const char *text, size_t len, const char *origin)
{
	sc_profile *p = NULL;
	nsbox_error *e = NULL;
	ck_assert_msg(sc_profile_parse(text, len, origin, &p, &e) == 0, "%s", e ? nsbox_error_message(e) : "");
	shift_errnos(p);
	sc_bpf b;
	ck_assert_msg(sc_compile(p, false, &b, &e) == 0, "%s", e ? nsbox_error_message(e) : "");
	sc_profile_free(p);
	return b;
}

/* Run one row under the filter in a child; what did the filter do? */
static const char *outcome(const sc_bpf *b, const row *r, enum expect *got)
{
	static char detail[64];
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sc_install(b, &(int){ -1 }) < 0)
			_exit(99);
		long ret = syscall(r->nr, r->a[0], r->a[1], r->a[2], r->a[3], r->a[4], r->a[5]);
		int e = ret < 0 ? errno : 0;
		_exit(e == SHIFT + EPERM ? 1 : e == SHIFT + ENOSYS ? 2 : e > SHIFT ? 3 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
		*got = KILLED;
	else if (WIFEXITED(st) && WEXITSTATUS(st) <= 2)
		*got = (enum expect[]){ ALLOWED, DENIED_EPERM, DENIED_ENOSYS }[WEXITSTATUS(st)];
	else
		*got = (enum expect) - 1;
	snprintf(detail, sizeof(detail), "status %#x", st);
	return detail;
}

static const char *const names[] = { "allowed", "EPERM", "ENOSYS", "killed" };

static void check_table(const sc_bpf *b, int which)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		enum expect want = which == 0 ? rows[i].def : which == 1 ? rows[i].strict : rows[i].docker;
		enum expect got;
		const char *d = outcome(b, &rows[i], &got);
		ck_assert_msg(got == want, "%s: expected %s, got %s (%s)", rows[i].what, names[want],
		              (unsigned) got < 4 ? names[got] : "?", d);
	}
}

START_TEST(test_default_profile)
{
	const char *t = sc_builtin("default");
	sc_bpf b = compile_text(t, strlen(t), "default");
	ck_assert_int_eq(b.n, 2);
	check_table(&b, 0);
	sc_bpf_free(&b);
}
END_TEST

START_TEST(test_strict_profile)
{
	const char *t = sc_builtin("strict");
	sc_bpf b = compile_text(t, strlen(t), "strict");
	check_table(&b, 1);
	sc_bpf_free(&b);
}
END_TEST

START_TEST(test_docker_profile)
{
	const char *path = getenv("NSBOX_DOCKER_PROFILE");
	char buf[4096];
	if (!path) {
		snprintf(buf, sizeof(buf), "%s/tests/data/docker-default-seccomp.json", TOP_SRCDIR);
		path = buf;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("SKIP docker profile: '%s' not found (set NSBOX_DOCKER_PROFILE)\n", path);
		return;
	}
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	sc_bpf b = compile_text(text, n, path);
	ck_assert_int_eq(b.n, 1);
	check_table(&b, 2);
	sc_bpf_free(&b);
}
END_TEST

/* A foreign ABI: i386 getpid through int 0x80 is killed. */
START_TEST(test_i386_is_killed)
{
	const char *t = sc_builtin("default");
	sc_bpf b = compile_text(t, strlen(t), "default");
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sc_install(&b, &(int){ -1 }) < 0)
			_exit(99);
		long ret = 20;   /* __NR_getpid on i386 */
		__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status %#x", st);
	sc_bpf_free(&b);
}
END_TEST

static const struct { const char *text, *error; } bad[] = {
	{ "allow:\n  - { syscalls: [read], action: errno }\n", "unknown key 'action' in an allow rule" },
	{ "deny:\n  - { syscalls: [mount] }\n", "a deny rule needs an 'action'" },
	{ "deny:\n  - { syscalls: [mount], action: trace }\n", "a deny rule's action is errno, kill or log" },
	{ "deny:\n  - { syscalls: [mount], action: errno, errno: EWHAT }\n", "unknown errno 'EWHAT'" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 7, op: eq, value: 1 } ] }\n", "index must be 0 to 5" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: like, value: 1 } ] }\n", "unknown op 'like'" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: masked_eq, value: 1 } ] }\n", "mask goes with op masked_eq" },
	{ "architectures: [vax]\n", "unknown architecture 'vax'" },
	{ "frobnicate: 1\n", "unknown key 'frobnicate'" },
	{ "{\"defaultAction\": \"SCMP_ACT_TRACE\"}", "unsupported defaultAction 'SCMP_ACT_TRACE'" },
	{ "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [ {\"names\": [\"read\"], \"action\": \"SCMP_ACT_NOTIFY\"} ]}",
	  "syscalls[0] ('read'...): unsupported action 'SCMP_ACT_NOTIFY'" },
	{ "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [ {\"names\": [\"socket\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [ {\"index\": 0, \"value\": 1, \"op\": \"SCMP_CMP_WEIRD\"} ]} ]}",
	  "syscalls[0] ('socket'...): unsupported op 'SCMP_CMP_WEIRD'" },
	{ "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"listenerPath\": \"/x\"}", "unsupported key 'listenerPath'" },
	/* Docker's format, every construct it cannot honour: an error naming
	 * the entry, never a rule silently dropped or widened. */
#define DOCKER(entries) "{defaultAction: SCMP_ACT_ERRNO, syscalls: [" entries "]}"
	{ "{defaultAction: [SCMP_ACT_ALLOW]}", "unsupported defaultAction '?'" },
	{ "{defaultAction: SCMP_ACT_ERRNO, defaultErrnoRet: 0}", "1:50: defaultErrnoRet must be 1 to 4095" },
	{ "{defaultAction: SCMP_ACT_ERRNO, defaultErrnoRet: -1}", "defaultErrnoRet must be 1 to 4095" },
	{ "{defaultAction: SCMP_ACT_ERRNO, defaultErrnoRet: 4096}", "defaultErrnoRet must be 1 to 4095" },
	{ "{defaultAction: SCMP_ACT_ERRNO, archMap: x86}", "archMap must be a list" },
	{ "{defaultAction: SCMP_ACT_ERRNO, archMap: [ {architecture: SCMP_ARCH_X86_64, flavour: x} ]}",
	  "unsupported key 'flavour' in archMap" },
	{ "{defaultAction: SCMP_ACT_ERRNO, archMap: [ {architecture: SCMP_ARCH_X86_64, subArchitectures: [SCMP_ARCH_VAX]} ]}",
	  "unknown architecture 'SCMP_ARCH_VAX'" },
	{ "{defaultAction: SCMP_ACT_ERRNO, archMap: [ {architecture: SCMP_ARCH_X86_64, subArchitectures: [SCMP_ARCH_]} ]}",
	  "unknown architecture 'SCMP_ARCH_'" },
	{ "{defaultAction: SCMP_ACT_ERRNO, architectures: SCMP_ARCH_X86_64}", "architectures must be a list" },
	{ "{syscalls: []}", "1:1: a Docker profile needs 'defaultAction'" },
	{ "{defaultAction: SCMP_ACT_ERRNO, syscalls: {names: [read]}}", "'syscalls' must be a list" },
	{ "{defaultAction: SCMP_ACT_ERRNO, ? [a] : b}", "keys must be scalars" },
	{ DOCKER("read"), "1:44: a syscalls entry must be a mapping" },
	{ DOCKER("{action: SCMP_ACT_ALLOW}"), "an entry needs 'names'" },
	{ DOCKER("{names: [read]}"), "syscalls[0] ('read'...): an entry needs an 'action'" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW}, {names: [write], action: SCMP_ACT_TRACE}"),
	  "syscalls[1] ('write'...): unsupported action 'SCMP_ACT_TRACE'" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, ? [x] : y}"), "('read'...): keys must be scalars" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ERRNO, errnoRet: 0}"), "errnoRet must be 1 to 4095" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ERRNO, errnoRet: -1}"), "errnoRet must be 1 to 4095" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ERRNO, errnoRet: 4096}"), "errnoRet must be 1 to 4095" },
	/* the first error is the one said, the rest of the entry unread */
	{ DOCKER("{names: [read], action: SCMP_ACT_BOGUS, errnoRet: 0, flavour: x}"), "unsupported action 'SCMP_ACT_BOGUS'" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, flavour: x}"), "('read'...): unsupported key 'flavour'" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: [caps]}"), "'includes' must be a mapping" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, excludes: x}"), "'excludes' must be a mapping" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {minKernel: '4.8', bits: 64}}"),
	  "unsupported key 'bits' in includes" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, excludes: {bits: 64}}"), "unsupported key 'bits' in excludes" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: {index: 0}}"), "('socket'...): args must be a list" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [0]}"), "an argument condition must be a mapping" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [ {index: 6, value: 1, op: SCMP_CMP_EQ} ]}"),
	  "unsupported argument condition 'index: 6'" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [ {index: 0, value: -1, op: SCMP_CMP_EQ} ]}"),
	  "unsupported argument condition 'value: -1'" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [ {index: 0, value: 1x, op: SCMP_CMP_EQ} ]}"),
	  "unsupported argument condition 'value: 1x'" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [ {index: 0, op: [SCMP_CMP_EQ]} ]}"),
	  "unsupported argument condition 'op: ?'" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [ {index: 0, value: 1} ]}"), "unsupported op '(none)'" },
	{ DOCKER("{names: [socket], action: SCMP_ACT_ALLOW, args: [ {index: 0, value: 1, op: SCMP_CMP_EQ},"
	         "{index: 1, value: 1, op: SCMP_CMP_EQ}, {index: 2, value: 1, op: SCMP_CMP_EQ},"
	         "{index: 3, value: 1, op: SCMP_CMP_EQ}, {index: 4, value: 1, op: SCMP_CMP_EQ},"
	         "{index: 5, value: 1, op: SCMP_CMP_EQ}, {index: 0, value: 2, op: SCMP_CMP_EQ} ]}"),
	  "more than 6 argument conditions" },
};

START_TEST(test_bad_profiles)
{
	sc_profile *p = NULL;
	nsbox_error *e = NULL;
	ck_assert_int_lt(sc_profile_parse(bad[_i].text, strlen(bad[_i].text), "bad.yaml", &p, &e), 0);
	ck_assert_msg(strstr(nsbox_error_message(e), bad[_i].error) != NULL, "'%s' lacks '%s'",
	              nsbox_error_message(e), bad[_i].error);
	ck_assert_msg(!strncmp(nsbox_error_message(e), "bad.yaml:", 9), "no position: %s", nsbox_error_message(e));
	nsbox_error_free(e);
}
END_TEST

/* Docker profiles that parse: what each entry becomes, or that it is left
 * out because it is not for an unprivileged x86_64 sandbox on this kernel. */
static const struct {
	const char *text;
	size_t n_allow, n_arches;
	enum sc_action action;   /* of the first rule */
	int errnum;
	const char *first;       /* its first syscall */
} docker_good[] = {
	{ "{defaultAction: SCMP_ACT_ERRNO}", 0, 0, 0, 0, NULL },
	{ DOCKER("{name: getpid, action: SCMP_ACT_KILL_THREAD}"), 1, 0, SC_KILL, EPERM, "getpid" },
	{ DOCKER("{names: [getpid, getppid], action: SCMP_ACT_LOG, comment: x}"), 1, 0, SC_LOG, EPERM, "getpid" },
	{ "{defaultAction: SCMP_ACT_ALLOW, defaultErrnoRet: 38, syscalls: [ {names: [mount], action: SCMP_ACT_ERRNO} ]}",
	  1, 0, SC_ERRNO, 38, "mount" },
	{ DOCKER("{names: [mount], action: SCMP_ACT_ERRNO, errnoRet: 13}"), 1, 0, SC_ERRNO, 13, "mount" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, args: null}"), 1, 0, SC_ALLOW, EPERM, "read" },
	/* an arches list given as a scalar matches nothing: left out */
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {arches: amd64}}"), 0, 0, 0, 0, NULL },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {arches: [s390x]}}"), 0, 0, 0, 0, NULL },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {arches: [amd64], caps: []}}"), 1, 0, SC_ALLOW, EPERM, "read" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {caps: [CAP_SYS_ADMIN]}}"), 0, 0, 0, 0, NULL },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, excludes: {caps: [CAP_SYS_ADMIN]}}"), 1, 0, SC_ALLOW, EPERM, "read" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, excludes: {arches: [x86_64]}}"), 0, 0, 0, 0, NULL },
	/* minKernel: this kernel is newer than 1.0 and older than 999.0; a
	 * version that is not one is taken as met */
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {minKernel: '999.0'}}"), 0, 0, 0, 0, NULL },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {minKernel: '1.0'}}"), 1, 0, SC_ALLOW, EPERM, "read" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, includes: {minKernel: new}}"), 1, 0, SC_ALLOW, EPERM, "read" },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, excludes: {minKernel: '1.0'}}"), 0, 0, 0, 0, NULL },
	{ DOCKER("{names: [read], action: SCMP_ACT_ALLOW, excludes: {minKernel: '999.0'}}"), 1, 0, SC_ALLOW, EPERM, "read" },
	/* archMap: only x86_64's entry counts; sub-architectures in either case */
	{ "{defaultAction: SCMP_ACT_ERRNO, architectures: [SCMP_ARCH_X86_64], archMap: ["
	  "{architecture: SCMP_ARCH_AARCH64, subArchitectures: [SCMP_ARCH_VAX]},"
	  "{architecture: SCMP_ARCH_X86_64, subArchitectures: [SCMP_ARCH_X86, SCMP_ARCH_X32]}]}", 0, 2, 0, 0, NULL },
};

START_TEST(test_docker_good)
{
	sc_profile *p = NULL;
	nsbox_error *e = NULL;
	int r = sc_profile_parse(docker_good[_i].text, strlen(docker_good[_i].text), "good.json", &p, &e);
	ck_assert_msg(r == 0, "%s: %s", docker_good[_i].text, e ? nsbox_error_message(e) : "");
	ck_assert_uint_eq(p->n_allow, docker_good[_i].n_allow);
	ck_assert_uint_eq(p->n_arches, docker_good[_i].n_arches);
	ck_assert_uint_eq(p->n_deny, 0);
	if (docker_good[_i].first) {
		ck_assert_int_eq(p->allow[0].action, docker_good[_i].action);
		ck_assert_str_eq(p->allow[0].syscalls[0], docker_good[_i].first);
		if (p->allow[0].action == SC_ERRNO)
			ck_assert_int_eq(p->allow[0].errnum, docker_good[_i].errnum);
	}
	sc_profile_free(p);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("seccomp");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_default_profile);
	tcase_add_test(tc, test_strict_profile);
	tcase_add_test(tc, test_docker_profile);
	tcase_add_test(tc, test_i386_is_killed);
	tcase_add_loop_test(tc, test_bad_profiles, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_loop_test(tc, test_docker_good, 0, sizeof(docker_good) / sizeof(docker_good[0]));
	return unit_run("seccomp", tc);
}
