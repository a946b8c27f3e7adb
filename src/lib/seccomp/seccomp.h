/* Seccomp filters: preparing them in the parent (profile -> BPF, cached)
 * and installing them in the child as the last step before execve. */
#ifndef NSBOX_SECCOMP_H
#define NSBOX_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>

#include "nsbox.h"
#include "seccomp/seccomp_profile.h"

typedef struct sc_layer {
	struct sock_filter *insns;
	unsigned short len;
} sc_layer;

/* Installed in order; the allow layer first, the deny layer last (so that
 * its errno is the one reported when both layers return an errno). */
typedef struct sc_bpf {
	sc_layer layers[2];
	int n;
	bool notify;          /* layer 0 reports its denials to a listener */
} sc_bpf;

/* --seccomp-log: how the supervisor answers a notified system call. */
typedef struct sc_answer {
	int nr;
	int errnum;
} sc_answer;

typedef struct sc_answers {
	sc_answer *v;
	size_t n;
	int default_errno;
} sc_answers;

/* The errno each unconditional denial of layer 0 returns, by syscall number. */
int sc_answers_build(const sc_profile *p, sc_answers *out);
int sc_answer_for(const sc_answers *a, int nr);

int sc_compile(const sc_profile *p, bool notify, sc_bpf *out, nsbox_error **err);
void sc_bpf_free(sc_bpf *b);

/* From --seccomp's value to BPF: a built-in name, a file (nsbox YAML or
 * Docker JSON) or "unconfined" (out->n == 0). Uses the cache when it can.
 * *label is what the result record shows. */
int sc_prepare(const char *spec, bool notify, sc_bpf *out, char **label, bool *cached,
               sc_answers *answers, nsbox_error **err);

/* Child side: install the layers (no_new_privs must be set). With
 * b->notify, *listener receives layer 0's notification fd. */
int sc_install(const sc_bpf *b, int *listener);

/* seccomp_cache.c */
uint64_t sc_cache_key(const char *text, size_t len, bool notify);
int sc_cache_load(uint64_t key, const char *text, size_t len, sc_bpf *out);
void sc_cache_store(uint64_t key, const char *text, size_t len, const sc_bpf *b);

#endif
