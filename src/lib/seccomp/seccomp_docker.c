/* Docker/OCI seccomp profiles (Docker's default.json format). The sandbox
 * holds no capabilities, so entries that only apply with a capability are
 * left out and those excluded with one apply; arches and minKernel are
 * honoured for this machine. Every construct we cannot honour is an error
 * that names the entry. */
#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <yaml.h>
#include <seccomp.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "seccomp/seccomp_profile.h"
#include "base/yaml_walk.h"

int sc_read_docker(yaml_document_t *doc, yaml_node_t *root, const char *origin, sc_profile *p,
                   nsbox_error **err);

typedef struct dreader {
	yaml_document_t *doc;
	const char *origin;
	sc_profile *p;
	size_t entry;           /* index in "syscalls", for messages */
	const char *first_name; /* of that entry */
} dreader;

static yaml_node_t *dnode(dreader *r, int id) { return yaml_document_get_node(r->doc, id); }

static int derr(dreader *r, const yaml_node_t *n, nsbox_error **err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int derr(dreader *r, const yaml_node_t *n, nsbox_error **err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r->first_name)
		return nsbox_err_invalid(err, "seccomp", "%s:%zu:%zu: syscalls[%zu] ('%s'...): %s", r->origin,
		                         n->start_mark.line + 1, n->start_mark.column + 1, r->entry,
		                         r->first_name, msg);
	return nsbox_err_invalid(err, "seccomp", "%s:%zu:%zu: %s", r->origin, n->start_mark.line + 1,
	                         n->start_mark.column + 1, msg);
}


static int parse_action(const char *s, enum sc_action *a)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "SCMP_ACT_ALLOW"))
		*a = SC_ALLOW;
	else if (!strcmp(s, "SCMP_ACT_ERRNO"))
		*a = SC_ERRNO;
	else if (!strcmp(s, "SCMP_ACT_KILL") || !strcmp(s, "SCMP_ACT_KILL_PROCESS") ||
	         !strcmp(s, "SCMP_ACT_KILL_THREAD"))
		*a = SC_KILL;
	else if (!strcmp(s, "SCMP_ACT_LOG"))
		*a = SC_LOG;
	else
		return -EINVAL;
	return 0;
}

static int parse_num(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-')
		return -EINVAL;
	char *e;
	*out = strtoull(s, &e, 0);
	return *e ? -EINVAL : 0;
}

/* Does the running kernel have at least version `v` ("4.8")? Docker's
 * format says so with minKernel. */
static bool kernel_at_least(const char *v)
{
	struct utsname u;
	unsigned a = 0, b = 0, x = 0, y = 0;
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &a, &b) < 1 || sscanf(v, "%u.%u", &x, &y) < 1)
		return true;
	return a > x || (a == x && b >= y);
}

static bool list_has(dreader *r, yaml_node_t *seq, const char *const *want)
{
	if (!seq || seq->type != YAML_SEQUENCE_NODE)
		return false;
	yw_items(r->doc, seq, it)
		for (const char *const *w = want; *w; w++)
			if (yw_scalar(it) && !strcmp(yw_scalar(it), *w))
				return true;
	return false;
}

static const char *const our_arches[] = { "amd64", "x86_64", "SCMP_ARCH_X86_64", NULL };

/* includes/excludes: does the entry apply to an unprivileged x86_64 sandbox? */
static int applies(dreader *r, yaml_node_t *m, bool include, bool *ok, nsbox_error **err)
{
	if (m->type != YAML_MAPPING_NODE)
		return derr(r, m, err, "'%s' must be a mapping", include ? "includes" : "excludes");
	yw_pairs(r->doc, m, k, v) {
		const char *ks = yw_scalar(k);
		bool empty = v->type == YAML_SEQUENCE_NODE && v->data.sequence.items.start == v->data.sequence.items.top;
		if (ks && !strcmp(ks, "caps")) {
			/* We grant no capability: an entry for holders of one is not for us. */
			if (include && !empty)
				*ok = false;
		} else if (ks && !strcmp(ks, "arches")) {
			bool match = list_has(r, v, our_arches);
			if (!empty && (include ? !match : match))
				*ok = false;
		} else if (ks && !strcmp(ks, "minKernel")) {
			bool at_least = yw_scalar(v) ? kernel_at_least(yw_scalar(v)) : true;
			if (include ? !at_least : at_least)
				*ok = false;
		} else {
			return derr(r, k, err, "unsupported key '%s' in %s", ks ? ks : "?", include ? "includes" : "excludes");
		}
	}
	return 0;
}

