/* Background processes of a long-lived sandbox (nsbox_process_*): a
 * governed run (nsbox_run, an exec) in a thread of its own, its output kept
 * in a bounded ring per stream while it runs, its record when it ends. A
 * server or a watcher started this way outlives the call that started it
 * and ends with the sandbox (or with nsbox_process_kill()). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/error.h"
#include "base/strv.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

#define LOG_DEFAULT (1u << 20)

typedef struct ring {
	char *data;
	size_t cap, len, pos;   /* the last `len` bytes end at pos */
	uint64_t total;
} ring;

struct nsbox_process {
	pthread_mutex_t lock;
	pthread_cond_t ended;
	pthread_t thread;
	char id[17];
	bool remote;            /* the monitor's process of this id (sb remote) */
	nsbox_sandbox *sb;
	nsbox_cancel *cancel;
	strv argv, envp;
	bool env, env_add;
	char *workdir;
	uint64_t timeout_ms;
	ring out[2];
	bool running;
	nsbox_result *result;
	nsbox_error *error;
	int rc;
};

static void ring_feed(ring *r, const char *p, size_t n)
{
	r->total += n;
	if (!r->cap)
		return;
	if (n >= r->cap) {   /* only the last cap bytes matter */
		memcpy(r->data, p + n - r->cap, r->cap);
		r->pos = 0;
		r->len = r->cap;
		return;
	}
	size_t first = r->cap - r->pos < n ? r->cap - r->pos : n;
	memcpy(r->data + r->pos, p, first);
	memcpy(r->data, p + first, n - first);
	r->pos = (r->pos + n) % r->cap;
	r->len = r->len + n > r->cap ? r->cap : r->len + n;
}

static char *ring_text(const ring *r, size_t *len)
{
	char *t = malloc(r->len + 1);
	if (!t)
		return NULL;
	size_t start = (r->pos + r->cap - r->len) % (r->cap ? r->cap : 1);
	for (size_t i = 0; r->cap && i < r->len; i++)
		t[i] = r->data[(start + i) % r->cap];
	t[r->len] = '\0';
	*len = r->len;
	return t;
}

static void on_output(void *userdata, int stream, const char *data, size_t len)
{
	nsbox_process *p = userdata;
	pthread_mutex_lock(&p->lock);
	ring_feed(&p->out[stream == 2], data, len);
	pthread_mutex_unlock(&p->lock);
}

static void *run_thread(void *arg)
{
	nsbox_process *p = arg;
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_CAPTURE | (p->env_add ? NSBOX_EXEC_ENV_ADD : 0),
		.sandbox = p->sb,
		.argv = (const char *const *) p->argv.v,
		.envp = p->env ? (const char *const *) (p->envp.v ? p->envp.v : (char *[]){ NULL }) : NULL,
		.workdir = p->workdir,
		.timeout_ms = p->timeout_ms ? p->timeout_ms : NSBOX_TIMEOUT_NONE,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
		.on_output = on_output,
		.output_userdata = p,
		.cancel = p->cancel,
	};
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int rc = nsbox_run(&o, &res, &e);
	pthread_mutex_lock(&p->lock);
	p->result = res;
	p->error = e;
	p->rc = rc;
	p->running = false;
	pthread_cond_broadcast(&p->ended);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int nsbox_process_start(nsbox_sandbox *sb, const nsbox_process_options *o, nsbox_process **out, nsbox_error **err)
{
	if (!sb || !o || !out || o->version < 1 || o->version > NSBOX_PROCESS_OPTIONS_VERSION || !o->argv ||
	    !o->argv[0] || (o->flags & ~NSBOX_EXEC_ENV_ADD) || (o->workdir && o->workdir[0] != '/'))
		return nsbox_err(err, EINVAL, "process", "start a process: invalid options");
	if (sb->remote) {
		nsbox_process *p = calloc(1, sizeof(*p));
		if (!p)
			return nsbox_err(err, ENOMEM, "process", "start a process");
		int r = remote_process_start(sb, o, p->id, err);
		if (r < 0) {
			free(p);
			return r;
		}
		p->remote = true;
		p->sb = sb;
		*out = p;
		return 0;
	}
	if (!sandbox_config(sb))
		return nsbox_err_invalid(err, "process", "start a process: not a long-lived sandbox (NSBOX_SPAWN_KEEP)");
	nsbox_process *p = calloc(1, sizeof(*p));
	if (!p)
		return nsbox_err(err, ENOMEM, "process", "start a process");
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->ended, NULL);
	p->sb = sb;
	p->timeout_ms = o->timeout_ms;
	p->env = o->envp != NULL;
	p->env_add = o->flags & NSBOX_EXEC_ENV_ADD;
	unsigned char raw[8] = { 0 };
	(void) getrandom(raw, sizeof(raw), GRND_NONBLOCK);
	for (int i = 0; i < 8; i++)
		snprintf(p->id + 2 * i, 3, "%02x", raw[i]);
	size_t cap = o->log_bytes ? o->log_bytes : LOG_DEFAULT;
	int r = nsbox_cancel_new(&p->cancel, err);
	for (const char *const *a = o->argv; r == 0 && *a; a++)
		r = strv_push(&p->argv, *a) < 0 ? -ENOMEM : 0;
	for (const char *const *e = o->envp; r == 0 && e && *e; e++)
		r = strv_push(&p->envp, *e) < 0 ? -ENOMEM : 0;
	if (r == 0 && o->workdir && !(p->workdir = strdup(o->workdir)))
		r = -ENOMEM;
	for (int i = 0; r == 0 && i < 2; i++) {
		p->out[i].cap = cap;
		if (!(p->out[i].data = malloc(cap)))
			r = -ENOMEM;
	}
	if (r == 0) {
		p->running = true;
		int t = pthread_create(&p->thread, NULL, run_thread, p);
		if (t != 0) {
			p->running = false;
			r = nsbox_err(err, t, "process", "start a process: create its thread");
		}
	} else if (r == -ENOMEM) {
		r = nsbox_err(err, ENOMEM, "process", "start a process");
	}
	if (r < 0) {
		p->thread = 0;
		nsbox_process_free(p);
		return r;
	}
	*out = p;
	return 0;
}

