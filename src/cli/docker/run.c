/* docker run. In the foreground: one governed run, nsbox_run() with the
 * configuration the options translate to, exactly as `nsbox run` makes it;
 * with --name (or --cidfile) the run is also a container while it lasts
 * (docker ps, stop, rm -f, inspect reach it). With -d: a long-lived sandbox
 * as `nsbox start` makes one (live_cli_start) and the command run in it as an
 * exec, by a runner process that keeps the output for docker logs and the
 * exit status for docker inspect (runner.c). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "live/live_cli.h"

extern char **environ;

/* userdata: a warning already shown (a started sandbox's, which its
 * execs repeat), or NULL. */
static void print_warning(void *userdata, const char *message)
{
	if (userdata && !strcmp(userdata, message))
		return;
	print_msg("warning: %s", message);
}

/* The command: --entrypoint, then what follows IMAGE. NULL-terminated,
 * malloc'ed (the strings are argv's). */
static const char **command(const docker_run *d, int *n)
{
	const char **v = calloc((size_t) d->argc + 2, sizeof(*v));
	if (!v)
		return NULL;
	*n = 0;
	if (d->entrypoint)
		v[(*n)++] = d->entrypoint;
	for (int i = 0; i < d->argc; i++)
		v[(*n)++] = d->argv[i];
	return v;
}

/* The effective network mode, as the configuration says it (nsbox policy
 * show's text), in Docker's words. */
static const char *network_mode(const nsbox_config *cfg)
{
	char *yaml = NULL;
	const char *mode = "none";
	if (nsbox_config_to_yaml(cfg, &yaml, NULL) == 0) {
		const char *sec = strstr(yaml, "\nnetwork:\n");
		const char *m = sec ? strstr(sec, "\n  mode: ") : NULL;
		if (m && !strncmp(m + 9, "user", 4))
			mode = "bridge";
		else if (m && !strncmp(m + 9, "host", 4))
			mode = "host";
	}
	free(yaml);
	return mode;
}

static int build_config(const docker_run *d, const setting *extra, nsbox_config **out)
{
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	int n = 0;
	const char **cmd = command(d, &n);
	int r = cmd ? config_with_policy(d->a.policy, &cfg, &e) : -ENOMEM;
	for (size_t i = 0; r == 0 && i < d->a.n_settings; i++)
		r = nsbox_config_set(cfg, d->a.settings[i].key, d->a.settings[i].value, d->a.settings[i].origin, &e);
	if (r == 0 && extra)
		r = nsbox_config_set(cfg, extra->key, extra->value, extra->origin, &e);
	if (r == 0)
		r = nsbox_config_set_command(cfg, n, cmd, &e);
	if (r == 0)
		r = nsbox_config_validate(cfg, &e);
	free(cmd);
	if (r == 0 && d->n_ports && !strcmp(network_mode(cfg), "host")) {
		/* Docker discards the ports then; nsbox says so instead. */
		print_msg("docker run: --publish with --network host: the command's ports are the host's already, "
		          "nothing is forwarded: give one or the other");
		nsbox_config_free(cfg);
		return -1;
	}
	if (r < 0) {
		if (e)
			print_error(e);
		else
			print_msg("docker run: out of memory");
		nsbox_error_free(e);
		nsbox_config_free(cfg);
		return -1;
	}
	*out = cfg;
	return 0;
}

static const char *signal_name(int sig)
{
	switch (sig) {
	case SIGINT: return "SIGINT";
	case SIGHUP: return "SIGHUP";
	case SIGQUIT: return "SIGQUIT";
	case SIGKILL: return "SIGKILL";
	default: return "SIGTERM";
	}
}

/* The ports asked for, as Docker records them: Config.ExposedPorts,
 * HostConfig.PortBindings (HostIp "" for the default, HostPort "" for any
 * free one) and PublishAllPorts. */
