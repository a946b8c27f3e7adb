/* Snapshots of started sandboxes: `nsbox snapshot NAME SNAP` keeps what the
 * sandbox wrote to its own writable filesystems (/tmp and the writable
 * home: files, packages installed with pip --user or npm, caches) and its
 * configuration; `nsbox start --from SNAP` starts any number of sandboxes
 * with them. Process memory is not kept.
 *
 * The archive is made inside the sandbox (its own tar, as its user, through
 * an exec) and restored inside the new one the same way: the host never
 * parses what a sandbox wrote, it only keeps the bytes, bounded. The store
 * is a private directory of the caller's (nsbox_state_dir "snapshots"):
 * SNAP/config.yaml (the configuration, as a policy), SNAP/files.tar,
 * SNAP/meta.json; written under a temporary name and renamed whole. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/strv.h"
#include "live/ctl.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

/* The writable places' contents, archived from / (not the directories
 * themselves: /tmp is root's, mode 1777, and no restore may change it),
 * named as arguments (any name; busybox's tar has no file list); a home
 * that is not writable (no writable home in this image) is left out. No
 * entry at all: an empty archive. */
static const char save_script[] =
	"cd / || exit 1\n"
	"h=${HOME#/}\n"
	"if [ -z \"$h\" ] || [ ! -d \"/$h\" ] || [ ! -w \"/$h\" ]; then h=; fi\n"
	"set --\n"
	"for d in tmp $h; do\n"
	"  for f in \"$d\"/* \"$d\"/.[!.]* \"$d\"/..?*; do\n"
	"    if [ -e \"$f\" ] || [ -L \"$f\" ]; then set -- \"$@\" \"$f\"; fi\n"
	"  done\n"
	"done\n"
	"if [ $# -eq 0 ]; then exec dd if=/dev/zero bs=512 count=2 2>/dev/null; fi\n"
	"exec tar -cf - \"$@\"\n";
static const char restore_script[] = "cd / && exec tar -xf -\n";

#define SNAPSHOT_MAX (4ull << 30)

typedef struct saver {
	int fd;
	uint64_t written, max;
	int werr;
	nsbox_cancel *cancel;
	char why[256];          /* the end of what it said on stderr */
	size_t why_len;
} saver;

static void save_out(void *userdata, int stream, const char *data, size_t len)
{
	saver *s = userdata;
	if (stream == 2) {
		size_t keep = len > sizeof(s->why) - 1 ? sizeof(s->why) - 1 : len;
		if (s->why_len + keep > sizeof(s->why) - 1)
			s->why_len = 0;
		memcpy(s->why + s->why_len, data + len - keep, keep);
		s->why_len += keep;
		s->why[s->why_len] = '\0';
		return;
	}
	if (s->werr)
		return;
	if (s->written + len > s->max) {
		s->werr = EFBIG;
		nsbox_cancel_fire(s->cancel);
		return;
	}
	while (len) {
		ssize_t w = write(s->fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->werr = w < 0 ? errno : EIO;
			nsbox_cancel_fire(s->cancel);
			return;
		}
		data += w;
		len -= (size_t) w;
		s->written += (uint64_t) w;
	}
}

static int snap_dir(char *path, size_t len, bool create, nsbox_error **err)
{
	return ctl_open_state_dir("snapshots", path, len, create, err);
}

static int write_at(int dfd, const char *name, const char *text, nsbox_error **err)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t n = strlen(text);
	if (fd < 0 || write(fd, text, n) != (ssize_t) n) {
		int e = errno ? errno : EIO;
		if (fd >= 0)
			close(fd);
		return nsbox_err(err, e, "live", "snapshot: write %s", name);
	}
	return close(fd) < 0 ? nsbox_err(err, errno, "live", "snapshot: write %s", name) : 0;
}

/* Remove SNAP's directory (a snapshot's own files only: no recursion).
 * 0, or -errno of the directory's removal (something else is in it). */
static int remove_snap_dir(int dfd, const char *name)
{
	int d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d >= 0) {
		static const char *const files[] = { "config.yaml", "files.tar", "meta.json" };
		for (size_t i = 0; i < 3; i++)
			(void) unlinkat(d, files[i], 0);
		close(d);
	}
	return unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