static int read_args(dreader *r, yaml_node_t *seq, sc_rule *rule, nsbox_error **err)
{
	if (seq->type != YAML_SEQUENCE_NODE)
		return derr(r, seq, err, "args must be a list");
	yw_items(r->doc, seq, it) {
		if (rule->n_args == 6)
			return derr(r, it, err, "more than 6 argument conditions");
		sc_arg *a = &rule->args[rule->n_args++];
		uint64_t value = 0, two = 0;
		const char *op = NULL;
		if (it->type != YAML_MAPPING_NODE)
			return derr(r, it, err, "an argument condition must be a mapping");
		yw_pairs(r->doc, it, k, v) {
			const char *ks = yw_scalar(k), *vs = yw_scalar(v);
			uint64_t u;
			if (ks && !strcmp(ks, "index") && parse_num(vs, &u) == 0 && u <= 5)
				a->index = (unsigned) u;
			else if (ks && !strcmp(ks, "value") && parse_num(vs, &value) == 0)
				;
			else if (ks && !strcmp(ks, "valueTwo") && parse_num(vs, &two) == 0)
				;
			else if (ks && !strcmp(ks, "op") && vs)
				op = vs;
			else
				return derr(r, k, err, "unsupported argument condition '%s: %s'", ks ? ks : "?", vs ? vs : "?");
		}
		static const struct { const char *n; enum sc_op op; } map[] = {
			{ "SCMP_CMP_EQ", SC_EQ }, { "SCMP_CMP_NE", SC_NE }, { "SCMP_CMP_LT", SC_LT },
			{ "SCMP_CMP_LE", SC_LE }, { "SCMP_CMP_GT", SC_GT }, { "SCMP_CMP_GE", SC_GE },
			{ "SCMP_CMP_MASKED_EQ", SC_MASKED_EQ },
		};
		size_t i = 0;
		while (op && i < ARRAY_SIZE(map) && strcmp(map[i].n, op))
			i++;
		if (!op || i == ARRAY_SIZE(map))
			return derr(r, it, err, "unsupported op '%s'", op ? op : "(none)");
		a->op = map[i].op;
		/* Docker: value is the mask and valueTwo the datum for MASKED_EQ. */
		a->value = a->op == SC_MASKED_EQ ? two : value;
		a->mask = a->op == SC_MASKED_EQ ? value : 0;
	}
	return 0;
}