static void add_ports(json_t *info, const docker_run *d)
{
	json_t *cfg = json_object_get(info, "Config"), *host = json_object_get(info, "HostConfig");
	json_t *exposed = json_object(), *bindings = json_object();
	for (size_t i = 0; exposed && i < d->n_exposed; i++) {
		char key[16];
		snprintf(key, sizeof(key), "%u/tcp", (unsigned) d->exposed[i]);
		json_object_set_new(exposed, key, json_object());
	}
	for (size_t i = 0; bindings && i < d->n_ports; i++) {
		char key[16], hp[8] = "";
		snprintf(key, sizeof(key), "%u/tcp", (unsigned) d->ports[i].port);
		if (d->ports[i].host_port)
			snprintf(hp, sizeof(hp), "%u", (unsigned) d->ports[i].host_port);
		json_t *v = json_object_get(bindings, key);
		if (!v) {
			v = json_array();
			json_object_set_new(bindings, key, v);
		}
		json_array_append_new(v, json_pack("{s:s,s:s}", "HostIp", d->ports[i].addr, "HostPort", hp));
	}
	if (d->n_exposed)
		json_object_set(cfg, "ExposedPorts", exposed);
	json_object_set(host, "PortBindings", bindings);
	json_object_set_new(host, "PublishAllPorts", json_boolean(d->publish_all));
	json_decref(exposed);
	json_decref(bindings);
}

/* container.json: what was asked, in Docker's names where it has them,
 * the limits as the configuration has them. */
static json_t *container_info(const docker_run *d, const char *id, const char *name, const nsbox_config *cfg)
{
	char now[64];
	now_rfc3339(now, sizeof(now));
	json_t *limits = NULL;
	nsbox_result *r = NULL;
	char *text = NULL;
	if (nsbox_result_new_failed(cfg, NULL, &r, NULL) == 0 && nsbox_result_to_json(r, &text, NULL) == 0) {
		json_t *rec = json_loads(text, 0, NULL);
		limits = json_incref(json_object_get(rec, "limits"));
		json_decref(rec);
	}
	free(text);
	nsbox_result_free(r);
	json_t *cmd = json_array(), *args = json_array(), *env = json_array(), *labels = json_object(),
	       *binds = json_array();
	for (int i = 0; i < d->argc; i++)
		json_array_append_new(cmd, json_string(d->argv[i]));
	int n = 0;
	const char **all = command(d, &n);
	for (int i = 1; all && i < n; i++)
		json_array_append_new(args, json_string(all[i]));
	for (size_t i = 0; i < d->n_env; i++)
		json_array_append_new(env, json_string(d->env[i]));
	for (size_t i = 0; i < d->n_labels; i++) {
		const char *eq = strchr(d->labels[i], '=');
		char *k = strndup(d->labels[i], eq ? (size_t) (eq - d->labels[i]) : strlen(d->labels[i]));
		if (k)
			json_object_set_new(labels, k, json_string(eq ? eq + 1 : ""));
		free(k);
	}
	for (size_t i = 0; i < d->a.n_settings; i++)
		if (!strcmp(d->a.settings[i].key, "filesystem.mounts"))
			json_array_append_new(binds, json_string(d->a.settings[i].value));
	json_int_t mem = json_integer_value(json_object_get(limits, "memory_bytes"));
	double cpus = json_number_value(json_object_get(limits, "cpus"));
	json_t *info = json_pack(
		"{s:s,s:s,s:s,s:s,s:s?,s:o,"
		"s:{s:s,s:O,s:o,s:o,s:s,s:s,s:o,s:b,s:b,s:b,s:s?,s:s,s:i},"
		"s:{s:I,s:I,s:I,s:O?,s:b,s:s,s:b,s:o},"
		"s:{s:b,s:I,s:O?}}",
		"Id", id, "Name", name, "Created", now, "Image", d->image, "Path", all && n ? all[0] : NULL, "Args", args,
		"Config", "Image", d->image, "Cmd", cmd,
		"Entrypoint", d->entrypoint ? json_pack("[s]", d->entrypoint) : json_null(), "Env", env, "WorkingDir",
		d->workdir ? d->workdir : "", "User", d->user ? d->user : "", "Labels", labels, "Tty", d->tty, "OpenStdin",
		d->a.interactive, "AttachStdout", !d->detach, "Hostname", d->hostname, "StopSignal",
		signal_name(d->stop_signal), "StopTimeout", d->stop_timeout,
		"HostConfig", "Memory", mem, "MemorySwap", mem, "NanoCpus", (json_int_t) (cpus * 1e9), "PidsLimit",
		json_object_get(limits, "pids"), "ReadonlyRootfs", 1, "NetworkMode", network_mode(cfg), "AutoRemove",
		d->rm, "Binds", binds,
		"nsbox", "Detached", d->detach, "ExecTimeoutMs", (json_int_t) nsbox_config_timeout_ms(cfg), "Limits", limits);
	free(all);
	json_decref(cmd);
	json_decref(limits);
	add_ports(info, d);
	return info;
}

