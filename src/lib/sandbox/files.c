/* The files API of a long-lived sandbox, host side: each operation is an
 * exec whose payload runs it inside, as the sandbox's user
 * (child/fileop.c); the data travels over a socketpair of ours (no caller
 * fd enters the sandbox), copied here to or from the caller's fd.
 * Binary-exact, bounded by files.max_size, not by limits.output. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "base/fdpass.h"
#include "child/fileop.h"
#include "config/conf.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

#define LIST_MAX 100000   /* entries of one listing */

/* `path` as the operation takes it: absolute, or relative to the
 * sandbox's working directory. */
static char *inside_path(const nsbox_sandbox *sb, const char *path)
{
	if (!sb || path[0] == '/')
		return strdup(path);
	const char *wd = sb->plan && sb->plan->workdir ? sb->plan->workdir : "/";
	buf b = { 0 };
	buf_printf(&b, "%s%s%s", wd, wd[strlen(wd) - 1] == '/' ? "" : "/", path);
	return buf_steal(&b);
}

static int check(nsbox_sandbox *sb, const char *path, const char *what, nsbox_error **err)
{
	if (!sb || !path || !*path)
		return nsbox_err(err, EINVAL, "files", "%s: missing argument", what);
	if (!sandbox_config(sb))
		return nsbox_err_invalid(err, "files", "%s '%s': not a long-lived sandbox (NSBOX_SPAWN_KEEP)", what, path);
	if (strlen(path) >= PATH_MAX - 64)
		return nsbox_err(err, ENAMETOOLONG, "files", "%s", what);
	if (__atomic_load_n(&sb->reaped, __ATOMIC_ACQUIRE))
		return nsbox_err(err, ESRCH, "files", "%s '%s': the sandbox has ended", what, path);
	return 0;
}

/* What the operation's exec ended with: 0, or its errno as an error. */
static int op_status(nsbox_sandbox *sb, nsbox_sandbox *ex, const char *what, const char *path, uint64_t max,
                     nsbox_error **err)
{
	nsbox_result *r = NULL;
	int rc = nsbox_sandbox_wait(ex, &r, err);
	nsbox_sandbox_free(ex);
	if (rc < 0)
		return nsbox_err_prefix(err, rc, "%s '%s'", what, path);
	nsbox_status st = nsbox_result_status(r);
	int code = nsbox_result_exit_code(r);
	const nsbox_error *why = nsbox_result_error(r);
	int ret = 0;
	if (st == NSBOX_STATUS_EXITED && code == 0)
		ret = 0;
	else if (st == NSBOX_STATUS_EXITED && code == EFBIG)
		ret = nsbox_err_hint(err, EFBIG, "files", "raise files.max_size, or move it in parts",
		                     "%s '%s': the file is larger than files.max_size (%" PRIu64 " bytes)", what, path, max);
	else if (st == NSBOX_STATUS_EXITED)
		ret = nsbox_err(err, code, "files", "%s '%s' in sandbox %s", what, path, nsbox_sandbox_id(sb));
	else if (__atomic_load_n(&sb->reaped, __ATOMIC_ACQUIRE) || st == NSBOX_STATUS_SIGNALED)
		ret = nsbox_err(err, ESRCH, "files", "%s '%s': the sandbox has ended", what, path);
	else
		ret = nsbox_err(err, why ? nsbox_error_errno(why) : EIO, "files", "%s '%s': %s", what, path,
		                why ? nsbox_error_message(why) : "the operation did not run");
	nsbox_result_free(r);
	return ret;
}

