/* The monitor's other requests: files, background processes, published
 * ports, the sandbox's information, and one connection read and
 * dispatched. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/error.h"
#include "live/ctl.h"
#include "live/monitor.h"
#include "live/xfer.h"
#include "live/remote.h"
#include "base/fdpass.h"

/* ---- files ----------------------------------------------------------------------- */

/* A name from the sandbox: a JSON string, or, when it is not UTF-8 (which
 * JSON cannot hold, and a hostile sandbox may choose, to hide a file from
 * a listing), its bytes in hex under KEY_hex. */
static int put_name(json_t *o, const char *key, const char *v)
{
	json_t *s = json_string(v);
	if (s)
		return json_object_set_new(o, key, s);
	size_t n = strlen(v);
	char *hex = malloc(2 * n + 1), k[16];
	for (size_t i = 0; hex && i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char) v[i]);
	snprintf(k, sizeof(k), "%s_hex", key);
	int r = hex ? json_object_set_new(o, k, json_string(n ? hex : "")) : -1;
	free(hex);
	return r;
}

static json_t *info_json(const nsbox_file_info *f)
{
	char t[2] = { f->type, 0 };
	json_t *o = json_pack("{s:s, s:i, s:I, s:I}", "type", t, "mode", (int) f->mode, "size", (json_int_t) f->size,
	                      "mtime_ns", (json_int_t) f->mtime_ns);
	if (o && (put_name(o, "name", f->name) < 0 || put_name(o, "path", f->path) < 0)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* A transfer whose copy failed: why, over what the library saw (an end
 * of its socket that failed under it). */
static int transfer_error(nsbox_error **err, const char *op, const char *path, int e)
{
	if (e == ECANCELED)
		return nsbox_err(err, ESRCH, "files", "%s '%s': the sandbox has ended (it was stopped during the transfer)",
		                 op, path);
	return nsbox_err(err, e, "files", "%s '%s': %s the caller's fd", op, path,
	                 !strcmp(op, "read") ? "write to" : "read");
}

static int serve_file(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds)
{
	if (h->argc < 2 || h->argc > 3)
		return refuse(cfd, EINVAL, "files", "a file operation takes an operation, a path and its argument");
	const char *op = v[0], *path = v[1], *arg = v[2];
	bool data = !strcmp(op, "read") || !strcmp(op, "write");
	if (nfds != (data ? 1 : 0) || (data && !arg))
		return refuse(cfd, EINVAL, "files", "%s: a malformed request", op);
	nsbox_error *e = NULL;
	int r, lib = -1;
	json_t *out = NULL;
	/* The data goes through a copier of ours (xfer.c), never straight to or from
	 * the client's fd, which may block for ever (xfer.h). */
	xfer rl = { .ours = -1 };
	if (data && (r = xfer_start(&rl, fds[0], !strcmp(op, "read"), m->stop_fd, &lib)) < 0)
		return refuse(cfd, -r, "files", "%s: start the transfer", op);
	if (!strcmp(op, "read")) {
		uint64_t size = 0;
		r = nsbox_file_read(m->sb, path, lib, strtoull(arg, NULL, 10), &size, &e);
		if (r == 0)
			out = json_pack("{s:I}", "size", (json_int_t) size);
	} else if (!strcmp(op, "write")) {
		char *colon = strchr(arg, ':');
		unsigned mode = colon ? (unsigned) strtoul(colon + 1, NULL, 8) : 0644;
		r = nsbox_file_write(m->sb, path, lib, mode, strtoull(arg, NULL, 10), &e);
	} else if (!strcmp(op, "list")) {
		nsbox_file_info *fi = NULL;
		size_t n = 0;
		r = nsbox_file_list(m->sb, path, &fi, &n, &e);
		json_t *a = r == 0 ? json_array() : NULL;
		for (size_t i = 0; a && i < n; i++)
			if (json_array_append_new(a, info_json(&fi[i])) < 0) {
				json_decref(a);   /* never a listing that leaves one out */
				a = NULL;
			}
		nsbox_file_info_free(fi, n);
		if (r == 0)
			out = a ? json_pack("{s:o}", "entries", a) : NULL;
		if (r == 0 && !out)
			r = nsbox_err(&e, ENOMEM, "files", "list '%s'", path);
	} else if (!strcmp(op, "stat")) {
		nsbox_file_info fi = { 0 };
		r = nsbox_file_stat(m->sb, path, &fi, &e);
		if (r == 0 && !(out = info_json(&fi)))
			r = nsbox_err(&e, ENOMEM, "files", "stat '%s'", path);
		free(fi.name);
		free(fi.path);
	} else if (!strcmp(op, "remove")) {
		r = nsbox_file_remove(m->sb, path, h->flags & CTL_RECURSIVE, &e);
	} else if (!strcmp(op, "mkdir")) {
		r = nsbox_file_mkdir(m->sb, path, arg ? (unsigned) strtoul(arg, NULL, 8) : 0755, &e);
	} else {
		return refuse(cfd, EINVAL, "files", "no file operation '%.40s'", op);
	}
	int lost = data ? xfer_finish(&rl, lib) : 0;
	if (lost) {
		nsbox_error_free(e);
		e = NULL;
		json_decref(out);
		out = NULL;
		r = transfer_error(&e, op, path, lost);
	}
	if (r < 0) {
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	return out ? reply_json(cfd, out) : ctl_send_reply(cfd, 0, NULL);
}

/* ---- processes ------------------------------------------------------------------- */

static proc_ent *proc_lookup(monitor *m, const char *id)
{
	for (proc_ent *p = m->procs; p; p = p->next)
		if (!strcmp(nsbox_process_id(p->p), id))
			return p;
	return NULL;
}

static json_t *proc_json(nsbox_process *p)
{
	uint64_t out = 0, err = 0;
	char *t;
	size_t l;
	if (nsbox_process_logs(p, 1, &t, &l, &out, NULL) == 0)
		free(t);
	if (nsbox_process_logs(p, 2, &t, &l, &err, NULL) == 0)
		free(t);
	return json_pack("{s:s, s:b, s:I, s:I}", "id", nsbox_process_id(p), "running", nsbox_process_running(p),
	                 "stdout_bytes", (json_int_t) out, "stderr_bytes", (json_int_t) err);
}

static int serve_spawn(monitor *m, int cfd, const ctl_req *h, char **v)
{
	command c = { 0 };
	int r = command_of(h, v, &c);
	if (r < 0)
		return refuse(cfd, -r, "process", "a malformed command");
	pthread_mutex_lock(&m->lock);
	/* Room: the oldest ended process (and its logs) goes first. */
	if (m->n_procs >= MAX_PROCESSES) {
		proc_ent **old = NULL;
		for (proc_ent **pp = &m->procs; *pp; pp = &(*pp)->next)
			if (!nsbox_process_running((*pp)->p) && !(*pp)->users)
				old = pp;
		if (old) {
			proc_ent *gone = *old;
			*old = gone->next;
			m->n_procs--;
			nsbox_process_free(gone->p);
			free(gone);
		}
	}
	bool full = m->n_procs >= MAX_PROCESSES;
	pthread_mutex_unlock(&m->lock);
	if (full) {
		free(c.store);
		return refuse(cfd, EAGAIN, "process", "%d processes are running in the sandbox", MAX_PROCESSES);
	}
	nsbox_process_options o = { .version = NSBOX_PROCESS_OPTIONS_VERSION,
		                    .flags = (h->flags & CTL_ENV_ADD) ? NSBOX_EXEC_ENV_ADD : 0,
		                    .argv = (const char *const *) c.argv,
		                    .envp = (const char *const *) c.envp,
		                    .workdir = c.workdir,
		                    .timeout_ms = h->timeout_ms,
		                    .log_bytes = h->arg > (16u << 20) ? (16u << 20) : h->arg };
	nsbox_process *p = NULL;
	nsbox_error *e = NULL;
	proc_ent *ent = calloc(1, sizeof(*ent));
	r = ent ? nsbox_process_start(m->sb, &o, &p, &e) : -ENOMEM;
	free(c.store);
	if (r < 0) {
		free(ent);
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	pthread_mutex_lock(&m->lock);
	ent->p = p;
	ent->next = m->procs;
	m->procs = ent;
	m->n_procs++;
	pthread_mutex_unlock(&m->lock);
	return reply_json(cfd, json_pack("{s:s}", "id", nsbox_process_id(p)));
}

/* LOGS, KILL or WAIT of the process p. */
static int serve_one(int cfd, const ctl_req *h, char **v, nsbox_process *p)
{
	nsbox_error *e = NULL;
	int r = 0;
	if (h->op == CTL_LOGS) {
		char *t = NULL;
		size_t len = 0;
		uint64_t total = 0;
		r = nsbox_process_logs(p, h->argc > 1 && !strcmp(v[1], "2") ? 2 : 1, &t, &len, &total, &e);
		if (r == 0) {
			stream_ctx sc = { .fd = cfd };
			send_output(&sc, 1, t, len);
			free(t);
			return reply_json(cfd, json_pack("{s:I}", "total", (json_int_t) total));
		}
	} else if (h->op == CTL_KILL) {
		int sig = h->argc > 1 ? atoi(v[1]) : SIGTERM;
		if (sig <= 0 || sig >= NSIG)
			return refuse(cfd, EINVAL, "process", "no signal '%.20s'", h->argc > 1 ? v[1] : "");
		r = nsbox_process_kill(p, sig);
		if (r < 0)
			return refuse(cfd, -r, "process", "process %s has ended", v[0]);
		return ctl_send_reply(cfd, 0, NULL);
	} else {   /* CTL_WAIT */
		nsbox_result *res = NULL;
		r = nsbox_process_wait(p, h->timeout_ms, &res, &e);
		if (r == 0) {
			char *j = NULL;
			(void) nsbox_result_to_json(res, &j, NULL);
			nsbox_result_free(res);
			r = j ? ctl_send_reply(cfd, 0, j) : refuse(cfd, ENOMEM, "process", "out of memory");
			free(j);
			return r;
		}
	}
	r = reply_error(cfd, e, -r);
	nsbox_error_free(e);
	return r;
}

static int serve_proc(monitor *m, int cfd, const ctl_req *h, char **v)
{
	if (h->op == CTL_PROCS) {
		json_t *a = json_array();
		pthread_mutex_lock(&m->lock);
		for (proc_ent *p = m->procs; a && p; p = p->next)
			if (!h->argc || !strcmp(v[0], nsbox_process_id(p->p)))
				json_array_append_new(a, proc_json(p->p));
		pthread_mutex_unlock(&m->lock);
		return reply_json(cfd, a);
	}
	if (h->argc < 1)
		return refuse(cfd, EINVAL, "process", "name the process");
	/* A process stays in the registry until the sandbox ends or its room
	 * is needed, which only spawn takes, and never from a request using
	 * it (users, under the lock): looked up, it is used without the lock,
	 * so a wait does not hold it. */
	pthread_mutex_lock(&m->lock);
	proc_ent *ent = proc_lookup(m, v[0]);
	if (ent)
		ent->users++;
	pthread_mutex_unlock(&m->lock);
	if (!ent)
		return refuse(cfd, ENOENT, "process", "no process '%.40s' in the sandbox", v[0]);
	int r = serve_one(cfd, h, v, ent->p);
	pthread_mutex_lock(&m->lock);
	ent->users--;
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* ---- ports ----------------------------------------------------------------------- */

int publish(monitor *m, const char *addr, unsigned host_port, unsigned port, uint16_t *bound, nsbox_error **err)
{
	pthread_mutex_lock(&m->lock);
	bool full = m->n_forwards >= MAX_FORWARDS;
	pthread_mutex_unlock(&m->lock);
	if (full)
		return nsbox_err_invalid(err, "network", "publish: %d ports are published already", MAX_FORWARDS);
	if (!port || port > 65535 || host_port > 65535)
		return nsbox_err_invalid(err, "network", "publish: a port is 1..65535 (a host port of 0: any free)");
	fwd_ent *ent = calloc(1, sizeof(*ent));
	if (!ent)
		return nsbox_err(err, ENOMEM, "network", "publish");
	snprintf(ent->addr, sizeof(ent->addr), "%s", addr);
	int r = nsbox_forward_start(m->sb, addr, (uint16_t) host_port, (uint16_t) port, &ent->f, bound, err);
	if (r < 0) {
		free(ent);
		return r;
	}
	pthread_mutex_lock(&m->lock);
	ent->next = m->forwards;
	m->forwards = ent;
	m->n_forwards++;
	pthread_mutex_unlock(&m->lock);
	write_info(m);
	return 0;
}

static int serve_expose(monitor *m, int cfd, const ctl_req *h, char **v)
{
	if (h->argc != 3)
		return refuse(cfd, EINVAL, "network", "publish takes a port, an address and a host port");
	char *end1, *end2;
	unsigned long port = strtoul(v[0], &end1, 10), hp = strtoul(v[2], &end2, 10);
	if (*end1 || *end2 || !*v[0] || !*v[2])
		return refuse(cfd, EINVAL, "network", "publish: ports are numbers");
	uint16_t bound = 0;
	nsbox_error *e = NULL;
	int r = publish(m, v[1], (unsigned) hp, (unsigned) port, &bound, &e);
	if (r < 0) {
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	return reply_json(cfd, json_pack("{s:s, s:i, s:i}", "host", v[1], "host_port", (int) bound, "port", (int) port));
}

/* ---- information ----------------------------------------------------------------- */

json_t *info(monitor *m)
{
	json_t *pub = json_array(), *ctxs = json_array();
	pthread_mutex_lock(&m->lock);
	for (fwd_ent *f = m->forwards; f && pub; f = f->next)
		json_array_append_new(pub, json_pack("{s:s, s:i, s:i}", "host", f->addr, "host_port",
		                                     (int) nsbox_forward_host_port(f->f), "port",
		                                     (int) nsbox_forward_port(f->f)));
	for (ctx_ent *c = m->contexts; c && ctxs; c = c->next)
		if (c->ctx)
			json_array_append_new(ctxs, json_pack("{s:s, s:s}", "name", c->name, "language",
			                                      nsbox_context_language(c->ctx)));
	unsigned procs = 0;
	for (proc_ent *p = m->procs; p; p = p->next)
		procs += nsbox_process_running(p->p);
	bool owned = m->owner_fd >= 0;
	pthread_mutex_unlock(&m->lock);
	const char *w = nsbox_sandbox_warning(m->sb);
	return json_pack("{s:s, s:s, s:i, s:I, s:s, s:I, s:I, s:b, s:b, s:b, s:s?, s:s?, s:o, s:o, s:i}", "name",
	                 m->name, "id", nsbox_sandbox_id(m->sb), "monitor_pid", (int) getpid(), "started",
	                 (json_int_t) m->started_wall, "image", m->image,
	                 "idle_timeout_ms", (json_int_t) m->idle_ms, "lifetime_ms", (json_int_t) m->lifetime_ms, "paused",
	                 nsbox_sandbox_paused(m->sb), "pause_when_idle", m->pause_when_idle, "owned", owned, "warning",
	                 w, "enforced_by", nsbox_sandbox_enforced_by(m->sb), "published", pub ? pub : json_array(),
	                 "contexts", ctxs ? ctxs : json_array(), "processes_running", (int) procs);
}

/* NAME.json, what `nsbox ps` and nsbox_live_list() read: replaced whole. */
void write_info(monitor *m)
{
	json_t *j = info(m);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return;
	char f[80], tmpf[96];
	snprintf(f, sizeof(f), "%s.json", m->name);
	snprintf(tmpf, sizeof(tmpf), ".%s.json.%d.tmp", m->name, (int) gettid());
	int fd = openat(m->dirfd, tmpf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		size_t n = strlen(s);
		s[n] = '\n';
		bool ok = write(fd, s, n + 1) == (ssize_t) (n + 1);
		close(fd);
		if (!ok || renameat(m->dirfd, tmpf, m->dirfd, f) < 0)
			(void) unlinkat(m->dirfd, tmpf, 0);
	}
	free(s);
}

/* The request's strings: exactly h->argc of them in the body. */
static char **split(char *body, const ctl_req *h)
{
	if (h->argc > CTL_STRINGS_MAX)
		return NULL;
	char **v = calloc((size_t) h->argc + 2, sizeof(char *));
	char *pos = body, *end = body + h->len;
	for (uint32_t i = 0; v && i < h->argc; i++) {
		char *nul = memchr(pos, '\0', (size_t) (end - pos));
		if (!nul) {
			free(v);
			return NULL;
		}
		v[i] = pos;
		pos = nul + 1;
	}
	if (v && pos != end) {
		free(v);
		return NULL;
	}
	return v;
}

/* How many fds a request of these flags carries. */
static int fds_wanted(const ctl_req *h)
{
	if (h->op == CTL_EXEC)
		return !!(h->flags & CTL_STDIN) + 2 * !!(h->flags & CTL_STDOUT);
	if (h->op == CTL_CELL)
		return 2 * !!(h->flags & CTL_STDOUT);
	if (h->op == CTL_FILE)
		return -1;   /* 0 or 1, by the operation */
	return 0;
}

/* argv (and envp) of an exec or a spawn: [WORKDIR] ARGV... ENV... in v. */
/* ---- one connection ---------------------------------------------------------------- */

/* Until the request's deadline, something to read on fd. */
static bool readable_by(int fd, const struct timespec *start)
{
	for (;;) {
		double left = REQUEST_MS - since_ms(start);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = left > 0 ? poll(&p, 1, (int) left + 1) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n > 0;
	}
}

/* n bytes of the request by its deadline. */
static int read_by(int fd, char *p, size_t n, const struct timespec *start)
{
	while (n) {
		if (!readable_by(fd, start))
			return -ETIMEDOUT;
		ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		p += r;
		n -= (size_t) r;
	}
	return 0;
}

/* An idle-paused sandbox wakes for a request that needs it running. */
static void wake_up(monitor *m, uint32_t op)
{
	if (op == CTL_INFO || op == CTL_STOP || op == CTL_PAUSE || op == CTL_RESUME || op == CTL_PROCS ||
	    op == CTL_LOGS || op == CTL_DETACH || op == CTL_CONFIG)
		return;
	pthread_mutex_lock(&m->lock);
	bool was = m->idle_paused;
	m->idle_paused = false;
	pthread_mutex_unlock(&m->lock);
	if (was) {
		(void) nsbox_sandbox_resume(m->sb, NULL);
		write_info(m);
	}
}

static void dispatch(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds)
{
	wake_up(m, h->op);
	nsbox_error *e = NULL;
	int r;
	switch (h->op) {
	case CTL_EXEC: (void) serve_exec(m, cfd, h, v, fds, nfds); break;
	case CTL_CELL: (void) serve_cell(m, cfd, h, v, fds); break;
	case CTL_FILE: (void) serve_file(m, cfd, h, v, fds, nfds); break;
	case CTL_SPAWN: (void) serve_spawn(m, cfd, h, v); break;
	case CTL_PROCS:
	case CTL_LOGS:
	case CTL_KILL:
	case CTL_WAIT: (void) serve_proc(m, cfd, h, v); break;
	case CTL_EXPOSE: (void) serve_expose(m, cfd, h, v); break;
	case CTL_CONTEXT_NEW:
	case CTL_CONTEXT_RESTART:
	case CTL_CONTEXT_CLOSE:
	case CTL_INTERRUPT: (void) serve_context(m, cfd, h, v); break;
	case CTL_INFO: (void) reply_json(cfd, info(m)); break;
	case CTL_CONFIG: {
		char *yaml = NULL;
		if (nsbox_config_to_yaml(m->cfg, &yaml, &e) < 0)
			(void) reply_error(cfd, e, ENOMEM);
		else
			(void) reply_json(cfd, json_pack("{s:s}", "config", yaml));
		free(yaml);
		nsbox_error_free(e);
		break;
	}
	case CTL_PAUSE:
	case CTL_RESUME:
		r = h->op == CTL_PAUSE ? nsbox_sandbox_pause(m->sb, &e) : nsbox_sandbox_resume(m->sb, &e);
		pthread_mutex_lock(&m->lock);
		m->idle_paused = false;
		pthread_mutex_unlock(&m->lock);
		if (r < 0)
			(void) reply_error(cfd, e, -r);
		else
			(void) ctl_send_reply(cfd, 0, NULL);
		nsbox_error_free(e);
		write_info(m);
		break;
	case CTL_DETACH:
		pthread_mutex_lock(&m->lock);
		if (m->owner_fd >= 0)
			close(m->owner_fd);
		m->owner_fd = -1;
		pthread_mutex_unlock(&m->lock);
		(void) ctl_send_reply(cfd, 0, NULL);
		(void) !write(m->wake[1], "i", 1);   /* the loop stops watching the owner */
		write_info(m);
		break;
	case CTL_STOP:
		/* With an id: only if it is ours (a handle stopping the sandbox
		 * it started, whose name another may have taken since). */
		if (h->argc >= 1 && v[0][0] && strcmp(v[0], nsbox_sandbox_id(m->sb))) {
			(void) refuse(cfd, ESTALE, "live", "sandbox '%s' is not the one with id %.32s", m->name, v[0]);
			break;
		}
		(void) ctl_send_reply(cfd, 0, NULL);
		(void) !write(m->wake[1], "s", 1);
		break;
	default: (void) refuse(cfd, EINVAL, "live", "unknown request %u", (unsigned) h->op);
	}
}

void serve(monitor *m, int cfd)
{
	ctl_req h;
	int fds[4] = { -1, -1, -1, -1 }, nfds = 0;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* The header comes whole (one sendmsg), with its fds. */
	ssize_t n = readable_by(cfd, &start) ? fd_recv(cfd, &h, sizeof(h), fds, 4, &nfds, MSG_DONTWAIT) : -1;
	char *body = NULL;
	char **v = NULL;
	if (n != (ssize_t) sizeof(h) || h.magic != CTL_MAGIC)
		goto out;
	int want = fds_wanted(&h);
	if (h.len > CTL_MAX || h.op == 0 || h.op >= CTL_OP_MAX || (h.flags & ~(uint32_t) CTL_FLAGS_ALL) ||
	    (want >= 0 && nfds != want) || (want < 0 && nfds > 1)) {
		(void) refuse(cfd, EPROTO, "live", "a malformed request");
		goto out;
	}
	body = malloc((size_t) h.len + 1);
	if (!body || read_by(cfd, body, h.len, &start) < 0)
		goto out;
	body[h.len] = '\0';
	v = split(body, &h);
	if (!v) {
		(void) refuse(cfd, EPROTO, "live", "a malformed request");
		goto out;
	}
	dispatch(m, cfd, &h, v, fds, nfds);
out:
	free(v);
	free(body);
	for (int i = 0; i < nfds; i++)
		(void) close(fds[i]);
}