/* --cidfile: a new file with the id (Docker refuses an existing one). */
static int write_cidfile(const char *path, const char *id)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		print_msg("docker run: --cidfile '%s': %s", path, strerror(errno));
		return -1;
	}
	int r = write(fd, id, strlen(id)) == (ssize_t) strlen(id) ? 0 : -1;
	close(fd);
	return r;
}

/* A container for this run: its directory, lock, container.json. */
static int register_container(docker_run *d, const nsbox_config *cfg, int *base, int *dirfd, int *lock_fd,
                              char *name, size_t name_len, char *id)
{
	*base = *dirfd = *lock_fd = -1;
	if (random_hex(id, 32) < 0) {
		print_msg("docker run: no randomness for the container's id");
		return -1;
	}
	if (d->a.name)
		snprintf(name, name_len, "%s", d->a.name);
	else
		snprintf(name, name_len, "nsbox_%.12s", id);
	d->a.name = name;
	if ((*base = store_open(true)) < 0 || store_create(*base, name, dirfd, lock_fd) < 0)
		return -1;
	json_t *info = container_info(d, id, name, cfg);
	/* A run in the foreground is this process's from now on (docker stop
	 * signals it); a detached one is its runner's once it runs. */
	json_t *created = d->detach ? json_pack("{s:s,s:b,s:i,s:b,s:s}", "Status", "created", "Running", 0, "ExitCode", 0,
	                                        "OOMKilled", 0, "Error", "")
	                            : state_running();
	int r = info && created && store_write(*dirfd, "container.json", info) == 0 &&
	        store_write(*dirfd, "state.json", created) == 0 ? 0 : -1;
	json_decref(info);
	json_decref(created);
	if (r == 0 && d->cidfile)
		r = write_cidfile(d->cidfile, id);
	if (r < 0) {
		print_msg("docker run: could not record container '%s'", name);
		(void) store_remove(*base, name);
	}
	return r;
}

/* ---- the foreground ------------------------------------------------------------ */

typedef struct fg {
	docker_run *d;
	nsbox_config *cfg;
	int base, dirfd;          /* a registered container's, or -1 */
	const char *name;
	bool keep;                /* --name or --cidfile: it stays once ended */
} fg;

/* Published ports are forwarded by the monitor of a started sandbox: with
 * -p, the command runs in one (as a detached container's does), owned by
 * this process (it stops when we end, or are killed), and the container
 * records where its ports are bound. 0, or -1 having said why. */
static int fg_sandbox(fg *f, nsbox_sandbox **sb)
{
	run_args a = f->d->a;
	a.interactive = false;   /* the command's, not the sandbox's */
	char started[64];
	if (live_cli_start(&a, 0, started, sizeof(started), sb) != 0)
		return -1;
	json_t *ports = ports_bound(*sb);
	int r = ports ? store_set_ports(f->dirfd, ports) : -1;
	if (ports && r < 0)
		print_msg("docker run: could not record the ports of container '%s': %s", f->name, strerror(-r));
	json_decref(ports);
	if (r < 0) {
		nsbox_sandbox_free(*sb);
		*sb = NULL;
		return -1;
	}
	return 0;
}