/* Start OP PATH [ARGS] inside; *data is our end of its stdin/stdout. */
static int op_start(nsbox_sandbox *sb, const char *const *argv, bool input, int *data, nsbox_sandbox **ex,
                    nsbox_error **err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return nsbox_err(err, errno, "files", "%s: create a channel", argv[0]);
	/* An input's end is a byte in our end's queue, which only a whole
	 * input takes out (input_done): our end closed with it still there
	 * fails the payload's next read (ECONNRESET) instead of ending its
	 * input, so that no file is made of part of the caller's data. */
	if (input && send(sv[1], "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return nsbox_err(err, e, "files", "%s: create a channel", argv[0]);
	}
	/* One direction each: the payload cannot turn its channel around. */
	(void) shutdown(sv[1], input ? SHUT_WR : SHUT_RD);
	(void) shutdown(sv[0], input ? SHUT_RD : SHUT_WR);
	int r = sandbox_exec_file(sb, argv, input ? sv[1] : -1, input ? -1 : sv[1], ex, err);
	close(sv[1]);
	if (r < 0) {
		close(sv[0]);
		return r;
	}
	*data = sv[0];
	return 0;
}

static uint64_t bound(const nsbox_sandbox *sb, uint64_t max)
{
	uint64_t cfg = sandbox_config(sb)->files_max_size;
	return max && max < cfg ? max : cfg;
}

int nsbox_file_read(nsbox_sandbox *sb, const char *path, int out_fd, uint64_t max, uint64_t *size, nsbox_error **err)
{
	if (sb && sb->remote)
		return remote_file_read(sb, path, out_fd, max, size, err);
	int r = check(sb, path, "read", err);
	if (r < 0)
		return r;
	if (out_fd < 0)
		return nsbox_err(err, EBADF, "files", "read '%s': no output fd", path);
	max = bound(sb, max);
	_cleanup_free_ char *in = inside_path(sb, path);
	char num[24];
	snprintf(num, sizeof(num), "%" PRIu64, max);
	const char *argv[] = { "read", in, num, NULL };
	nsbox_sandbox *ex = NULL;
	int data = -1;
	if (!in)
		return nsbox_err(err, ENOMEM, "files", "read '%s'", path);
	r = op_start(sb, argv, false, &data, &ex, err);
	if (r < 0)
		return r;
	char chunk[65536];
	uint64_t total = 0;
	int werr = 0;
	for (;;) {
		ssize_t n = read(data, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (uint64_t) n;
		for (char *p = chunk; n > 0 && !werr;) {
			ssize_t w = write(out_fd, p, (size_t) n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				werr = w < 0 ? errno : EIO;
			else
				p += w, n -= w;
		}
		if (werr || total > max)
			break;
	}
	close(data);
	if (werr || total > max)
		(void) nsbox_sandbox_kill(ex, SIGKILL);
	r = op_status(sb, ex, "read", path, max, err);
	if (r == 0 && werr)
		r = nsbox_err(err, werr, "files", "read '%s': write to the caller's fd", path);
	else if (r == 0 && total > max)
		r = nsbox_err(err, EFBIG, "files", "read '%s': the file grew past files.max_size", path);
	if (r == 0 && size)
		*size = total;
	return r;
}

int nsbox_file_write(nsbox_sandbox *sb, const char *path, int in_fd, unsigned mode, uint64_t max,
                     nsbox_error **err)
{
	if (sb && sb->remote)
		return remote_file_write(sb, path, in_fd, mode, max, err);
	int r = check(sb, path, "write", err);
	if (r < 0)
		return r;
	if (in_fd < 0 || mode > 0777)
		return nsbox_err(err, EINVAL, "files", "write '%s': no input fd, or a mode that is not 0..0777", path);
	max = bound(sb, max);
	_cleanup_free_ char *in = inside_path(sb, path);
	char num[24], m[8];
	snprintf(num, sizeof(num), "%" PRIu64, max);
	snprintf(m, sizeof(m), "%o", mode);
	const char *argv[] = { "write", in, num, m, NULL };
	nsbox_sandbox *ex = NULL;
	int data = -1;
	if (!in)
		return nsbox_err(err, ENOMEM, "files", "write '%s'", path);
	r = op_start(sb, argv, true, &data, &ex, err);
	if (r < 0)
		return r;
	char chunk[65536];
	uint64_t total = 0;
	int rerr = 0;
	for (;;) {
		ssize_t n = read(in_fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rerr = errno;
		if (n <= 0)
			break;
		total += (uint64_t) n;
		if (total > max)
			break;   /* the payload says EFBIG when it sees it too */
		const char *p = chunk;
		while (n > 0) {
			ssize_t w = send(data, p, (size_t) n, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;   /* the payload stopped reading: its status says why */
			p += w;
			n -= w;
		}
		if (n > 0)
			break;
	}
	if (total > max) {
		/* One byte past the bound, so that the payload sees it too and
		 * leaves no file. */
		char one = 0;
		(void) send(data, &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	/* The caller's data failed, or passed the bound: no file may be made
	 * of part of it. The payload's read fails (op_start), and it removes
	 * what it wrote. (A kill would leave its temporary file, and might
	 * come after it saw the end; the byte past the bound may not have fit
	 * in the channel, and without it the payload saw a whole file.) */
	char end;
	if (!rerr && total <= max)
		(void) recv(data, &end, 1, MSG_DONTWAIT);
	close(data);
	r = op_status(sb, ex, "write", path, max, err);
	if (total > max && r != -EFBIG)
		r = nsbox_err_hint(err, EFBIG, "files", "raise files.max_size, or move it in parts",
		                   "write '%s': the file is larger than files.max_size (%" PRIu64 " bytes)", path, max);
	else if (r == 0 && rerr)
		r = nsbox_err(err, rerr, "files", "write '%s': read the caller's fd", path);
	return r;
}

/* Entries from the channel into a list. */
static int read_entries(int fd, const char *dir, nsbox_file_info **out, size_t *count, nsbox_error **err)
{
	nsbox_file_info *v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	buf in = { 0 };
	char chunk[65536];
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		buf_append(&in, chunk, (size_t) got);
		if (in.oom || in.len > (size_t) LIST_MAX * (sizeof(fileop_entry) + 256)) {
			r = nsbox_err(err, in.oom ? ENOMEM : E2BIG, "files", "list '%s'", dir);
			break;
		}
	}
	for (size_t off = 0; r == 0 && off + sizeof(fileop_entry) <= in.len;) {
		fileop_entry e;
		memcpy(&e, in.data + off, sizeof(e));
		off += sizeof(e);
		if (e.name_len == 0 || e.name_len > FILEOP_NAME_MAX || off + e.name_len > in.len) {
			r = nsbox_err(err, EPROTO, "files", "list '%s': a malformed entry", dir);
			break;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			nsbox_file_info *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				r = nsbox_err(err, ENOMEM, "files", "list '%s'", dir);
				break;
			}
			v = nv;
			cap = nc;
		}
		nsbox_file_info *f = &v[n];
		memset(f, 0, sizeof(*f));
		f->name = strndup(in.data + off, e.name_len);
		off += e.name_len;
		buf p = { 0 };
		buf_printf(&p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", f->name ? f->name : "");
		f->path = buf_steal(&p);
		f->type = S_ISREG(e.mode) ? 'f' : S_ISDIR(e.mode) ? 'd' : S_ISLNK(e.mode) ? 'l' : 'o';
		f->mode = e.mode & 07777;
		f->size = e.size;
		f->mtime_ns = e.mtime_sec * 1000000000LL + e.mtime_nsec;
		n++;
		if (!f->name || !f->path)
			r = nsbox_err(err, ENOMEM, "files", "list '%s'", dir);
	}
	buf_free(&in);
	if (r < 0) {
		nsbox_file_info_free(v, n);
		return r;
	}
	*out = v;
	*count = n;
	return 0;
}

static int list_or_stat(nsbox_sandbox *sb, const char *path, bool stat, nsbox_file_info **out, size_t *count,
                        nsbox_error **err)
{
	const char *what = stat ? "stat" : "list";
	int r = check(sb, path, what, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *in = inside_path(sb, path);
	if (!in)
		return nsbox_err(err, ENOMEM, "files", "%s '%s'", what, path);
	char num[24];
	snprintf(num, sizeof(num), "%d", LIST_MAX);
	const char *argv[] = { what, in, num, NULL };
	nsbox_sandbox *ex = NULL;
	int data = -1;
	r = op_start(sb, argv, false, &data, &ex, err);
	if (r < 0)
		return r;
	nsbox_file_info *v = NULL;
	size_t n = 0;
	/* For stat the entry's path is the path itself: its directory here. */
	_cleanup_free_ char *dir = NULL;
	if (stat) {
		dir = strdup(in);
		char *slash = dir ? strrchr(dir, '/') : NULL;
		if (slash)
			*(slash == dir ? slash + 1 : slash) = '\0';
	}
	int rr = read_entries(data, stat ? (dir ? dir : "/") : in, &v, &n, err);
	close(data);
	r = op_status(sb, ex, what, path, 0, rr < 0 ? NULL : err);
	if (rr < 0 || r < 0) {
		nsbox_file_info_free(v, n);
		return rr < 0 ? rr : r;
	}
	*out = v;
	*count = n;
	return 0;
}

int nsbox_file_list(nsbox_sandbox *sb, const char *path, nsbox_file_info **out, size_t *count, nsbox_error **err)
{
	if (sb && sb->remote && out && count)
		return remote_file_list(sb, path, out, count, err);
	if (!out || !count)
		return nsbox_err(err, EINVAL, "files", "list: missing argument");
	*out = NULL;
	*count = 0;
	return list_or_stat(sb, path, false, out, count, err);
}

int nsbox_file_stat(nsbox_sandbox *sb, const char *path, nsbox_file_info *out, nsbox_error **err)
{
	if (sb && sb->remote && out)
		return remote_file_stat(sb, path, out, err);
	if (!out)
		return nsbox_err(err, EINVAL, "files", "stat: missing argument");
	nsbox_file_info *v = NULL;
	size_t n = 0;
	int r = list_or_stat(sb, path, true, &v, &n, err);
	if (r < 0)
		return r;
	if (n != 1) {
		nsbox_file_info_free(v, n);
		return nsbox_err(err, EPROTO, "files", "stat '%s': no entry", path);
	}
	*out = v[0];
	free(v);
	return 0;
}

static int simple_op(nsbox_sandbox *sb, const char *what, const char *path, const char *arg, nsbox_error **err)
{
	int r = check(sb, path, what, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *in = inside_path(sb, path);
	if (!in)
		return nsbox_err(err, ENOMEM, "files", "%s '%s'", what, path);
	const char *argv[] = { what, in, arg, NULL };
	nsbox_sandbox *ex = NULL;
	int data = -1;
	r = op_start(sb, argv, false, &data, &ex, err);
	if (r < 0)
		return r;
	close(data);
	return op_status(sb, ex, what, path, 0, err);
}

int nsbox_file_remove(nsbox_sandbox *sb, const char *path, bool recursive, nsbox_error **err)
{
	if (sb && sb->remote)
		return remote_file_remove(sb, path, recursive, err);
	return simple_op(sb, "remove", path, recursive ? "recursive" : "one", err);
}

int nsbox_file_mkdir(nsbox_sandbox *sb, const char *path, unsigned mode, nsbox_error **err)
{
	if (sb && sb->remote)
		return remote_file_mkdir(sb, path, mode, err);
	char m[8];
	snprintf(m, sizeof(m), "%o", mode & 0777);
	return simple_op(sb, "mkdir", path, m, err);
}

int sandbox_connect_port(nsbox_sandbox *sb, uint16_t port, int *fd, nsbox_error **err)
{
	*fd = -1;
	if (__atomic_load_n(&sb->reaped, __ATOMIC_ACQUIRE))
		return nsbox_err(err, ESRCH, "network", "connect to port %u: the sandbox has ended", (unsigned) port);
	char num[8];
	snprintf(num, sizeof(num), "%u", (unsigned) port);
	const char *argv[] = { "connect", "/", num, NULL };
	nsbox_sandbox *ex = NULL;
	int data = -1;
	int r = op_start(sb, argv, false, &data, &ex, err);
	if (r < 0)
		return r;
	char one;
	int nfds = 0;
	/* One byte and one fd; more fds than that fail the call (closed). */
	if (fd_recv(data, &one, 1, fd, 1, &nfds, 0) != 1 || nfds != 1) {
		if (nfds == 1)
			close(*fd);
		*fd = -1;
	}
	close(data);
	char what[32];
	snprintf(what, sizeof(what), "connect to port %u", (unsigned) port);
	r = op_status(sb, ex, what, "localhost", 0, err);
	if (r == 0 && *fd < 0)
		r = nsbox_err(err, EPROTO, "network", "%s: no connection came back", what);
	if (r < 0 && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return r;
}

void nsbox_file_info_free(nsbox_file_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].path);
	}
	free(v);
}
