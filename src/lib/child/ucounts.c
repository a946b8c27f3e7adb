/* Child side: the sandbox user namespace's own kernel counts. Each
 * /proc/sys/user/max_* file is the limit of the writer's user namespace
 * (the set is looked up from the current credentials, whatever procfs the
 * path goes through), writable with CAP_SYS_RESOURCE in it: the setup
 * identity's, before the payload starts. A count this kernel does not keep
 * (max_fanotify_* before 5.13, max_time_namespaces before 5.6) has no file
 * and nothing to limit. No allocation, no stdio: this runs after clone. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "plan/plan.h"

int ucounts_apply(const nsbox_plan *p, int *failed)
{
	*failed = -1;
	if (!p->n_user_max)
		return 0;
	int dir = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	int r = 0;
	for (size_t i = 0; r == 0 && i < p->n_user_max; i++) {
		int fd = openat(dir, p->user_max[i].name, O_WRONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		size_t len = strlen(p->user_max[i].value);
		if (fd < 0 || write(fd, p->user_max[i].value, len) != (ssize_t) len) {
			r = -errno;
			*failed = (int) i;
		}
		if (fd >= 0)
			close(fd);
	}
	close(dir);
	return r;
}
