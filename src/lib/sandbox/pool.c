/* The warm pool: sandboxes spawned ahead of demand, each handed one request
 * on its stdin and then the caller's to wait for and free (never reused).
 *
 * One thread per pool spawns: it is the parent of every ready sandbox, so it
 * lives as long as the pool (PR_SET_PDEATHSIG, set in the child, fires when
 * the parent *thread* exits). Taking is a pop under the lock; the thread is
 * woken to spawn the replacement.
 *
 * A spawn costs both CPUs of a small machine for a few ms: made while a
 * taken sandbox runs, it slows that run, the one whose latency the pool is
 * for (and the spawn's fork of this process stalls its other threads' memory
 * calls meanwhile). So while sandboxes are still ready, the replacement
 * waits until the taken runs are given back with nsbox_pool_release() and
 * POOL_SETTLE_MS more (the caller goes on with its result meanwhile),
 * POOL_DEFER_MS at most from when the pool fell short; an empty pool
 * refills at once. The thread frees what is given back, so that its
 * teardown (the pid namespace's, the janitor's) is not on the caller's
 * path either. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "code/lang.h"
#include "code/warm.h"
#include "config/conf.h"
#include "sandbox/sandbox.h"

#define POOL_FAILURES 3
#define POOL_DEFER_MS 50      /* the longest a refill waits for taken runs to end */
#define POOL_SETTLE_MS 5      /* ...and after the last was given back */
#define POOL_INFLIGHT_MAX 16  /* taken runs waited for so; more are not */

typedef struct warm {
	nsbox_sandbox *sb;
	int req_fd;     /* our end of its stdin */
} warm;

struct nsbox_pool {
	pthread_mutex_t lock;
	pthread_cond_t changed;     /* a sandbox became ready, was taken, or stop */
	nsbox_config *cfg;          /* what each sandbox is spawned from (ours) */
	/* A pool of code runs (options version 2): the language, the run's own
	 * configuration without the hook (a cold run's, for the record and for
	 * calls the warm sandbox cannot serve) and the modules preloaded. */
	const code_lang *lang;
	nsbox_config *run_cfg;
	strv preload;
	uint32_t size;
	warm ready[NSBOX_POOL_MAX_SIZE];   /* a FIFO: the oldest is taken first */
	uint32_t n_ready;
	bool stop;
	bool thread_started;
	pthread_t thread;
	int spawn_errno;            /* the last spawn's failure, 0 after a success */
	unsigned failures;          /* spawns failed in a row */
	nsbox_error *spawn_err;
	uint64_t spawned, taken;
	/* Taken and not yet given back: compared, never dereferenced (one
	 * freed by its caller instead stays until its POOL_DEFER_MS is up). */
	const nsbox_sandbox *inflight[POOL_INFLIGHT_MAX];
	struct timespec inflight_at[POOL_INFLIGHT_MAX];   /* ...when each was taken */
	uint32_t n_inflight;
	/* When the pool last fell below its size, and the last release; zero
	 * (the clock's start, long past) before the first. */
	struct timespec short_since, released_at;
	nsbox_sandbox **released;   /* given back, for the thread to free */
	size_t n_released, cap_released;
};

static int64_t ms_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t) (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static void inflight_drop(nsbox_pool *p, uint32_t i)
{
	p->n_inflight--;
	p->inflight[i] = p->inflight[p->n_inflight];
	p->inflight_at[i] = p->inflight_at[p->n_inflight];
}

/* With the lock held: whether the refill should wait for taken runs, and
 * if so wait until a take, a release or stop changes things, or the last
 * release has had POOL_SETTLE_MS. Never past POOL_DEFER_MS from when the
 * pool fell short (not from each take or release: calls in a row cannot
 * hold the refill off). The caller looks again afterwards. */
static bool defer_refill(nsbox_pool *p)
{
	if (p->n_ready == 0)
		return false;
	int64_t left = POOL_DEFER_MS - ms_since(&p->short_since);
	if (left <= 0)
		return false;
	for (uint32_t i = 0; i < p->n_inflight;) {
		if (ms_since(&p->inflight_at[i]) >= POOL_DEFER_MS)
			inflight_drop(p, i);   /* freed without a release, or long */
		else
			i++;
	}
	if (p->n_inflight == 0) {
		int64_t settle = POOL_SETTLE_MS - ms_since(&p->released_at);
		if (settle <= 0)
			return false;
		if (settle < left)
			left = settle;
	}
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long) (left % 1000) * 1000000L;
	until.tv_sec += (time_t) (left / 1000) + until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	(void) pthread_cond_timedwait(&p->changed, &p->lock, &until);
	return true;
}

