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

#include "base/coverage.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "plan/idmap.h"
#include "base/syscalls.h"

/* One "owner:start:count" line; false for anything else (comments, junk,
 * signs, overflow, an empty range). */
static bool parse_entry(char *line, subid_entry *e)
{
	char *save = NULL;
	char *who = strtok_r(line, ":\n", &save);
	char *start = strtok_r(NULL, ":\n", &save);
	char *count = strtok_r(NULL, ":\n", &save);
	if (!who || !start || !count || strtok_r(NULL, ":\n", &save) || strlen(who) >= sizeof(e->owner))
		return false;
	for (const char *d = start; *d; d++)
		if (*d < '0' || *d > '9')
			return false;
	for (const char *d = count; *d; d++)
		if (*d < '0' || *d > '9')
			return false;
	errno = 0;
	e->start = strtoull(start, NULL, 10);
	e->count = strtoull(count, NULL, 10);
	if (errno || e->count == 0 || e->start > UINT64_MAX - e->count)
		return false;
	memcpy(e->owner, who, strlen(who) + 1);
	return true;
}

/* Call fn on each entry of `file` until it returns non-zero; a missing file
 * has no entries (one that cannot be read is an error). Returns fn's value,
 * 0, or -errno. */
static int each_entry(const char *file, int (*fn)(const subid_entry *, void *), void *arg)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	char line[512];
	int r = 0;
	subid_entry e;
	errno = 0;
	while (r == 0 && fgets(line, sizeof(line), f))
		if (parse_entry(line, &e))
			r = fn(&e, arg);
	/* A read error is not the end of the file: the entries after it
	 * could be the overlap that must refuse the run. */
	if (r == 0 && ferror(f))
		r = errno ? -errno : -EIO;
	fclose(f);
	return r;
}

struct lookup {
	const char *name;
	char idstr[32];
	subid_range *out;
};

static int match_owner(const subid_entry *e, void *arg)
{
	struct lookup *l = arg;
	if ((l->name && !strcmp(e->owner, l->name)) || !strcmp(e->owner, l->idstr)) {
		l->out->start = e->start;
		l->out->count = e->count;
		return 1;
	}
	return 0;
}

int subid_lookup(const char *file, const char *name, unsigned long id, subid_range *out)
{
	struct lookup l = { .name = name, .out = out };
	snprintf(l.idstr, sizeof(l.idstr), "%lu", id);
	return each_entry(file, match_owner, &l);
}

struct overlap {
	const char *self;
	uint64_t start, count;
	subid_entry *out;
};

static int match_overlap(const subid_entry *e, void *arg)
{
	struct overlap *o = arg;
	if (!strcmp(e->owner, o->self) || e->start >= o->start + o->count || o->start >= e->start + e->count)
		return 0;
	*o->out = *e;
	return 1;
}

int subid_overlap(const char *file, const char *self, uint64_t start, uint64_t count, subid_entry *out)
{
	struct overlap o = { .self = self, .start = start, .count = count, .out = out };
	return each_entry(file, match_overlap, &o);
}

uint64_t subid_free_start(const char *subuid, const char *subgid, const char *self, uint64_t from,
                          uint64_t count)
{
	/* Each step jumps past the end of an entry that overlapped, so no entry
	 * is met twice. Ids stop below 2^32 - 1 (that one means "no id"). */
	uint64_t at = (from + count - 1) / count * count;
	subid_entry e = { 0 };   /* set when subid_overlap() returns 1 */
	while (at + count <= UINT32_MAX) {
		int r = subid_overlap(subuid, self, at, count, &e);
		if (r == 0)
			r = subid_overlap(subgid, self, at, count, &e);
		if (r < 0)
			return 0;
		if (r == 0)
			return at;
		at = (e.start + e.count + count - 1) / count * count;
	}
	return 0;
}

int idmap_root_ids(const char *subuid, const char *subgid, root_ids *ri, nsbox_error **err)
{
	*ri = (root_ids){ .uid = { NSBOX_ROOT_RANGE_BASE, NSBOX_RANGE_COUNT },
	                  .gid = { NSBOX_ROOT_RANGE_BASE, NSBOX_RANGE_COUNT } };
	int fu = subid_lookup(subuid, "nsbox", (unsigned long) -1, &ri->uid);
	int fg = subid_lookup(subgid, "nsbox", (unsigned long) -1, &ri->gid);
	if (fu < 0 || fg < 0)
		return nsbox_err(err, -(fu < 0 ? fu : fg), "idmap", "read '%s'", fu < 0 ? subuid : subgid);
	ri->own_uid = fu == 1;
	ri->own_gid = fg == 1;
	if (ri->uid.count < NSBOX_RANGE_COUNT || ri->gid.count < NSBOX_RANGE_COUNT)
		return nsbox_err(err, ERANGE, "idmap",
		                 "use the 'nsbox' entry of '%s': it has fewer than %u ids",
		                 ri->uid.count < NSBOX_RANGE_COUNT ? subuid : subgid, NSBOX_RANGE_COUNT);
	if (ri->uid.start + NSBOX_RANGE_COUNT > UINT32_MAX || ri->gid.start + NSBOX_RANGE_COUNT > UINT32_MAX)
		return nsbox_err(err, ERANGE, "idmap", "use the 'nsbox' entry of '%s': it goes past id %u",
		                 ri->uid.start + NSBOX_RANGE_COUNT > UINT32_MAX ? subuid : subgid, UINT32_MAX - 1);
	/* Only the first NSBOX_RANGE_COUNT ids are mapped; those must be ours
	 * alone, or another user's containers would own our sandboxes' files
	 * and processes (and the reverse). */
	const struct { const char *file; const subid_range *r; } side[] = {
		{ subuid, &ri->uid }, { subgid, &ri->gid },
	};
	for (size_t i = 0; i < ARRAY_SIZE(side); i++) {
		int r = subid_overlap(side[i].file, "nsbox", side[i].r->start, NSBOX_RANGE_COUNT, &ri->other);
		if (r < 0)
			return nsbox_err(err, -r, "idmap", "read '%s'", side[i].file);
		if (r == 1) {
			ri->conflict_file = side[i].file;
			ri->conflict_gid = i == 1;
			ri->free_start = subid_free_start(subuid, subgid, "nsbox", NSBOX_ROOT_RANGE_BASE, NSBOX_RANGE_COUNT);
			return 0;
		}
	}
	return 0;
}