int nsbox_live_snapshot(nsbox_sandbox *sb, const char *snap, nsbox_error **err)
{
	if (!sb || !sb->remote)
		return nsbox_err_invalid(err, "live", "snapshot: only a started sandbox (nsbox_live_start) has one");
	int r = ctl_name_ok(snap) ? 0
	                          : nsbox_err_invalid(err, "live", "invalid snapshot name '%.80s' (letters, digits, "
	                                              "'-', '_', '.'; at most 63; not starting with '.' or '-')",
	                                              snap ? snap : "");
	if (r < 0)
		return r;
	char *yaml = NULL;
	r = remote_config(sb, &yaml, err);
	if (r < 0)
		return r;
	char dir[PATH_MAX], tmp[96];
	int dfd = snap_dir(dir, sizeof(dir), true, err);
	if (dfd < 0) {
		free(yaml);
		return dfd;
	}
	unsigned char rnd[4] = { 0 };
	(void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
	snprintf(tmp, sizeof(tmp), ".%s.%02x%02x%02x%02x", snap, rnd[0], rnd[1], rnd[2], rnd[3]);
	int sd = -1, tfd = -1;
	nsbox_cancel *cancel = NULL;
	nsbox_result *res = NULL;
	if (mkdirat(dfd, tmp, 0700) < 0 || (sd = openat(dfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = nsbox_err(err, errno, "live", "snapshot: make '%s/%s'", dir, tmp);
		goto out;
	}
	r = write_at(sd, "config.yaml", yaml, err);
	if (r < 0)
		goto out;
	tfd = openat(sd, "files.tar", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (tfd < 0 || (r = nsbox_cancel_new(&cancel, err)) < 0) {
		r = tfd < 0 ? nsbox_err(err, errno, "live", "snapshot: create files.tar") : r;
		goto out;
	}
	saver sv = { .fd = tfd, .max = SNAPSHOT_MAX, .cancel = cancel };
	static const char *const argv[] = { "sh", "-c", save_script, NULL };
	nsbox_run_options o = { .version = NSBOX_RUN_OPTIONS_VERSION,
		                .sandbox = sb,
		                .argv = argv,
		                .timeout_ms = NSBOX_TIMEOUT_NONE,
		                .stdin_fd = -1,
		                .stdout_fd = -1,
		                .stderr_fd = -1,
		                .signal_fd = -1,
		                .stats_fd = -1,
		                .on_output = save_out,
		                .output_userdata = &sv,
		                .cancel = cancel };
	r = nsbox_run(&o, &res, err);
	if (r == 0 && sv.werr)
		r = nsbox_err(err, sv.werr, "live", "snapshot: keep the files of '%s'%s", nsbox_live_name(sb),
		              sv.werr == EFBIG ? " (larger than 4 GiB)" : "");
	else if (r == 0 && nsbox_result_exit_status(res) != 0) {
		sv.why[sv.why_len = text_trim_end(sv.why, sv.why_len)] = '\0';
		int st = nsbox_result_exit_status(res);
		/* tar's own words say what it could not do; 127: sh or tar is
		 * not there (the script runs in sh, busybox's sh has tar in it). */
		r = st == 127 ? nsbox_err_hint(err, -ENOENT, "live", "an image with sh and tar (GNU or busybox)",
		                               "snapshot: archiving /tmp and the home of '%s' failed: the image has no sh "
		                               "or no tar", nsbox_live_name(sb))
		              : nsbox_err(err, -EIO, "live", "snapshot: archiving /tmp and the home of '%s' failed "
		                          "(tar's status %d): %s", nsbox_live_name(sb), st, sv.why[0] ? sv.why : "no message");
	}
	if (r == 0 && fsync(tfd) < 0)
		r = nsbox_err(err, errno, "live", "snapshot: write files.tar");
	if (r < 0)
		goto out;
	json_t *meta = json_pack("{s:s, s:s, s:s?, s:I, s:I}", "name", snap, "sandbox", nsbox_live_name(sb), "id",
	                         nsbox_sandbox_id(sb), "created", (json_int_t) time(NULL), "size_bytes",
	                         (json_int_t) sv.written);
	char *mtext = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
	json_decref(meta);
	r = mtext ? write_at(sd, "meta.json", mtext, err) : nsbox_err(err, ENOMEM, "live", "snapshot");
	free(mtext);
	if (r < 0)
		goto out;
	/* Whole, under its name (replacing an older snapshot of that name). */
	if (renameat2(dfd, tmp, dfd, snap, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST) {
			char old[96];
			snprintf(old, sizeof(old), ".%s.old.%02x%02x%02x%02x", snap, rnd[0], rnd[1], rnd[2], rnd[3]);
			if (renameat2(dfd, snap, dfd, old, RENAME_NOREPLACE) == 0 && renameat(dfd, tmp, dfd, snap) == 0) {
				(void) remove_snap_dir(dfd, old);
				goto out;
			}
		}
		r = nsbox_err(err, errno, "live", "snapshot: store '%s'", snap);
	}
out:
	if (tfd >= 0)
		close(tfd);
	if (sd >= 0)
		close(sd);
	if (r < 0)
		(void) remove_snap_dir(dfd, tmp);
	close(dfd);
	nsbox_result_free(res);
	nsbox_cancel_free(cancel);
	free(yaml);
	return r;
}

/* SNAP's directory, open; -ENOENT with the error set when there is none.
 * With parent: the directory of snapshots stays open there (its path in
 * dir, dir_len bytes at most, when dir is given). */
static int open_snap_in(const char *snap, char *dir, size_t dir_len, int *parent, nsbox_error **err)
{
	if (!ctl_name_ok(snap))
		return nsbox_err_invalid(err, "live", "invalid snapshot name '%.80s'", snap ? snap : "");
	char here[PATH_MAX];
	if (!dir) {
		dir = here;
		dir_len = sizeof(here);
	}
	int dfd = snap_dir(dir, dir_len, false, err);
	if (dfd == -ENOENT)
		return nsbox_err_hint(err, ENOENT, "live", "nsbox snapshot ls lists yours", "no snapshot named '%s'", snap);
	if (dfd < 0)
		return dfd;
	int sd = openat(dfd, snap, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	if (sd >= 0 && parent)
		*parent = dfd;
	else
		close(dfd);
	if (sd < 0)
		return e == ENOENT ? nsbox_err_hint(err, ENOENT, "live", "nsbox snapshot ls lists yours",
		                                    "no snapshot named '%s'", snap)
		                   : nsbox_err(err, e, "live", "open snapshot '%s/%s'", dir, snap);
	return sd;
}

static int open_snap(const char *snap, nsbox_error **err)
{
	return open_snap_in(snap, NULL, 0, NULL, err);
}

int nsbox_snapshot_policy(const char *snap, char *path, size_t len, nsbox_error **err)
{
	char dir[PATH_MAX];
	int sd = open_snap_in(snap, dir, sizeof(dir), NULL, err);
	if (sd < 0)
		return sd;
	close(sd);
	if (snprintf(path, len, "%s/%s/config.yaml", dir, snap) >= (int) len)
		return nsbox_err(err, ENAMETOOLONG, "live", "snapshot '%s/%s'", dir, snap);
	return 0;
}

int snapshot_restore(nsbox_sandbox *sb, const char *snap, nsbox_error **err)
{
	int sd = open_snap(snap, err);
	if (sd < 0)
		return sd;
	int fd = openat(sd, "files.tar", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(sd);
	if (fd < 0)
		return nsbox_err(err, e, "live", "snapshot '%s': open files.tar", snap);
	static const char *const argv[] = { "sh", "-c", restore_script, NULL };
	nsbox_run_options o = { .version = NSBOX_RUN_OPTIONS_VERSION,
		                .flags = NSBOX_SPAWN_CAPTURE,
		                .sandbox = sb,
		                .argv = argv,
		                .timeout_ms = NSBOX_TIMEOUT_NONE,
		                .stdin_fd = fd,
		                .stdout_fd = -1,
		                .stderr_fd = -1,
		                .signal_fd = -1,
		                .stats_fd = -1 };
	nsbox_result *res = NULL;
	int r = nsbox_run(&o, &res, err);
	close(fd);
	if (r == 0 && nsbox_result_exit_status(res) != 0) {
		size_t n = 0;
		const char *why = nsbox_result_output(res, 2, &n);
		r = nsbox_err_hint(err, EIO, "live", "the image needs tar, and the snapshot's image the same paths",
		                   "restore snapshot '%s' in '%s': %.*s", snap, nsbox_live_name(sb),
		                   (int) (n > 300 ? 300 : n), why ? why : "tar failed");
	}
	nsbox_result_free(res);
	return r;
}

int nsbox_snapshot_list(char **out, nsbox_error **err)
{
	*out = NULL;
	char dir[PATH_MAX];
	int dfd = snap_dir(dir, sizeof(dir), false, err);
	if (dfd < 0 && dfd != -ENOENT)
		return dfd;
	json_t *a = json_array();
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (dfd >= 0 && !d)
		close(dfd);
	struct dirent *de;
	while (a && d && (de = readdir(d))) {
		if (!ctl_name_ok(de->d_name))
			continue;
		int sd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int mfd = sd >= 0 ? openat(sd, "meta.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
		char text[4096];
		ssize_t n = mfd >= 0 ? read(mfd, text, sizeof(text) - 1) : -1;
		if (mfd >= 0)
			close(mfd);
		if (sd >= 0)
			close(sd);
		if (n <= 0)
			continue;
		text[n] = '\0';
		json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(j))
			json_array_append(a, j);
		json_decref(j);
	}
	if (d)
		closedir(d);
	*out = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return *out ? 0 : nsbox_err(err, ENOMEM, "live", "list the snapshots");
}

int nsbox_snapshot_remove(const char *snap, nsbox_error **err)
{
	char dir[PATH_MAX];
	int dfd = -1;
	int sd = open_snap_in(snap, dir, sizeof(dir), &dfd, err);
	if (sd < 0)
		return sd;
	close(sd);
	int r = remove_snap_dir(dfd, snap);
	close(dfd);
	return r < 0 ? nsbox_err(err, -r, "live", "remove snapshot '%s/%s'", dir, snap) : 0;
}
