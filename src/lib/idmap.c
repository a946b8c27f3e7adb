#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "error.h"
#include "idmap.h"
#include "syscalls.h"

int subid_lookup(const char *file, const char *name, unsigned long id, subid_range *out)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	char line[512], idstr[32];
	snprintf(idstr, sizeof(idstr), "%lu", id);
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *save = NULL;
		char *who = strtok_r(line, ":\n", &save);
		char *start = strtok_r(NULL, ":\n", &save);
		char *count = strtok_r(NULL, ":\n", &save);
		if (!who || !start || !count)
			continue;
		if ((name && !strcmp(who, name)) || !strcmp(who, idstr)) {
			char *e1, *e2;
			out->start = strtoull(start, &e1, 10);
			out->count = strtoull(count, &e2, 10);
			found = (!*e1 && !*e2 && out->count > 0) ? 1 : 0;
		}
	}
	fclose(f);
	return found;
}

int idmap_keep_id(unsigned inside, unsigned outside, const subid_range *sub, char **out)
{
	if (sub->count < NSBOX_RANGE_COUNT - 1 || inside >= NSBOX_RANGE_COUNT)
		return -ERANGE;
	buf b = { 0 };
	if (inside > 0)
		buf_printf(&b, "0 %llu %u\n", (unsigned long long) sub->start, inside);
	buf_printf(&b, "%u %u 1\n", inside, outside);
	unsigned rest = NSBOX_RANGE_COUNT - inside - 1;
	if (rest > 0)
		buf_printf(&b, "%u %llu %u\n", inside + 1,
		           (unsigned long long) (sub->start + inside), rest);
	*out = buf_steal(&b);
	return *out ? 0 : -ENOMEM;
}

static char **map_argv(const char *prog, const char *map)
{
	/* "prog PID a b c a b c ..." with a placeholder for the pid at [1]. */
	size_t n = 2;
	for (const char *p = map; *p; p++)
		n += (*p == ' ' || *p == '\n');
	char **v = calloc(n + 2, sizeof(*v));
	if (!v)
		return NULL;
	size_t i = 0;
	v[i++] = strdup(prog);
	v[i++] = calloc(1, 24);
	char *copy = strdup(map), *save = NULL;
	for (char *t = copy ? strtok_r(copy, " \n", &save) : NULL; t; t = strtok_r(NULL, " \n", &save))
		v[i++] = strdup(t);
	free(copy);
	return v;
}

static bool executable(const char *path) { return access(path, X_OK) == 0; }

int idmap_plan(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err)
{
	uid_t euid = geteuid();
	gid_t egid = getegid();
	p->uid = cfg->uid;
	p->gid = cfg->gid;
	if (euid == 0) {
		/* Host root: the sandbox gets an unprivileged host range and never
		 * host uid 0. The setup runs as uid 0 of the new namespace. */
		subid_range r = { NSBOX_ROOT_RANGE_BASE, NSBOX_RANGE_COUNT };
		subid_range g = r;
		int fu = subid_lookup("/etc/subuid", "nsbox", (unsigned long) -1, &r);
		int fg = subid_lookup("/etc/subgid", "nsbox", (unsigned long) -1, &g);
		if (fu < 0 || fg < 0)
			return nsbox_err(err, -(fu < 0 ? fu : fg), "idmap", "read '/etc/subuid' or '/etc/subgid'");
		if (r.count < NSBOX_RANGE_COUNT || g.count < NSBOX_RANGE_COUNT)
			return nsbox_err(err, ERANGE, "idmap",
			                 "use the 'nsbox' entry of /etc/subuid or /etc/subgid: it has fewer than %u ids",
			                 NSBOX_RANGE_COUNT);
		p->root_range = true;
		p->may_setgroups = true;
		p->setup_uid = 0;
		p->setup_gid = 0;
		p->host_setup_uid = (uid_t) r.start;
		p->host_setup_gid = (gid_t) g.start;
		if (asprintf(&p->uid_map, "0 %llu %u\n", (unsigned long long) r.start, NSBOX_RANGE_COUNT) < 0 ||
		    asprintf(&p->gid_map, "0 %llu %u\n", (unsigned long long) g.start, NSBOX_RANGE_COUNT) < 0)
			return nsbox_err(err, ENOMEM, "idmap", "plan id maps");
		return 0;
	}

	p->rootless = true;
	p->setup_uid = cfg->uid;
	p->setup_gid = cfg->gid;
	p->host_setup_uid = euid;
	p->host_setup_gid = egid;
	struct passwd *pw = getpwuid(euid);
	subid_range su, sg;
	int fu = subid_lookup("/etc/subuid", pw ? pw->pw_name : NULL, euid, &su);
	int fg = subid_lookup("/etc/subgid", pw ? pw->pw_name : NULL, euid, &sg);
	if (fu == 1 && fg == 1 && su.count >= NSBOX_RANGE_COUNT - 1 && sg.count >= NSBOX_RANGE_COUNT - 1 &&
	    executable("/usr/bin/newuidmap") && executable("/usr/bin/newgidmap") &&
	    !getenv("NSBOX_SINGLE_IDMAP")) {
		_cleanup_free_ char *um = NULL, *gm = NULL;
		if (idmap_keep_id(cfg->uid, euid, &su, &um) < 0 || idmap_keep_id(cfg->gid, egid, &sg, &gm) < 0)
			return nsbox_err(err, ENOMEM, "idmap", "plan id maps");
		p->newuidmap_argv = map_argv("/usr/bin/newuidmap", um);
		p->newgidmap_argv = map_argv("/usr/bin/newgidmap", gm);
		if (!p->newuidmap_argv || !p->newgidmap_argv)
			return nsbox_err(err, ENOMEM, "idmap", "plan id maps");
		p->use_newidmap = true;
		p->may_setgroups = true;
		p->uid_map = TAKE_PTR(um);
		p->gid_map = TAKE_PTR(gm);
		return 0;
	}
	/* Without subordinate ids only our own id can be mapped, and the kernel
	 * requires setgroups to be denied before an unprivileged gid_map write. */
	if (asprintf(&p->uid_map, "%u %u 1\n", (unsigned) cfg->uid, (unsigned) euid) < 0 ||
	    asprintf(&p->gid_map, "%u %u 1\n", (unsigned) cfg->gid, (unsigned) egid) < 0)
		return nsbox_err(err, ENOMEM, "idmap", "plan id maps");
	return 0;
}

