/* Seccomp profiles: nsbox's YAML format (nsbox-seccomp(5)) and Docker/OCI
 * JSON, read into one model that seccomp_compile.c turns into BPF. */
#ifndef NSBOX_SECCOMP_PROFILE_H
#define NSBOX_SECCOMP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

enum sc_action { SC_ALLOW, SC_ERRNO, SC_KILL, SC_LOG };
enum sc_op { SC_EQ, SC_NE, SC_LT, SC_LE, SC_GT, SC_GE, SC_MASKED_EQ };

typedef struct sc_arg {
	unsigned index;
	enum sc_op op;
	uint64_t value;
	uint64_t mask;     /* SC_MASKED_EQ */
} sc_arg;

typedef struct sc_rule {
	char **syscalls;   /* NULL-terminated */
	enum sc_action action;
	int errnum;        /* SC_ERRNO */
	sc_arg args[6];
	size_t n_args;
} sc_rule;

typedef struct sc_profile {
	char *name;
	enum sc_action default_action;
	int default_errno;
	uint32_t *arches;      /* libseccomp SCMP_ARCH_* tokens; empty: native */
	size_t n_arches;
	/* Layer 1: the allowlist with the default action. Docker profiles put
	 * all their rules here, as Docker does. */
	sc_rule *allow;
	size_t n_allow;
	/* Layer 2: denials over a default of allow, installed after layer 1 so
	 * that, among equally ranked errno results, its errno is the one used. */
	sc_rule *deny;
	size_t n_deny;
} sc_profile;

/* Parse a profile from text. `origin` names it in errors (a file path, or
 * "built-in profile 'default'"). JSON is recognised by its leading '{' and
 * read as a Docker/OCI profile. */
int sc_profile_parse(const char *text, size_t len, const char *origin, sc_profile **out,
                     nsbox_error **err);
void sc_profile_free(sc_profile *p);
/* The name of an errno a profile may give ("EPERM", "ENOSYS" ...), or NULL. */
const char *sc_errno_name(int e);

/* The built-in profiles (the YAML files in seccomp/, embedded at build time). */
const char *sc_builtin(const char *name);

/* Resolve --seccomp: a built-in name, "unconfined" (*text NULL), or a file.
 * *text is malloc'ed. */
int sc_profile_load_text(const char *spec, char **text, size_t *len, char **origin,
                         nsbox_error **err);

#endif
