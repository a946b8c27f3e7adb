/* `nsbox docker ...`: a front door that takes Docker's command line for the
 * commands sandbox users run, and maps each onto nsbox's own configuration
 * and commands (one engine: nothing here runs, limits or isolates anything
 * itself). docs/guide.md "Coming from Docker" is the user's page.
 *
 *   run_opts.c  docker run's options: the translation table to policy keys,
 *               and the refused options with their reasons (no side effects)
 *   run_values.c  the values that need more than a key (-v, --tmpfs, -e ...)
 *   run.c       docker run: in the foreground through nsbox_run(); with -d a
 *               long-lived sandbox (as nsbox start makes one) and the command
 *               run in it by a runner process (runner.c) that keeps its log
 *   store.c     the containers: a private directory per name, its lock,
 *               container.json (what was asked) and state.json (what happened)
 *   manage.c    stop, kill, wait, rm, inspect
 *   ps.c, logs.c  docker ps, docker logs
 *   run_ports.c, ports.c, ports_text.c  -p/-P/--expose (the started
 *               sandbox's forwarder), docker port, ps's PORTS
 *   template.c  the Go templates of inspect -f and ps --format
 *   exec.c      docker exec (nsbox exec)
 *   images.c    images, pull, build (nsbox image ls, pull, build -f)
 *   docker.c    dispatch, version
 */
#ifndef NSBOX_CLI_DOCKER_H
#define NSBOX_CLI_DOCKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "args.h"
#include "nsbox.h"

/* Docker's exit statuses: run and exec fail with 125 (nothing ran), the
 * management commands (ps, rm, stop, logs, inspect ...) with 1. */
#define DOCKER_EXIT_RUN 125
#define DOCKER_EXIT_CMD 1

/* ---- docker run's options (run_opts.c) ------------------------------------ */

/* A published port (-p, -P; run_ports.c): the host's address as given (""
 * the default, 127.0.0.1), the host port (0: any free one), the port inside. */
typedef struct docker_port {
	char addr[48];
	uint16_t host_port;
	uint16_t port;
} docker_port;
/* As many as the monitor of a started sandbox forwards. */
#define DOCKER_PORTS_MAX 64

typedef struct docker_run {
	/* What nsbox takes: the policy (NSBOX_POLICY), the settings (policy
	 * keys: the NSBOX_* variables first, then the options in order), the
	 * container's name, -i. */
	run_args a;
	const char *image;        /* as given */
	int argc;                 /* the command after IMAGE (may be empty) */
	char **argv;
	const char *entrypoint;   /* --entrypoint: the command's first word */
	bool rm, detach, tty, help;
	const char *cidfile;
	int stop_timeout;         /* seconds: --stop-timeout, else 10; -1: no limit */
	int stop_signal;          /* --stop-signal, else SIGTERM */
	const char *user, *workdir, *hostname, *network;   /* as given, for inspect */
	const char **labels;      /* --label K[=V], in order */
	size_t n_labels;
	const char **env;         /* -e and --env-file entries, for inspect */
	size_t n_env;
	docker_port *ports;       /* -p and -P (the library's specs: a.publish) */
	size_t n_ports;
	uint16_t *exposed;        /* --expose and -p's ports, ascending, each once */
	size_t n_exposed;
	bool publish_all;         /* -P */
	char **owned;             /* strings made here (settings point into them) */
	size_t n_owned;
} docker_run;

/* Parse `docker run` (argv[0] is "run"); env is the environment (NSBOX_*,
 * and -e NAME's values). -1 with a message naming the option in err. */
int docker_run_parse(int argc, char **argv, char **env, docker_run *d, char *err, size_t errlen);
void docker_run_free(docker_run *d);
void docker_run_help(FILE *f);
/* The run options' table (for tests and the man page check). */
struct opt_def;
const struct opt_def *docker_run_table(void);
/* Why a Docker option is refused, or NULL when it is not ("privileged"). */
const char *docker_refusal(const char *name);
/* A signal by Docker's names (SIGTERM, TERM, 15): its number, or -1. */
int docker_signal(const char *s);
/* A Docker image reference as an nsbox image name, as nsbox image pull
 * names it ("default", "default:latest" -> "default", "python:3.12" ->
 * "python-3.12"); NULL with err set when it is not a reference. */
const char *docker_image_name(const char *ref, char *buf, size_t len, char *err, size_t errlen);

/* ---- the containers (store.c) --------------------------------------------- */

/* A container as the store knows it: its directory (open), its files. */
typedef struct container {
	int dirfd;                /* the container's directory */
	char name[64];
	char id[65];
	bool running;             /* its lock is held: its owner process lives */
	struct json_t *info;      /* container.json */
	struct json_t *state;     /* state.json (NULL: none yet) */
} container;

/* The directory of containers (0700, the caller's own), or -1 (said why). */
int store_open(bool create);
/* Make container NAME: its directory (EEXIST: the name is taken), its lock
 * held on *lock_fd (kept by the owner process for the container's life).
 * 0, or -errno having said why. */
