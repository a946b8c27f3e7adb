/* What killed imports and builds leave in an image store: the directories
 * they fill before the rename that publishes an image (.import-NAME-PID,
 * .build-NAME-PID) and the previous image moved aside during a rebuild
 * (.old-NAME-PID). A supervisor killed there (SIGKILL, the OOM killer, a
 * reboot) never removes them, and they may hold a whole root filesystem.
 *
 * The maker holds an flock on its directory while it works (image_tmp_lock).
 * A directory is stale when that lock is free and the pid in its name is
 * gone: the lock covers a maker in another pid namespace, the pid the moment
 * between mkdir and the lock. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "image/images.h"

int image_tmp_lock(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* The pid after the last '-', or 0. */
static pid_t pid_of(const char *name)
{
	const char *dash = strrchr(name, '-');
	if (!dash || dash[1] < '1' || dash[1] > '9')
		return 0;
	char *e;
	long pid = strtol(dash + 1, &e, 10);
	return *e == '\0' && pid > 0 && pid <= 0x7fffffff ? (pid_t) pid : 0;
}

void image_reap(const char *store)
{
	int sfd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return;
	int lfd = dup(sfd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	if (!d) {
		if (lfd >= 0)
			close(lfd);
		close(sfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		bool old = !strncmp(n, ".old-", 5);
		if (!old && strncmp(n, ".import-", 8) && strncmp(n, ".build-", 7))
			continue;
		pid_t pid = pid_of(n);
		if (!pid || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;   /* alive, or not ours to judge */
		int dfd = openat(sfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		if (flock(dfd, LOCK_EX | LOCK_NB) < 0) {
			close(dfd);
			continue;
		}
		/* A rebuild killed between its two renames: the previous image
		 * is the only one; put it back where it was. */
		if (old) {
			char image[256];
			const char *dash = strrchr(n, '-');
			size_t len = (size_t) (dash - (n + 5));
			if (len < sizeof(image)) {
				memcpy(image, n + 5, len);
				image[len] = '\0';
				if (image_name_valid(image) &&
				    renameat2(sfd, n, sfd, image, RENAME_NOREPLACE) == 0) {
					close(dfd);
					continue;
				}
			}
		}
		(void) remove_beneath(sfd, n);
		close(dfd);
	}
	closedir(d);
	close(sfd);
}