int idmap_root_conflict(const root_ids *ri, const char *subuid, const char *subgid, char **detail,
                        char **hint)
{
	const subid_range *r = ri->conflict_gid ? &ri->gid : &ri->uid;
	bool own = ri->conflict_gid ? ri->own_gid : ri->own_uid;
	unsigned long long s = r->start, o = ri->other.start, f = ri->free_start;
	*detail = *hint = NULL;
	if (asprintf(detail, "use host %s %llu-%llu (%s) for root's sandboxes: '%s' (%llu-%llu) in %s overlaps them",
	             ri->conflict_gid ? "group ids" : "ids", s, s + NSBOX_RANGE_COUNT - 1,
	             own ? "the 'nsbox' entry" : "the built-in range", ri->other.owner, o,
	             o + ri->other.count - 1, ri->conflict_file) < 0)
		*detail = NULL;
	int n = f ? asprintf(hint, "reserve ids no one else uses for nsbox: %s the line 'nsbox:%llu:%u' %s %s and %s "
	                     "(for a user named nsbox: usermod --add-subuids %llu-%llu --add-subgids %llu-%llu nsbox)",
	                     own ? "make" : "add", f, NSBOX_RANGE_COUNT, own ? "the 'nsbox' entry of" : "to",
	                     subuid, subgid, f, f + NSBOX_RANGE_COUNT - 1, f, f + NSBOX_RANGE_COUNT - 1)
	          : asprintf(hint, "reserve %u ids no other entry of %s and %s uses with an 'nsbox' entry in both",
	                     NSBOX_RANGE_COUNT, subuid, subgid);
	if (n < 0)
		*hint = NULL;
	if (!*detail || !*hint) {
		free(*detail);
		free(*hint);
		*detail = *hint = NULL;
		return -ENOMEM;
	}
	return 0;
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
		root_ids ri;
		int e = idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, err);
		if (e < 0)
			return e;
		if (ri.conflict_file) {
			/* Fail closed: sharing ids with another user's containers
			 * is no isolation at all. */
			_cleanup_free_ char *detail = NULL, *hint = NULL;
			if (idmap_root_conflict(&ri, "/etc/subuid", "/etc/subgid", &detail, &hint) < 0)
				return nsbox_err(err, ENOMEM, "idmap", "plan id maps");
			return nsbox_err_hint(err, EBUSY, "idmap", hint, "%s", detail);
		}
		const subid_range r = ri.uid, g = ri.gid;
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
	    !getenv("NSBOX_SINGLE_IDMAP") && !cfg->build.single_idmap) {
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

/* Start newuidmap/newgidmap for `pid`; its pidfd, or -errno. An embedding
 * program may ignore or handle SIGCHLD; so we clone a child with no exit
 * signal (it cannot be reaped behind our back, and nobody hears of it) and
 * wait on its pidfd. An exec would reset its exit signal to SIGCHLD, so that
 * child does not exec: it runs the helper as its own child and exits with
 * its status. */
static int helper_start(char **argv, pid_t pid, nsbox_error **err)
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
	return pidfd;
}

/* Wait for a helper started by helper_start (closes its pidfd). */
static int helper_wait(int pidfd, char **argv, pid_t pid, nsbox_error **err)
{
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
		/* Both at once: each is a set-id program's exec, and the two
		 * maps are independent (the kernel orders nothing between them;
		 * the child waits for our go-ahead either way). */
		int u = helper_start(p->newuidmap_argv, pid, err);
		if (u < 0)
			return u;
		int g = helper_start(p->newgidmap_argv, pid, err);
		r = u;
		if (g >= 0)
			r = helper_wait(g, p->newgidmap_argv, pid, err);
		/* uid's failure, if any, is the one reported. */
		int ru = helper_wait(u, p->newuidmap_argv, pid, err);
		return ru < 0 ? ru : g < 0 ? g : r;
	}
	if (p->rootless) {
		r = write_file(pid, "setgroups", "deny", err);
		if (r < 0)
			return r;
	}
	r = write_file(pid, "uid_map", p->uid_map, err);
	return r < 0 ? r : write_file(pid, "gid_map", p->gid_map, err);
}