/* The run itself. With -t the library gives the command a terminal of its
 * own (NSBOX_SPAWN_TTY), relayed to ours; nsbox's own messages stay on our
 * stderr. */
static int fg_body(void *arg)
{
	fg *f = arg;
	bool tty = f->d->tty;
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (tty)
		sigaddset(&set, SIGWINCH);   /* the terminal's size follows ours */
	(void) sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	nsbox_sandbox *sb = NULL;
	const char **cmd = NULL;
	int n = 0;
	if (f->d->n_ports && (fg_sandbox(f, &sb) < 0 || !(cmd = command(f->d, &n)))) {
		/* Nothing ran: nothing is left (a container that never started). */
		if (f->dirfd >= 0)
			(void) store_remove(f->base, f->name);
		nsbox_sandbox_free(sb);
		if (sfd >= 0)
			close(sfd);
		(void) sigprocmask(SIG_SETMASK, &old, NULL);
		return DOCKER_EXIT_RUN;
	}
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = NSBOX_RUN_UNDUMPABLE | (tty ? NSBOX_SPAWN_TTY : 0),
		/* In the started sandbox, its configuration's timeout (0). */
		.config = sb ? NULL : f->cfg,
		.sandbox = sb,
		.argv = cmd,
		.stdin_fd = f->d->a.interactive ? 0 : -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = sfd,
		.stats_fd = -1,
		.on_warning = print_warning,
		.warning_userdata = sb ? (void *) nsbox_sandbox_warning(sb) : NULL,
	};
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int rc = DOCKER_EXIT_RUN;
	bool oom = false;
	const char *why_text = NULL;
	int ran = nsbox_run(&o, &res, &e);
	if (res) {
		const nsbox_error *why = nsbox_result_error(res);
		if (why) {
			print_error(why);
			why_text = nsbox_error_message(why);
			/* A reference that is not in the store: Docker would pull it. */
			if (!strcmp(nsbox_error_step(why), "rootfs") && strpbrk(f->d->image, ":/"))
				print_msg("docker run pulls nothing: nsbox docker pull %s first", f->d->image);
		}
		rc = nsbox_result_exit_status(res);
		oom = nsbox_result_status(res) == NSBOX_STATUS_OOM_KILLED;
	}
	if (ran < 0) {
		print_error(e);
		why_text = nsbox_error_message(e);
		rc = DOCKER_EXIT_RUN;
	}
	free(cmd);
	nsbox_sandbox_free(sb);   /* ours: it stops */
	if (f->dirfd >= 0) {
		if (f->d->rm || !f->keep) {
			(void) store_remove(f->base, f->name);
		} else if (store_end(f->base, f->dirfd, f->name, rc, oom, why_text) < 0) {
			print_msg("warning: docker run: could not record how container '%s' ended", f->name);
		}
	}
	nsbox_error_free(e);
	nsbox_result_free(res);
	if (sfd >= 0)
		close(sfd);
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static int run_foreground(docker_run *d)
{
	nsbox_config *cfg = NULL;
	if (build_config(d, NULL, &cfg) < 0)
		return DOCKER_EXIT_RUN;
	fg f = { .d = d, .cfg = cfg, .base = -1, .dirfd = -1, .keep = d->a.name || d->cidfile };
	int lock_fd = -1, rc = DOCKER_EXIT_RUN;
	char name[64], id[65];
	/* With -p it is a container while it runs (docker port, ps), and
	 * leaves nothing afterwards unless named. */
	if ((f.keep || d->n_ports) &&
	    register_container(d, cfg, &f.base, &f.dirfd, &lock_fd, name, sizeof(name), id) < 0)
		goto out;
	f.name = d->a.name;
	rc = fg_body(&f);
out:
	if (d->a.name == name)
		d->a.name = NULL;   /* the generated name was this frame's */
	if (lock_fd >= 0)
		close(lock_fd);
	if (f.dirfd >= 0)
		close(f.dirfd);
	if (f.base >= 0)
		close(f.base);
	nsbox_config_free(cfg);
	return rc;
}

