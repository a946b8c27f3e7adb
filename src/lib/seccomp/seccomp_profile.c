/* Reading seccomp profiles. Both formats go through libyaml's document API
 * (JSON is YAML's flow style), which keeps positions for error messages. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <yaml.h>
#include <seccomp.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "seccomp/seccomp_profile.h"
#include "base/yaml_walk.h"

typedef struct reader {
	yaml_document_t *doc;
	const char *origin;
	sc_profile *p;
} reader;

#define perr(r, n, err, ...) yw_err(err, "seccomp", (r)->origin, n, __VA_ARGS__)




static const struct { const char *name; int value; } errnos[] = {
	{ "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EACCES", EACCES }, { "EINVAL", EINVAL },
	{ "ENOSYS", ENOSYS }, { "EAFNOSUPPORT", EAFNOSUPPORT }, { "EOPNOTSUPP", EOPNOTSUPP },
	{ "ENOTSUP", ENOTSUP }, { "EPROTONOSUPPORT", EPROTONOSUPPORT }, { "EBADF", EBADF },
	{ "ENOTTY", ENOTTY }, { "EIO", EIO }, { "EROFS", EROFS }, { "ENODEV", ENODEV },
};

const char *sc_errno_name(int e)
{
	for (size_t i = 0; i < sizeof(errnos) / sizeof(*errnos); i++)
		if (errnos[i].value == e)
			return errnos[i].name;
	return NULL;
}

static int parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-')
		return -EINVAL;
	char *e;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 0);
	if (errno || *e)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_errno(const char *s, int *out)
{
	for (size_t i = 0; s && i < ARRAY_SIZE(errnos); i++)
		if (!strcmp(s, errnos[i].name)) {
			*out = errnos[i].value;
			return 0;
		}
	uint64_t v;
	if (parse_u64(s, &v) < 0 || v == 0 || v > 4095)
		return -EINVAL;
	*out = (int) v;
	return 0;
}

static int push_rule(sc_rule **v, size_t *n, sc_rule r)
{
	sc_rule *nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[(*n)++] = r;
	return 0;
}

static void free_rule(sc_rule *r)
{
	for (size_t i = 0; r->syscalls && r->syscalls[i]; i++)
		free(r->syscalls[i]);
	free(r->syscalls);
}

void sc_profile_free(sc_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_allow; i++)
		free_rule(&p->allow[i]);
	for (size_t i = 0; i < p->n_deny; i++)
		free_rule(&p->deny[i]);
	free(p->allow);
	free(p->deny);
	free(p->arches);
	free(p->name);
	free(p);
}

/* A list of syscall names into a NULL-terminated array. */
static int read_names(reader *r, yaml_node_t *seq, char ***out, nsbox_error **err)
{
	if (seq->type != YAML_SEQUENCE_NODE)
		return perr(r, seq, err, "expected a list of system call names");
	size_t n = (size_t) (seq->data.sequence.items.top - seq->data.sequence.items.start);
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t i = 0;
	yw_items(r->doc, seq, it) {
		const char *s = yw_scalar(it);
		if (!s || !*s) {
			for (size_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return perr(r, it, err, "a system call name must be a non-empty scalar");
		}
		v[i++] = strdup(s);
	}
	*out = v;
	return 0;
}

/* ---- nsbox's YAML format ------------------------------------------------- */

static const struct { const char *name; enum sc_op op; } ops[] = {
	{ "eq", SC_EQ }, { "ne", SC_NE }, { "lt", SC_LT }, { "le", SC_LE },
	{ "gt", SC_GT }, { "ge", SC_GE }, { "masked_eq", SC_MASKED_EQ },
};

static int read_arg(reader *r, yaml_node_t *m, sc_arg *a, nsbox_error **err)
{
	if (m->type != YAML_MAPPING_NODE)
		return perr(r, m, err, "an argument condition must be a mapping { index, op, value[, mask] }");
	bool have_index = false, have_op = false, have_value = false, have_mask = false;
	yw_pairs(r->doc, m, k, v) {
		const char *ks = yw_scalar(k), *vs = yw_scalar(v);
		uint64_t u;
		if (!ks || !vs)
			return perr(r, k, err, "argument condition keys and values must be scalars");
		if (!strcmp(ks, "index")) {
			if (parse_u64(vs, &u) < 0 || u > 5)
				return perr(r, v, err, "index must be 0 to 5, not '%s'", vs);
			a->index = (unsigned) u;
			have_index = true;
		} else if (!strcmp(ks, "op")) {
			size_t i = 0;
			while (i < ARRAY_SIZE(ops) && strcmp(ops[i].name, vs))
				i++;
			if (i == ARRAY_SIZE(ops))
				return perr(r, v, err, "unknown op '%s' (eq, ne, lt, le, gt, ge, masked_eq)", vs);
			a->op = ops[i].op;
			have_op = true;
		} else if (!strcmp(ks, "value") || !strcmp(ks, "mask")) {
			if (parse_u64(vs, &u) < 0)
				return perr(r, v, err, "%s must be a non-negative number, not '%s'", ks, vs);
			if (ks[0] == 'v') {
				a->value = u;
				have_value = true;
			} else {
				a->mask = u;
				have_mask = true;
			}
		} else {
			return perr(r, k, err, "unknown key '%s' in an argument condition", ks);
		}
	}
	if (!have_index || !have_op || !have_value)
		return perr(r, m, err, "an argument condition needs index, op and value");
	if ((a->op == SC_MASKED_EQ) != have_mask)
		return perr(r, m, err, "mask goes with op masked_eq, and only with it");
	return 0;
}

static int read_action(reader *r, yaml_node_t *v, enum sc_action *a)
{
	const char *s = yw_scalar(v);
	if (s && !strcmp(s, "allow"))
		*a = SC_ALLOW;
	else if (s && !strcmp(s, "errno"))
		*a = SC_ERRNO;
	else if (s && !strcmp(s, "kill"))
		*a = SC_KILL;
	else if (s && !strcmp(s, "log"))
		*a = SC_LOG;
	else
		return -EINVAL;
	(void) r;
	return 0;
}

static int read_rule(reader *r, yaml_node_t *m, bool deny, sc_rule *rule, nsbox_error **err)
{
	*rule = (sc_rule){ .action = deny ? SC_ERRNO : SC_ALLOW, .errnum = EPERM };
	if (m->type != YAML_MAPPING_NODE)
		return perr(r, m, err, "a rule must be a mapping { syscalls, ... }");
	yaml_node_t *names = NULL;
	bool have_action = false;
	yw_pairs(r->doc, m, k, v) {
		const char *ks = yw_scalar(k);
		int rr = 0;
		if (!ks)
			return perr(r, k, err, "rule keys must be scalars");
		if (!strcmp(ks, "syscalls")) {
			names = v;
		} else if (!strcmp(ks, "action") && deny) {
			if (read_action(r, v, &rule->action) < 0 || rule->action == SC_ALLOW)
				rr = perr(r, v, err, "a deny rule's action is errno, kill or log");
			have_action = true;
		} else if (!strcmp(ks, "errno") && deny) {
			if (parse_errno(yw_scalar(v), &rule->errnum) < 0)
				rr = perr(r, v, err, "unknown errno '%s'", yw_scalar(v) ? yw_scalar(v) : "?");
		} else if (!strcmp(ks, "args")) {
			if (v->type != YAML_SEQUENCE_NODE)
				return perr(r, v, err, "args must be a list of conditions");
			yw_items(r->doc, v, it) {
				if (rule->n_args == ARRAY_SIZE(rule->args))
					return perr(r, it, err, "at most 6 argument conditions");
				rr = rr ?: read_arg(r, it, &rule->args[rule->n_args++], err);
			}
		} else {
			rr = perr(r, k, err, "unknown key '%s' in %s rule", ks, deny ? "a deny" : "an allow");
		}
		if (rr < 0)
			return rr;
	}
	if (!names)
		return perr(r, m, err, "a rule needs 'syscalls'");
	if (deny && !have_action)
		return perr(r, m, err, "a deny rule needs an 'action'");
	return read_names(r, names, &rule->syscalls, err);
}

static int read_rules(reader *r, yaml_node_t *seq, bool deny, nsbox_error **err)
{
	if (seq->type != YAML_SEQUENCE_NODE)
		return perr(r, seq, err, "'%s' must be a list of rules", deny ? "deny" : "allow");
	yw_items(r->doc, seq, it) {
		sc_rule rule;
		int rr = read_rule(r, it, deny, &rule, err);
		if (rr < 0) {
			free_rule(&rule);
			return rr;
		}
		rr = deny ? push_rule(&r->p->deny, &r->p->n_deny, rule) : push_rule(&r->p->allow, &r->p->n_allow, rule);
		if (rr < 0) {
			free_rule(&rule);
			return nsbox_err(err, ENOMEM, "seccomp", "read profile");
		}
	}
	return 0;
}

static int add_arch(sc_profile *p, uint32_t token)
{
	uint32_t *v = realloc(p->arches, (p->n_arches + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	p->arches = v;
	v[p->n_arches++] = token;
	return 0;
}

static int read_nsbox(reader *r, yaml_node_t *root, nsbox_error **err)
{
	yw_pairs(r->doc, root, k, v) {
		const char *ks = yw_scalar(k);
		int rr = 0;
		if (!ks)
			return perr(r, k, err, "keys must be scalars");
		if (!strcmp(ks, "name")) {
			if (!yw_scalar(v))
				return perr(r, v, err, "name must be a scalar");
			free(r->p->name);
			r->p->name = strdup(yw_scalar(v));
		} else if (!strcmp(ks, "default")) {
			if (v->type != YAML_MAPPING_NODE)
				return perr(r, v, err, "default must be a mapping { action[, errno] }");
			yw_pairs(r->doc, v, dk, dv) {
				const char *dks = yw_scalar(dk);
				if (dks && !strcmp(dks, "action")) {
					if (read_action(r, dv, &r->p->default_action) < 0)
						return perr(r, dv, err, "unknown action '%s' (allow, errno, kill, log)", yw_scalar(dv) ? yw_scalar(dv) : "?");
				} else if (dks && !strcmp(dks, "errno")) {
					if (parse_errno(yw_scalar(dv), &r->p->default_errno) < 0)
						return perr(r, dv, err, "unknown errno '%s'", yw_scalar(dv) ? yw_scalar(dv) : "?");
				} else {
					return perr(r, dk, err, "unknown key '%s' in default", dks ? dks : "?");
				}
			}
		} else if (!strcmp(ks, "architectures")) {
			if (v->type != YAML_SEQUENCE_NODE)
				return perr(r, v, err, "architectures must be a list");
			yw_items(r->doc, v, it) {
				uint32_t t = yw_scalar(it) ? seccomp_arch_resolve_name(yw_scalar(it)) : 0;
				if (!t)
					return perr(r, it, err, "unknown architecture '%s'", yw_scalar(it) ? yw_scalar(it) : "?");
				if (add_arch(r->p, t) < 0)
					return -ENOMEM;
			}
		} else if (!strcmp(ks, "allow")) {
			rr = read_rules(r, v, false, err);
		} else if (!strcmp(ks, "deny")) {
			rr = read_rules(r, v, true, err);
		} else {
			rr = perr(r, k, err, "unknown key '%s' (name, default, architectures, allow, deny)", ks);
		}
		if (rr < 0)
			return rr;
	}
	return 0;
}

/* ---- Docker/OCI JSON ------------------------------------------------------ */

int sc_read_docker(yaml_document_t *doc, yaml_node_t *root, const char *origin, sc_profile *p,
                   nsbox_error **err);

int sc_profile_parse(const char *text, size_t len, const char *origin, sc_profile **out,
                     nsbox_error **err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser))
		return nsbox_err(err, ENOMEM, "seccomp", "read profile %s", origin);
	yaml_parser_set_input_string(&parser, (const unsigned char *) text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		int r = nsbox_err_invalid(err, "seccomp", "%s:%zu:%zu: %s", origin,
		                          parser.problem_mark.line + 1, parser.problem_mark.column + 1,
		                          parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		return r;
	}
	yaml_parser_delete(&parser);
	sc_profile *p = calloc(1, sizeof(*p));
	reader rd = { .doc = &doc, .origin = origin, .p = p };
	int r = 0;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!p)
		r = nsbox_err(err, ENOMEM, "seccomp", "read profile");
	else if (!root || root->type != YAML_MAPPING_NODE)
		r = nsbox_err_invalid(err, "seccomp", "%s: a profile must be a mapping", origin);
	else {
		p->default_action = SC_ERRNO;
		p->default_errno = EPERM;   /* as the kernel answers an unprivileged caller */
		/* Docker's format is recognised by its keys. */
		bool docker = false;
		yw_pairs(rd.doc, root, k, v) {
			(void) v;
			const char *ks = yw_scalar(k);
			docker |= ks && (!strcmp(ks, "defaultAction") || !strcmp(ks, "syscalls"));
		}
		r = docker ? sc_read_docker(&doc, root, origin, p, err) : read_nsbox(&rd, root, err);
	}
	if (r == 0 && !p->name)
		p->name = strdup(origin);
	yaml_document_delete(&doc);
	if (r < 0) {
		sc_profile_free(p);
		return r;
	}
	*out = p;
	return 0;
}

int sc_profile_load_text(const char *spec, char **text, size_t *len, char **origin,
                         nsbox_error **err)
{
	*text = NULL;
	*origin = NULL;
	if (!strcmp(spec, "unconfined"))
		return 0;
	bool is_path = strchr(spec, '/') || strstr(spec, ".yaml") || strstr(spec, ".json");
	if (!is_path) {
		const char *b = sc_builtin(spec);
		if (!b)
			return nsbox_err_invalid(err, "seccomp",
			                         "unknown seccomp profile '%s' (built in: default, strict; or a file, or unconfined)",
			                         spec);
		*text = strdup(b);
		*len = strlen(b);
		if (asprintf(origin, "built-in profile '%s'", spec) < 0)
			*origin = NULL;
		return *text && *origin ? 0 : nsbox_err(err, ENOMEM, "seccomp", "load profile");
	}
	_cleanup_close_ int fd = open(spec, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return nsbox_err(err, errno, "seccomp", "open seccomp profile '%s'", spec);
	if (!S_ISREG(st.st_mode) || st.st_size > (1 << 20))
		return nsbox_err_invalid(err, "seccomp", "read seccomp profile '%s': not a regular file of at most 1 MiB", spec);
	char *buf = malloc((size_t) st.st_size + 1);
	if (!buf)
		return nsbox_err(err, ENOMEM, "seccomp", "read seccomp profile '%s'", spec);
	ssize_t n = read(fd, buf, (size_t) st.st_size);
	if (n < 0) {
		free(buf);
		return nsbox_err(err, errno, "seccomp", "read seccomp profile '%s'", spec);
	}
	buf[n] = '\0';
	*text = buf;
	*len = (size_t) n;
	*origin = strdup(spec);
	return *origin ? 0 : nsbox_err(err, ENOMEM, "seccomp", "load profile");
}