static int read_entry(dreader *r, yaml_node_t *m, nsbox_error **err)
{
	if (m->type != YAML_MAPPING_NODE)
		return derr(r, m, err, "a syscalls entry must be a mapping");
	sc_rule rule = { .action = SC_ALLOW, .errnum = r->p->default_errno };
	bool ok = true, have_action = false;
	yaml_node_t *names = NULL;
	int rr = 0;
	yw_pairs(r->doc, m, k, v) {
		const char *ks = yw_scalar(k);
		if (ks && (!strcmp(ks, "names") || !strcmp(ks, "name")))
			names = v;
	}
	if (!names)
		return derr(r, m, err, "an entry needs 'names'");
	r->first_name = names->type == YAML_SEQUENCE_NODE && names->data.sequence.items.start < names->data.sequence.items.top
		? yw_scalar(dnode(r, *names->data.sequence.items.start)) : yw_scalar(names);
	yw_pairs(r->doc, m, k, v) {
		const char *ks = yw_scalar(k);
		uint64_t u = 0;
		if (rr < 0)
			break;
		if (!ks)
			rr = derr(r, k, err, "keys must be scalars");
		else if (!strcmp(ks, "names") || !strcmp(ks, "name") || !strcmp(ks, "comment"))
			;
		else if (!strcmp(ks, "action")) {
			have_action = true;
			if (parse_action(yw_scalar(v), &rule.action) < 0)
				rr = derr(r, v, err, "unsupported action '%s' (SCMP_ACT_ALLOW, _ERRNO, _KILL, _KILL_PROCESS, _LOG)",
				          yw_scalar(v) ? yw_scalar(v) : "?");
		} else if (!strcmp(ks, "errnoRet")) {
			if (parse_num(yw_scalar(v), &u) < 0 || u == 0 || u > 4095)
				rr = derr(r, v, err, "errnoRet must be 1 to 4095");
			rule.errnum = (int) u;
		} else if (!strcmp(ks, "args")) {
			if (v->type != YAML_SCALAR_NODE || strcmp(yw_scalar(v), "null"))
				rr = read_args(r, v, &rule, err);
		} else if (!strcmp(ks, "includes") || !strcmp(ks, "excludes")) {
			rr = applies(r, v, ks[0] == 'i', &ok, err);
		} else {
			rr = derr(r, k, err, "unsupported key '%s'", ks);
		}
	}
	if (rr == 0 && !have_action)
		rr = derr(r, m, err, "an entry needs an 'action'");
	if (rr < 0 || !ok)
		return rr;
	if (names->type == YAML_SCALAR_NODE) {
		rule.syscalls = calloc(2, sizeof(char *));
		if (rule.syscalls)
			rule.syscalls[0] = strdup(yw_scalar(names));
	} else {
		size_t n = (size_t) (names->data.sequence.items.top - names->data.sequence.items.start), i = 0;
		rule.syscalls = calloc(n + 1, sizeof(char *));
		yw_items(r->doc, names, it)
			if (rule.syscalls && yw_scalar(it))
				rule.syscalls[i++] = strdup(yw_scalar(it));
	}
	sc_rule *v = rule.syscalls ? realloc(r->p->allow, (r->p->n_allow + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(rule.syscalls);
		return nsbox_err(err, ENOMEM, "seccomp", "read profile");
	}
	r->p->allow = v;
	v[r->p->n_allow++] = rule;
	return 0;
}

static int read_archmap(dreader *r, yaml_node_t *seq, nsbox_error **err)
{
	if (seq->type != YAML_SEQUENCE_NODE)
		return derr(r, seq, err, "archMap must be a list");
	yw_items(r->doc, seq, it) {
		yaml_node_t *arch = NULL, *subs = NULL;
		if (it->type == YAML_MAPPING_NODE)
			yw_pairs(r->doc, it, k, v) {
				const char *ks = yw_scalar(k);
				if (ks && !strcmp(ks, "architecture"))
					arch = v;
				else if (ks && !strcmp(ks, "subArchitectures"))
					subs = v;
				else
					return derr(r, k, err, "unsupported key '%s' in archMap", ks ? ks : "?");
			}
		if (!yw_scalar(arch) || strcmp(yw_scalar(arch), "SCMP_ARCH_X86_64"))
			continue;   /* another machine's entry */
		if (subs && subs->type == YAML_SEQUENCE_NODE)
			yw_items(r->doc, subs, s) {
				const char *name = yw_scalar(s);
				bool prefixed = name && !strncmp(name, "SCMP_ARCH_", 10);
				uint32_t t = prefixed ? seccomp_arch_resolve_name(name + 10) : 0;
				if (!t && prefixed) {
					/* libseccomp spells them in lower case (a name shorter
					 * than the prefix has nothing past it to read) */
					char lower[32] = "";
					for (size_t i = 0; name[10 + i] && i < sizeof(lower) - 1; i++)
						lower[i] = (char) (name[10 + i] | 0x20);
					t = seccomp_arch_resolve_name(lower);
				}
				if (!t)
					return derr(r, s, err, "unknown architecture '%s'", name ? name : "?");
				uint32_t *a = realloc(r->p->arches, (r->p->n_arches + 1) * sizeof(*a));
				if (!a)
					return -ENOMEM;
				r->p->arches = a;
				a[r->p->n_arches++] = t;
			}
	}
	return 0;
}

int sc_read_docker(yaml_document_t *doc, yaml_node_t *root, const char *origin, sc_profile *p,
                   nsbox_error **err)
{
	dreader r = { .doc = doc, .origin = origin, .p = p };
	yaml_node_t *syscalls = NULL;
	bool have_default = false;
	p->default_errno = EPERM;
	/* Defaults first: entries inherit defaultErrnoRet. */
	yw_pairs(r.doc, root, k, v) {
		const char *ks = yw_scalar(k);
		uint64_t u;
		if (!ks)
			return derr(&r, k, err, "keys must be scalars");
		if (!strcmp(ks, "defaultAction")) {
			if (parse_action(yw_scalar(v), &p->default_action) < 0)
				return derr(&r, v, err, "unsupported defaultAction '%s'", yw_scalar(v) ? yw_scalar(v) : "?");
			have_default = true;
		} else if (!strcmp(ks, "defaultErrnoRet")) {
			if (parse_num(yw_scalar(v), &u) < 0 || u == 0 || u > 4095)
				return derr(&r, v, err, "defaultErrnoRet must be 1 to 4095");
			p->default_errno = (int) u;
		} else if (!strcmp(ks, "archMap")) {
			int rr = read_archmap(&r, v, err);
			if (rr < 0)
				return rr;
		} else if (!strcmp(ks, "architectures")) {
			/* Old form: a flat list; the native one is always there. */
			if (v->type != YAML_SEQUENCE_NODE)
				return derr(&r, v, err, "architectures must be a list");
		} else if (!strcmp(ks, "syscalls")) {
			syscalls = v;
		} else {
			return derr(&r, k, err, "unsupported key '%s' (nsbox reads defaultAction, defaultErrnoRet, archMap, architectures, syscalls)", ks);
		}
	}
	if (!have_default)
		return derr(&r, root, err, "a Docker profile needs 'defaultAction'");
	if (!syscalls)
		return 0;
	if (syscalls->type != YAML_SEQUENCE_NODE)
		return derr(&r, syscalls, err, "'syscalls' must be a list");
	yw_items(r.doc, syscalls, it) {
		r.first_name = NULL;
		int rr = read_entry(&r, it, err);
		if (rr < 0)
			return rr;
		r.entry++;
	}
	return 0;
}