int store_create(int base, const char *name, int *dirfd, int *lock_fd);
/* Find a container by name or by (a unique prefix of) its id. 0, -ENOENT,
 * or -EINVAL when a prefix is ambiguous; with `quiet` nothing is printed. */
int store_find(int base, const char *ref, container *c, bool quiet);
void container_free(container *c);
/* Write a JSON document as FILE in the container's directory (atomically,
 * 0600). */
int store_write(int dirfd, const char *file, struct json_t *doc);
/* Remove a container's directory and files. */
int store_remove(int base, const char *name);
/* Is the lock of the container open at dirfd held by a live owner? */
bool store_locked(int dirfd);
/* Wait until the container's lock is free: at most ms (0: forever). */
bool store_wait_unlocked(int dirfd, unsigned ms);
/* The state an owner writes: running (with its pid and start time), or
 * ended with the run's exit status. */
struct json_t *state_running(void);
struct json_t *state_exited(struct json_t *prev, int exit_code, bool oom, const char *error);
/* Add the bound ports (ports_bound) to the running state an owner wrote:
 * state.json's "Ports", dropped when it ends. 0, or -errno. */
int store_set_ports(int dirfd, struct json_t *ports);
/* Record how the container ended (state.json). */
int store_end(int base, int dirfd, const char *name, int status, bool oom, const char *why);
/* State as docker inspect shows it: "running" while the lock is held; a
 * state left "running" by an owner that was killed is "exited" (137). */
struct json_t *store_effective_state(const container *c);
/* A container being started (locked, state "created"): wait until its
 * owner has recorded itself (c is reloaded), or it ended. */
int store_settle(int base, container *c);
/* 64 hex digits of randomness. */
int random_hex(char *out, size_t n_bytes);
/* The time now as RFC 3339 with nanoseconds, as Docker writes it. */
void now_rfc3339(char *buf, size_t len);
/* Signal the owner recorded in state (pid and start time, so that a reused
 * pid is never signalled). 0, or -ESRCH when it is gone. */
int owner_signal(const container *c, int sig);

/* ---- the commands ------------------------------------------------------------ */

/* Was the container made by docker run -d? */
bool container_detached(const container *c);
/* Parse a command's options with take(id, value, ctx) (a flag's value is
 * "1", or NULL for =false); the operands from *first. -1 having said why. */
struct opt_def;
int docker_parse_opts(const char *cmd, const struct opt_def *defs, int argc, char **argv,
                      void (*take)(int, const char *, void *), void *ctx, int *first);

int docker_cmd_run(int argc, char **argv);
int docker_cmd_exec(int argc, char **argv);
int docker_cmd_ps(int argc, char **argv);
int docker_cmd_stop(int argc, char **argv);
int docker_cmd_kill(int argc, char **argv);
int docker_cmd_wait(int argc, char **argv);
int docker_cmd_rm(int argc, char **argv);
int docker_cmd_logs(int argc, char **argv);
int docker_cmd_inspect(int argc, char **argv);
int docker_cmd_images(int argc, char **argv);
int docker_cmd_pull(int argc, char **argv);
int docker_cmd_build(int argc, char **argv);
int docker_cmd_port(int argc, char **argv);

/* ---- ports (ports.c) ----------------------------------------------------- */

/* The ports the monitor of started sandbox sb listens on, as Docker's
 * NetworkSettings.Ports ({"80/tcp": [{"HostIp": ..., "HostPort": "8080"}]}):
 * a new object, or NULL having said why. */
struct json_t *ports_bound(nsbox_sandbox *sb);
/* A container's NetworkSettings.Ports: while it runs, the bound ones
 * (state.json's "Ports") and its exposed ones (null where not published);
 * else none. A new object. */
struct json_t *ports_effective(const container *c, bool running);
/* docker ps's PORTS column for such an object (malloc'ed; NULL: no memory);
 * Go's net.JoinHostPort; sortorder.NaturalLess as a comparison (ports_text.c). */
char *ports_display(struct json_t *ports);
void ports_host_port(FILE *f, const char *ip, const char *port);
int ports_natural_cmp(const char *a, const char *b);

/* The detached container's runner (runner.c): in a child of docker run -d
 * that holds the container's lock; reports on status_fd ('O' once the
 * command was handed to the sandbox), then runs it to its end, keeps its
 * log and exit status, stops the sandbox. Never returns. */
__attribute__((noreturn)) void runner_main(docker_run *d, int base, int dirfd, int lock_fd, int status_fd);

/* The frame of the container's log: Docker's multiplexed stream header
 * (stream 1 or 2, three zero bytes, the length big-endian). */
#define LOG_FILE "log"
#define LOG_MAX ((uint64_t) 64 << 20)

/* ---- templates (template.c) ---------------------------------------------- */

/* Simple Go templates over a JSON value, as docker inspect --format and
 * docker ps --format take them: text with {{.Path.To.Field}} and
 * {{json .Path}} (a field's value: strings as they are, others as JSON).
 * Appends to out (malloc'ed); -1 with err for anything else. */
int go_template(const char *tmpl, struct json_t *v, char **out, char *err, size_t errlen);

#endif