static int write_file(pid_t pid, const char *name, const char *data, nsbox_error **err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return nsbox_err(err, errno, "idmap", "open '%s'", path);
	size_t len = strlen(data);
	if (write(fd, data, len) != (ssize_t) len)
		return nsbox_err_hint(err, errno, "idmap",
		                      errno == EPERM ? "the host range may be in use by a parent namespace, or the caller lacks CAP_SETUID/CAP_SETGID in it" : NULL,
		                      "write '%s' with '%.*s'", path, (int) strcspn(data, "\n"), data);
	return 0;
}

/* Run newuidmap/newgidmap and wait for it. An embedding program may ignore
 * or handle SIGCHLD; so we clone a child with no exit signal (it cannot be
 * reaped behind our back, and nobody hears of it) and wait on its pidfd. An
 * exec would reset its exit signal to SIGCHLD, so that child does not exec:
 * it runs the helper as its own child and exits with its status. */
static int run_helper(char **argv, pid_t pid, nsbox_error **err)
{
	snprintf(argv[1], 24, "%d", (int) pid);
	int pidfd = -1;
	struct clone_args ca = { .flags = CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd };
	pid_t h = (pid_t) sys_clone3(&ca);
	if (h < 0)
		return nsbox_err(err, errno, "idmap", "start '%s'", argv[0]);
	if (h == 0) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		(void) sigaction(SIGCHLD, &dfl, NULL);
		struct clone_args fork_args = { .exit_signal = SIGCHLD };
		pid_t g = (pid_t) sys_clone3(&fork_args);
		if (g == 0) {
			int null = open("/dev/null", O_RDWR);
			if (null >= 0)
				(void) dup2(null, 1);
			execv(argv[0], argv);
			_exit(127);
		}
		int st = 0;
		while (g > 0 && waitpid(g, &st, 0) < 0 && errno == EINTR)
			;
		_exit(g > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : 127);
	}
	siginfo_t si = { 0 };
	int r;
	while ((r = waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | __WALL)) < 0 && errno == EINTR)
		;
	int e = errno;
	close(pidfd);
	if (r < 0)
		return nsbox_err(err, e, "idmap", "wait for '%s'", argv[0]);
	if (si.si_code != CLD_EXITED || si.si_status != 0)
		return nsbox_err_hint(err, EPERM, "idmap",
		                      "check /etc/subuid and /etc/subgid, or set NSBOX_SINGLE_IDMAP=1",
		                      "run '%s' for pid %d: it failed", argv[0], (int) pid);
	return 0;
}

int idmap_write(const nsbox_plan *p, pid_t pid, nsbox_error **err)
{
	int r;
	if (p->use_newidmap) {
		r = run_helper(p->newuidmap_argv, pid, err);
		return r < 0 ? r : run_helper(p->newgidmap_argv, pid, err);
	}
	if (p->rootless) {
		r = write_file(pid, "setgroups", "deny", err);
		if (r < 0)
			return r;
	}
	r = write_file(pid, "uid_map", p->uid_map, err);
	return r < 0 ? r : write_file(pid, "gid_map", p->gid_map, err);
}
