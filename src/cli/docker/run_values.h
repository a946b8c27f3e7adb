/* docker run's option values (run_values.c), for its parser (run_opts.c). */
#ifndef NSBOX_CLI_DOCKER_RUN_VALUES_H
#define NSBOX_CLI_DOCKER_RUN_VALUES_H

#include <stdbool.h>
#include <stddef.h>

#include "docker/docker.h"

/* An error message into err; -1. */
int dr_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A setting (the policy key, its value, where it came from). */
int dr_push(docker_run *d, const char *key, const char *value, const char *origin);
/* A string kept for the parse's life (settings point into it); NULL when
 * out of memory (s is freed). */
char *dr_own(docker_run *d, char *s);
char *dr_own_fmt(docker_run *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int dr_add_list(const char ***v, size_t *n, const char *s);

/* Each: 0, -1 with err, or -ENOMEM. */
int dr_tmpfs(docker_run *d, const char *path, const char *opts, const char *origin, char *err, size_t errlen);
int dr_volume(docker_run *d, const char *v, char *err, size_t errlen);
int dr_mount_opt(docker_run *d, const char *v, char *err, size_t errlen);
int dr_env_opt(docker_run *d, const char *v, const char *origin, char *err, size_t errlen);
int dr_env_file(docker_run *d, const char *path, char *err, size_t errlen);
int dr_ulimit(docker_run *d, const char *v, char *err, size_t errlen);
int dr_security_opt(docker_run *d, const char *v, char *err, size_t errlen);
bool dr_cap_name_ok(const char *c);
int dr_user(docker_run *d, const char *v, char *err, size_t errlen);
/* -p, --expose (run_ports.c); then, once every option is read, -P's ports
 * and the library's "[ADDR:]HOSTPORT:PORT" specs in d->a.publish. */
int dr_publish(docker_run *d, const char *v, char *err, size_t errlen);
int dr_expose(docker_run *d, const char *v, char *err, size_t errlen);
int dr_ports_finish(docker_run *d, char *err, size_t errlen);

#endif
