/* Compiling a profile to BPF with libseccomp (in the parent: the child only
 * calls seccomp(2)), and caching the result keyed by the profile's text so
 * a repeated run does not compile again. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "seccomp/seccomp.h"

static uint32_t scmp_action(const sc_rule *r, bool notify)
{
	switch (r->action) {
	case SC_ALLOW: return SCMP_ACT_ALLOW;
	case SC_ERRNO: return notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO((uint32_t) r->errnum);
	case SC_KILL: return SCMP_ACT_KILL_PROCESS;
	case SC_LOG: return SCMP_ACT_LOG;
	}
	return SCMP_ACT_KILL_PROCESS;
}

static enum scmp_compare scmp_op(enum sc_op op)
{
	static const enum scmp_compare map[] = {
		[SC_EQ] = SCMP_CMP_EQ, [SC_NE] = SCMP_CMP_NE, [SC_LT] = SCMP_CMP_LT, [SC_LE] = SCMP_CMP_LE,
		[SC_GT] = SCMP_CMP_GT, [SC_GE] = SCMP_CMP_GE, [SC_MASKED_EQ] = SCMP_CMP_MASKED_EQ,
	};
	return map[op];
}

/* which: 0 all rules, 1 only unconditional ones, 2 only conditional ones */
static int add_rules(scmp_filter_ctx ctx, const sc_rule *rules, size_t n, const char *origin,
                     const char *layer, bool notify, int which, nsbox_error **err)
{
	for (size_t i = 0; i < n; i++) {
		const sc_rule *r = &rules[i];
		if ((which == 1 && r->n_args) || (which == 2 && !r->n_args))
			continue;
		struct scmp_arg_cmp cmp[6];
		for (size_t a = 0; a < r->n_args; a++) {
			const sc_arg *x = &r->args[a];
			cmp[a] = x->op == SC_MASKED_EQ
				? (struct scmp_arg_cmp){ x->index, SCMP_CMP_MASKED_EQ, x->mask, x->value }
				: (struct scmp_arg_cmp){ x->index, scmp_op(x->op), x->value, 0 };
		}
		for (char **s = r->syscalls; s && *s; s++) {
			int nr = seccomp_syscall_resolve_name(*s);
			if (nr == __NR_SCMP_ERROR)
				continue;   /* unknown to this libseccomp: the default applies */
			int rr = seccomp_rule_add_array(ctx, scmp_action(r, notify), nr, (unsigned) r->n_args, cmp);
			/* -EACCES: the rule's action is the default one; nothing to add. */
			if (rr < 0 && rr != -EACCES)
				return nsbox_err(err, -rr, "seccomp", "compile %s: %s rule %zu for '%s'", origin,
				                 layer, i + 1, *s);
		}
	}
	return 0;
}

/* Export a context's BPF into memory. */
static int export(scmp_filter_ctx ctx, sc_layer *out, nsbox_error **err)
{
	_cleanup_close_ int fd = memfd_create("nsbox-bpf", MFD_CLOEXEC);
	if (fd < 0)
		return nsbox_err(err, errno, "seccomp", "create a memfd for the filter");
	int r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return nsbox_err(err, -r, "seccomp", "export the filter");
	off_t size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t) sizeof(struct sock_filter) || size > 65536 * (off_t) sizeof(struct sock_filter))
		return nsbox_err(err, EINVAL, "seccomp", "export the filter: unexpected size %lld", (long long) size);
	out->insns = malloc((size_t) size);
	if (!out->insns)
		return nsbox_err(err, ENOMEM, "seccomp", "export the filter");
	if (pread(fd, out->insns, (size_t) size, 0) != size)
		return nsbox_err(err, errno, "seccomp", "read the exported filter");
	out->len = (unsigned short) (size / (off_t) sizeof(struct sock_filter));
	return 0;
}

static int build_layer(const sc_profile *p, bool allow_layer, bool notify, sc_layer *out,
                       nsbox_error **err)
{
	uint32_t def = SCMP_ACT_ALLOW;
	if (allow_layer) {
		sc_rule d = { .action = p->default_action, .errnum = p->default_errno };
		def = scmp_action(&d, notify);
	}
	scmp_filter_ctx ctx = seccomp_init(def);
	if (!ctx)
		return nsbox_err(err, ENOMEM, "seccomp", "create a filter");
	int r = 0;
	/* Foreign ABIs (i386 through int 0x80, x32) are killed unless listed. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0)
		r = nsbox_err(err, EINVAL, "seccomp", "set filter attributes");
	/* A binary tree of syscall numbers: a few comparisons per call
	 * instead of a scan of hundreds (libseccomp 2.5). */
	(void) seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	for (size_t i = 0; r == 0 && i < p->n_arches; i++) {
		int a = seccomp_arch_add(ctx, p->arches[i]);
		if (a < 0 && a != -EEXIST)
			r = nsbox_err(err, -a, "seccomp", "add architecture %#x", p->arches[i]);
	}
	/* Unconditional denials cannot clash with an allow, so they live in
	 * the allow layer (whose errno answers are the ones --seccomp-log can
	 * observe); only conditional denials need the second layer. */
	if (r == 0 && allow_layer)
		r = add_rules(ctx, p->allow, p->n_allow, p->name, "allow", notify, 0, err) ?:
		    add_rules(ctx, p->deny, p->n_deny, p->name, "deny", notify, 1, err);
	else if (r == 0)
		r = add_rules(ctx, p->deny, p->n_deny, p->name, "deny", false, 2, err);
	if (r == 0)
		r = export(ctx, out, err);
	seccomp_release(ctx);
	return r;
}

int sc_compile(const sc_profile *p, bool notify, sc_bpf *out, nsbox_error **err)
{
	*out = (sc_bpf){ 0 };
	int r = build_layer(p, true, notify, &out->layers[0], err);
	if (r == 0)
		out->n = 1;
	bool conditional = false;
	for (size_t i = 0; i < p->n_deny; i++)
		conditional |= p->deny[i].n_args > 0;
	if (r == 0 && conditional) {
		r = build_layer(p, false, notify, &out->layers[1], err);
		if (r == 0)
			out->n = 2;
	}
	if (r < 0)
		sc_bpf_free(out);
	out->notify = r == 0 && notify;
	return r;
}

void sc_bpf_free(sc_bpf *b)
{
	for (int i = 0; i < 2; i++) {
		free(b->layers[i].insns);
		b->layers[i].insns = NULL;
	}
	b->n = 0;
}