/* Spawn one sandbox whose stdin is one end of a socketpair (a socket, not a
 * pipe: writing to a payload that died is EPIPE, never SIGPIPE). */
static int spawn_one(const nsbox_config *cfg, warm *w, nsbox_error **err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return nsbox_err(err, errno, "pool", "create a request channel");
	(void) shutdown(sv[0], SHUT_WR);   /* the payload only reads */
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		/* The channel is the pool's own, written while nobody waits. */
		.flags = NSBOX_SPAWN_CAPTURE | NSBOX_SPAWN_DIRECT_FDS,
		.config = cfg,
		.stdin_fd = sv[0],
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	int r = nsbox_spawn(&o, &w->sb, err);
	close(sv[0]);
	if (r < 0) {
		close(sv[1]);
		return r;
	}
	w->req_fd = sv[1];
	return 0;
}

static void warm_discard(warm *w)
{
	if (w->req_fd >= 0)
		close(w->req_fd);
	nsbox_sandbox_free(w->sb);   /* kills it, waits until nothing is left */
	w->sb = NULL;
	w->req_fd = -1;
}

static void *refill(void *arg)
{
	nsbox_pool *p = arg;
	unsigned backoff_ms = 0;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->n_ready >= p->size && p->n_released == 0)
			pthread_cond_wait(&p->changed, &p->lock);
		if (p->stop)
			break;
		if (p->n_released) {   /* given back: free it, then look again */
			nsbox_sandbox *sb = p->released[--p->n_released];
			pthread_mutex_unlock(&p->lock);
			nsbox_sandbox_free(sb);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		if (p->n_ready >= p->size || defer_refill(p))
			continue;
		pthread_mutex_unlock(&p->lock);
		if (backoff_ms) {   /* a failing spawn is retried, not spun on */
			struct timespec ts = { backoff_ms / 1000, (long) (backoff_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
		warm w = { NULL, -1 };
		nsbox_error *e = NULL;
		int r = spawn_one(p->cfg, &w, &e);
		pthread_mutex_lock(&p->lock);
		if (r < 0) {
			nsbox_error_free(p->spawn_err);
			p->spawn_err = e;
			p->spawn_errno = -r;
			p->failures++;
			backoff_ms = backoff_ms ? (backoff_ms * 2 > 2000 ? 2000 : backoff_ms * 2) : 50;
		} else if (p->stop) {
			pthread_mutex_unlock(&p->lock);
			warm_discard(&w);
			pthread_mutex_lock(&p->lock);
		} else {
			p->ready[p->n_ready++] = w;
			p->spawned++;
			p->spawn_errno = 0;
			p->failures = 0;
			backoff_ms = 0;
		}
		pthread_cond_broadcast(&p->changed);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int pool_configs(nsbox_pool *p, const nsbox_pool_options *o, nsbox_error **err)
{
	const char *lang = o->version >= 2 ? o->lang : NULL;
	const char *const *preload = o->version >= 2 ? o->preload : NULL;
	if (!lang) {
		if (preload && preload[0])
			return nsbox_err_invalid(err, "pool", "create pool: preload needs a language");
		return config_copy(&p->cfg, o->config) < 0 ? nsbox_err(err, ENOMEM, "pool", "create pool") : 0;
	}
	p->lang = code_lang_find(lang);
	if (!p->lang)
		return nsbox_err_invalid(err, "pool", "create pool: unknown language '%s' (%s)", lang, code_lang_names());
	for (size_t i = 0; preload && preload[i]; i++)
		if (strv_push(&p->preload, preload[i]) < 0)
			return nsbox_err(err, ENOMEM, "pool", "create pool");
	int r = code_config(o->config, p->lang, NULL, 0, &p->run_cfg, err);
	r = r ?: code_warm_config(p->run_cfg, p->lang, preload, &p->cfg, err);
	if (r < 0)
		return r;
	/* The warm sandbox gets its code on stdin: the hook creates the file
	 * (O_EXCL), so none may be there before. */
	config_drop_file(p->cfg, p->lang->file);
	return 0;
}

int nsbox_pool_new(const nsbox_pool_options *o, nsbox_pool **out, nsbox_error **err)
{
	if (!o || !out || !o->config || o->version < 1 || o->version > NSBOX_POOL_OPTIONS_VERSION)
		return nsbox_err(err, EINVAL, "pool", "create pool: missing argument");
	if (o->size < 1 || o->size > NSBOX_POOL_MAX_SIZE)
		return nsbox_err(err, EINVAL, "pool", "create pool: size %u is not between 1 and %d", o->size,
		                 NSBOX_POOL_MAX_SIZE);
	nsbox_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return nsbox_err(err, ENOMEM, "pool", "create pool");
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* defer_refill's deadline */
	pthread_cond_init(&p->changed, &ca);
	pthread_condattr_destroy(&ca);
	p->size = o->size;
	int r = pool_configs(p, o, err);
	if (r < 0) {
		nsbox_pool_free(p);
		return r;
	}
	r = pthread_create(&p->thread, NULL, refill, p);
	if (r != 0) {
		nsbox_pool_free(p);
		return nsbox_err(err, r, "pool", "start the refill thread");
	}
	p->thread_started = true;
	*out = p;
	return 0;
}

const code_lang *pool_lang(const nsbox_pool *p) { return p->lang; }
const nsbox_config *pool_run_config(const nsbox_pool *p) { return p->run_cfg ? p->run_cfg : p->cfg; }
const strv *pool_preload(const nsbox_pool *p) { return &p->preload; }

/* The request: written whole, then end of file. A payload that died or
 * closed its stdin fails the write: its wait reports what happened. The
 * end of file is a shutdown, not only our close: a sandbox the refill
 * thread spawns meanwhile holds a copy of this fd until its setup closes
 * what it inherited, and the payload would wait for that copy too. */
static void hand_over(int fd, const void *data, size_t len)
{
	const char *d = data;
	while (len) {
		ssize_t n = send(fd, d, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		d += n;
		len -= (size_t) n;
	}
	(void) shutdown(fd, SHUT_WR);
	close(fd);
}

/* Whether a ready sandbox already ended (its setup failed, or something
 * killed it while it waited): handing it out would only report that. */
static bool ended(const warm *w)
{
	struct pollfd pfd = { .fd = nsbox_sandbox_pidfd(w->sb), .events = POLLIN };
	return poll(&pfd, 1, 0) == 1;
}

int nsbox_pool_take(nsbox_pool *p, const void *data, size_t len, nsbox_sandbox **out, nsbox_error **err)
{
	if (!p || !out || (!data && len))
		return nsbox_err(err, EINVAL, "pool", "take a sandbox: missing argument");
	warm w;
	for (unsigned dead = 0;; dead++) {
		pthread_mutex_lock(&p->lock);
		/* A spawn may fail once for a passing reason (a cgroup removed
		 * under it): a take fails after POOL_FAILURES in a row. */
		while (!p->stop && p->n_ready == 0 && p->failures < POOL_FAILURES)
			pthread_cond_wait(&p->changed, &p->lock);
		if (p->stop || p->n_ready == 0) {
			int r = -(p->stop ? ESHUTDOWN : p->spawn_errno);
			if (p->stop || !p->spawn_err || !err) {
				r = nsbox_err(err, -r, "pool", "take a sandbox");
			} else {   /* the spawn's own error says why */
				*err = p->spawn_err;
				p->spawn_err = NULL;
			}
			/* The next take waits for the next attempt instead. */
			if (!p->stop)
				p->failures = 0;
			pthread_mutex_unlock(&p->lock);
			return r;
		}
		w = p->ready[0];
		memmove(&p->ready[0], &p->ready[1], (p->n_ready - 1) * sizeof(warm));
		if (p->n_ready-- == p->size)
			clock_gettime(CLOCK_MONOTONIC, &p->short_since);
		/* Counted before the refill thread hears of the take (one
		 * found dead below is discarded, and forgotten at its deadline). */
		if (p->n_inflight < POOL_INFLIGHT_MAX) {
			p->inflight[p->n_inflight] = w.sb;
			clock_gettime(CLOCK_MONOTONIC, &p->inflight_at[p->n_inflight]);
			p->n_inflight++;
		}
		pthread_cond_broadcast(&p->changed);
		pthread_mutex_unlock(&p->lock);
		/* A dead one is replaced; after a few in a row it is handed out,
		 * so that its wait tells why (a setup that always fails). */
		if (dead >= 3 || !ended(&w))
			break;
		warm_discard(&w);
	}
	pthread_mutex_lock(&p->lock);
	p->taken++;
	pthread_mutex_unlock(&p->lock);

	nsbox_sandbox *sb = w.sb;
	sb->pooled = true;
	/* The run starts here: its duration, and its CPU time from the
	 * cgroup's (the start-up of a warm payload is not the code's). */
	if (sb->cg) {
		cg_stats st = { 0 };
		cgroup_counters(sb->cg, &st);
		if (st.have_cpu) {
			sb->have_cpu_base = true;
			sb->cpu_base_user_ms = st.cpu_user_ms;
			sb->cpu_base_system_ms = st.cpu_system_ms;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &sb->start);
	hand_over(w.req_fd, data, len);
	*out = sb;
	return 0;
}

int nsbox_pool_cost_get(nsbox_pool *p, nsbox_pool_cost *c)
{
	if (!p || !c)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&p->lock);
	c->ready = p->n_ready;
	c->spawned = p->spawned;
	c->taken = p->taken;
	for (uint32_t i = 0; i < p->n_ready; i++) {
		nsbox_sandbox *sb = p->ready[i].sb;
		/* the cgroup's processes and the janitor; in rlimit mode
		 * init and the payload */
		if (sb->cg) {
			cg_sample s = { 0 };
			cgroup_sample(sb->cg, &s);
			c->memory_bytes += s.memory;
			c->processes += (uint32_t) s.pids + (sb->jan.pid > 0);
		} else {
			c->processes += 2;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void nsbox_pool_release(nsbox_pool *p, nsbox_sandbox *sb)
{
	if (!sb)
		return;
	if (p) {
		pthread_mutex_lock(&p->lock);
		for (uint32_t i = 0; i < p->n_inflight; i++)
			if (p->inflight[i] == sb) {
				inflight_drop(p, i);
				break;
			}
		if (!p->stop && p->n_released == p->cap_released) {
			size_t cap = p->cap_released ? p->cap_released * 2 : 8;
			nsbox_sandbox **v = realloc(p->released, cap * sizeof(*v));
			if (v) {
				p->released = v;
				p->cap_released = cap;
			}
		}
		bool queued = !p->stop && p->n_released < p->cap_released;
		if (queued)
			p->released[p->n_released++] = sb;
		clock_gettime(CLOCK_MONOTONIC, &p->released_at);
		pthread_cond_broadcast(&p->changed);
		pthread_mutex_unlock(&p->lock);
		if (queued)
			return;
	}
	nsbox_sandbox_free(sb);   /* no pool, no room, or stopping: here and now */
}

void nsbox_pool_free(nsbox_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
	if (p->thread_started)
		pthread_join(p->thread, NULL);
	for (size_t i = 0; i < p->n_released; i++)
		nsbox_sandbox_free(p->released[i]);
	free(p->released);
	for (uint32_t i = 0; i < p->n_ready; i++)
		warm_discard(&p->ready[i]);
	nsbox_error_free(p->spawn_err);
	nsbox_config_free(p->cfg);
	nsbox_config_free(p->run_cfg);
	strv_clear(&p->preload);
	pthread_cond_destroy(&p->changed);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