int nsbox_process_attach(nsbox_sandbox *sb, const char *id, nsbox_process **out, nsbox_error **err)
{
	if (!sb || !id || !out)
		return nsbox_err(err, EINVAL, "process", "attach: missing argument");
	if (!sb->remote)
		return nsbox_err(err, ENOTSUP, "process", "attach: only a started sandbox's processes have ids to "
		                 "attach to (nsbox_live_start)");
	bool running;
	if (strlen(id) != 16 || remote_process_state(sb, id, &running) < 0)
		return nsbox_err_invalid(err, "process", "no process '%.40s' in sandbox '%s'", id, nsbox_live_name(sb));
	nsbox_process *p = calloc(1, sizeof(*p));
	if (!p)
		return nsbox_err(err, ENOMEM, "process", "attach");
	memcpy(p->id, id, 17);
	p->remote = true;
	p->sb = sb;
	*out = p;
	return 0;
}

int nsbox_process_list(nsbox_sandbox *sb, char **json, nsbox_error **err)
{
	if (!sb || !json)
		return nsbox_err(err, EINVAL, "process", "list: missing argument");
	if (!sb->remote)
		return nsbox_err(err, ENOTSUP, "process", "list: a sandbox of nsbox_spawn() keeps no list (its "
		                 "caller has the handles)");
	return remote_process_list(sb, json, err);
}

const char *nsbox_process_id(const nsbox_process *p) { return p ? p->id : NULL; }

bool nsbox_process_running(nsbox_process *p)
{
	if (!p)
		return false;
	if (p->remote) {
		bool running = false;
		(void) remote_process_state(p->sb, p->id, &running);
		return running;
	}
	pthread_mutex_lock(&p->lock);
	bool r = p->running;
	pthread_mutex_unlock(&p->lock);
	return r;
}

int nsbox_process_logs(nsbox_process *p, int stream, char **out, size_t *len, uint64_t *total, nsbox_error **err)
{
	if (!p || !out || !len || (stream != 1 && stream != 2))
		return nsbox_err(err, EINVAL, "process", "logs: invalid arguments");
	if (p->remote)
		return remote_process_logs(p->sb, p->id, stream, out, len, total, err);
	pthread_mutex_lock(&p->lock);
	*out = ring_text(&p->out[stream == 2], len);
	if (total)
		*total = p->out[stream == 2].total;
	pthread_mutex_unlock(&p->lock);
	return *out ? 0 : nsbox_err(err, ENOMEM, "process", "logs");
}

int nsbox_process_kill(nsbox_process *p, int sig)
{
	if (!p)
		return -EINVAL;
	if (p->remote)
		return remote_process_kill(p->sb, p->id, sig);
	if (!nsbox_process_running(p))
		return -ESRCH;
	if (sig == SIGKILL) {
		nsbox_cancel_fire(p->cancel);
		return 0;
	}
	return nsbox_cancel_signal(p->cancel, sig);
}

int nsbox_process_wait(nsbox_process *p, uint64_t timeout_ms, nsbox_result **out, nsbox_error **err)
{
	if (!p)
		return nsbox_err(err, EINVAL, "process", "wait: no process");
	if (p->remote)
		return remote_process_wait(p->sb, p->id, timeout_ms, out, err);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t) (timeout_ms / 1000);
	until.tv_nsec += (long) (timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->lock);
	int w = 0;
	while (p->running && w == 0)
		w = timeout_ms ? pthread_cond_timedwait(&p->ended, &p->lock, &until)
		               : pthread_cond_wait(&p->ended, &p->lock);
	bool running = p->running;
	pthread_mutex_unlock(&p->lock);
	if (running)
		return nsbox_err(err, ETIMEDOUT, "process", "wait for process %s", p->id);
	if (p->rc < 0 && !p->result)
		return nsbox_err(err, -p->rc, "process", "process %s: %s", p->id,
		                 p->error ? nsbox_error_message(p->error) : "it did not run");
	if (out) {
		char *json = NULL;
		/* A copy for the caller: the process keeps its own. */
		if (nsbox_result_to_json(p->result, &json, err) < 0)
			return -ENOMEM;
		int r = result_from_json(json, out, err);
		free(json);
		return r;
	}
	return 0;
}

void nsbox_process_free(nsbox_process *p)
{
	if (!p)
		return;
	if (p->remote) {   /* the process is the sandbox's: it runs on */
		free(p);
		return;
	}
	if (p->thread) {
		if (nsbox_process_running(p))
			nsbox_cancel_fire(p->cancel);
		pthread_join(p->thread, NULL);
	}
	nsbox_result_free(p->result);
	nsbox_error_free(p->error);
	nsbox_cancel_free(p->cancel);
	strv_clear(&p->argv);
	strv_clear(&p->envp);
	free(p->workdir);
	for (int i = 0; i < 2; i++)
		free(p->out[i].data);
	pthread_cond_destroy(&p->ended);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
