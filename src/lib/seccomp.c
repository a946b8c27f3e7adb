/* Turning --seccomp into installed filters. */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "error.h"
#include "seccomp.h"

int sc_prepare(const char *spec, bool notify, sc_bpf *out, char **label, bool *cached,
               nsbox_error **err)
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
	if (!getenv("NSBOX_SECCOMP_NO_CACHE") && sc_cache_load(key, text, len, out) == 0) {
		*cached = true;
		return 0;
	}
	sc_profile *p = NULL;
	r = sc_profile_parse(text, len, origin, &p, err);
	if (r == 0)
		r = sc_compile(p, notify, out, err);
	sc_profile_free(p);
	if (r == 0)
		sc_cache_store(key, text, len, out);
	return r;
}

int sc_install(const sc_bpf *b)
{
	for (int i = 0; i < b->n; i++) {
		struct sock_fprog prog = { .len = b->layers[i].len, .filter = b->layers[i].insns };
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			return -errno;
	}
	return 0;
}