/* ---- detached ----------------------------------------------------------------- */

/* The runner: a session of its own, nothing of ours but its errors (er)
 * until the container runs ('O' on st). Our ends of the pipes stay. */
static pid_t fork_runner(docker_run *d, nsbox_config *cfg, int base, int dirfd, int lock_fd, int st[2], int er[2])
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid != 0) {
		if (pid > 0) {
			close(st[1]);
			close(er[1]);
		}
		return pid;
	}
	close(st[0]);
	close(er[0]);
	(void) setsid();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		(void) dup2(null, 0);
		(void) dup2(null, 1);
		close(null);
	}
	(void) dup2(er[1], 2);
	close(er[1]);
	nsbox_config_free(cfg);
	runner_main(d, base, dirfd, lock_fd, st[1]);
}

static int run_detached(docker_run *d)
{
	/* The configuration is made here to check it and describe the
	 * container; live_cli_start makes the sandbox's from the same settings. */
	nsbox_config *cfg = NULL;
	if (build_config(d, NULL, &cfg) < 0)
		return DOCKER_EXIT_RUN;
	int base = -1, dirfd = -1, lock_fd = -1, rc = DOCKER_EXIT_RUN;
	char name[64], id[65];
	int st[2] = { -1, -1 }, er[2] = { -1, -1 };
	if (register_container(d, cfg, &base, &dirfd, &lock_fd, name, sizeof(name), id) < 0)
		goto out;
	if (pipe2(st, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0) {
		print_msg("docker run: %s", strerror(errno));
		(void) store_remove(base, name);
		goto out;
	}
	pid_t pid = fork_runner(d, cfg, base, dirfd, lock_fd, st, er);
	if (pid < 0) {
		print_msg("docker run: fork: %s", strerror(errno));
		(void) store_remove(base, name);
		goto out;
	}
	st[1] = er[1] = -1;
	char ok = 0;
	ssize_t n;
	while (read(st[0], &ok, 1) < 0 && errno == EINTR)
		;
	/* The runner's messages (warnings; the reason it failed). */
	char buf[4096];
	while ((n = read(er[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			(void) !write(2, buf, (size_t) n);
	if (ok == 'O') {
		printf("%s\n", id);
		rc = 0;
	} else {
		(void) waitpid(pid, NULL, 0);
	}
out:
	if (d->a.name == name)
		d->a.name = NULL;   /* the generated name was this frame's */
	for (int i = 0; i < 2; i++) {
		if (st[i] >= 0)
			close(st[i]);
		if (er[i] >= 0)
			close(er[i]);
	}
	if (lock_fd >= 0)
		close(lock_fd);
	if (dirfd >= 0)
		close(dirfd);
	if (base >= 0)
		close(base);
	nsbox_config_free(cfg);
	return rc;
}

int docker_cmd_run(int argc, char **argv)
{
	docker_run d;
	char err[1024];
	if (docker_run_parse(argc, argv, environ, &d, err, sizeof(err)) < 0) {
		print_msg("docker run: %s (see 'nsbox docker run --help')", err);
		docker_run_free(&d);
		return DOCKER_EXIT_RUN;
	}
	if (d.help) {
		docker_run_help(stdout);
		docker_run_free(&d);
		return 0;
	}
	char buf[256];
	const char *image = docker_image_name(d.image, buf, sizeof(buf), err, sizeof(err));
	setting *s = image ? realloc(d.a.settings, (d.a.n_settings + 1) * sizeof(*s)) : NULL;
	int rc = DOCKER_EXIT_RUN;
	if (!image) {
		print_msg("docker run: %s", err);
	} else if (s) {
		d.a.settings = s;
		s[d.a.n_settings++] = (setting){ "image", image, "IMAGE" };
		rc = d.detach ? run_detached(&d) : run_foreground(&d);
	}
	docker_run_free(&d);
	return rc;
}
