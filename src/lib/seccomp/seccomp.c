/* Turning --seccomp into installed filters. */
#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "seccomp/seccomp.h"

int sc_answers_build(const sc_profile *p, sc_answers *out)
{
	*out = (sc_answers){ .default_errno = p->default_errno };
	for (size_t i = 0; i < p->n_deny; i++) {
		const sc_rule *r = &p->deny[i];
		if (r->n_args || r->action != SC_ERRNO)
			continue;
		for (char **s = r->syscalls; s && *s; s++) {
			int nr = seccomp_syscall_resolve_name(*s);
			if (nr == __NR_SCMP_ERROR)
				continue;
			sc_answer *v = realloc(out->v, (out->n + 1) * sizeof(*v));
			if (!v)
				return -ENOMEM;
			out->v = v;
			v[out->n++] = (sc_answer){ nr, r->errnum };
		}
	}
	return 0;
}

int sc_answer_for(const sc_answers *a, int nr)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].nr == nr)
			return a->v[i].errnum;
	return a->default_errno;
}

int sc_prepare(const char *spec, bool notify, sc_bpf *out, char **label, bool *cached,
               sc_answers *answers, nsbox_error **err)
{
	*out = (sc_bpf){ 0 };
	*cached = false;
	_cleanup_free_ char *text = NULL, *origin = NULL;
	size_t len = 0;
	int r = sc_profile_load_text(spec, &text, &len, &origin, err);
	if (r < 0)
		return r;
	*label = strdup(spec);
	if (!*label)
		return nsbox_err(err, ENOMEM, "seccomp", "prepare the filter");
	if (!text)
		return 0;   /* unconfined */
	uint64_t key = sc_cache_key(text, len, notify);
	/* --seccomp-log answers for the filter, so it needs the profile itself. */
	if (!notify && !getenv("NSBOX_SECCOMP_NO_CACHE") && sc_cache_load(key, text, len, out) == 0) {
		*cached = true;
		return 0;
	}
	sc_profile *p = NULL;
	r = sc_profile_parse(text, len, origin, &p, err);
	if (r == 0 && notify && sc_answers_build(p, answers) < 0)
		r = nsbox_err(err, ENOMEM, "seccomp", "prepare the filter");
	if (r == 0 && notify && sc_cache_load(key, text, len, out) == 0) {
		*cached = true;
		out->notify = true;
		sc_profile_free(p);
		return 0;
	}
	if (r == 0)
		r = sc_compile(p, notify, out, err);
	sc_profile_free(p);
	if (r == 0)
		sc_cache_store(key, text, len, out);
	return r;
}

int sc_install(const sc_bpf *b, int *listener)
{
	for (int i = 0; i < b->n; i++) {
		struct sock_fprog prog = { .len = b->layers[i].len, .filter = b->layers[i].insns };
		bool listen = b->notify && i == 0;
		long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		                 listen ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
		if (r < 0)
			return -errno;
		if (listen)
			*listener = (int) r;
	}
	return 0;
}
