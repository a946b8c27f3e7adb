/* Whose user namespace a sandbox is. The kernel charges what a user
 * namespace's processes hold (inotify and fanotify groups, watches and
 * marks, namespaces, processes and pending signals) to their uid in it and
 * to the namespace's owner - the euid of its creator - in every namespace
 * above, up to the host's limits for that uid. Created by host root, a
 * sandbox's payload (uid 1000 in it, no capability) took root's own
 * allowance: 128 inotify instances held by one payload, and every root
 * process on the host got EMFILE from inotify_init(). So root's sandboxes
 * are created with the euid of their range's first id (the sandbox's own
 * root, host uid base), which no host account holds, and each bounds its
 * own counts (child/ucounts.c). Rootless, the owner is the caller already:
 * its sandboxes take at most their own bounds of its allowance.
 *
 * Credentials are per thread: the raw system calls change the calling
 * thread's only (glibc's setresuid() would change every thread of an
 * embedding program), for the length of the clone. The effective
 * capabilities are kept across the change (SECBIT_NO_SETUID_FIXUP, also
 * per thread), so that nothing else about the clone changes (hosts where
 * unprivileged user namespaces are restricted, CLONE_INTO_CGROUP's
 * permission check), and the filesystem uid stays 0: the child reopens
 * host paths with root's access before it takes the sandbox's ids. */
#include <errno.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

static int set_euid(uid_t euid)
{
	return syscall(SYS_setresuid, (uid_t) -1, euid, (uid_t) -1) < 0 ? -errno : 0;
}

int owner_become(const nsbox_plan *p, owner_saved *s)
{
	*s = (owner_saved){ .active = false };
	if (!p->root_range || geteuid() != 0)
		return 0;
	/* Changing the euid makes the process non-dumpable (the whole
	 * process's mm): put back what it was, for the clone and after. */
	s->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	s->securebits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	s->kept_caps = s->securebits >= 0 &&
	               prctl(PR_SET_SECUREBITS, (unsigned long) s->securebits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) == 0;
	int r = set_euid(p->host_setup_uid);
	if (r < 0) {
		if (s->kept_caps)
			(void) prctl(PR_SET_SECUREBITS, (unsigned long) s->securebits, 0, 0, 0);
		return r;
	}
	s->active = true;
	/* The filesystem uid followed the euid: back to root's (setfsuid
	 * reports the previous value, never an error). */
	(void) syscall(SYS_setfsuid, 0);
	if (s->dumpable >= 0)
		(void) prctl(PR_SET_DUMPABLE, s->dumpable, 0, 0, 0);
	return 0;
}

void owner_restore(owner_saved *s)
{
	if (!s->active)
		return;
	/* The real uid is still 0: allowed whatever the capabilities. */
	(void) set_euid(0);
	if (s->kept_caps)
		(void) prctl(PR_SET_SECUREBITS, (unsigned long) s->securebits, 0, 0, 0);
	if (s->dumpable >= 0)
		(void) prctl(PR_SET_DUMPABLE, s->dumpable, 0, 0, 0);
	s->active = false;
}
