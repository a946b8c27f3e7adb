/* docker ps: the containers, as Docker lists them (its columns, its
 * human durations, --filter, --format). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "opts.h"

static int64_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t) timegm(&tm);
}

/* Docker's human durations (go-units HumanDuration). */
static void human(int64_t secs, char *buf, size_t len)
{
	if (secs < 1)
		snprintf(buf, len, "Less than a second");
	else if (secs == 1)
		snprintf(buf, len, "1 second");
	else if (secs < 60)
		snprintf(buf, len, "%lld seconds", (long long) secs);
	else if (secs < 120)
		snprintf(buf, len, "About a minute");
	else if (secs < 3600)
		snprintf(buf, len, "%lld minutes", (long long) secs / 60);
	else if (secs < 7200)
		snprintf(buf, len, "About an hour");
	else if (secs < 48 * 3600)
		snprintf(buf, len, "%lld hours", (long long) secs / 3600);
	else if (secs < 14 * 86400)
		snprintf(buf, len, "%lld days", (long long) secs / 86400);
	else if (secs < 90 * 86400)
		snprintf(buf, len, "%lld weeks", (long long) secs / (7 * 86400));
	else if (secs < 730 * 86400)
		snprintf(buf, len, "%lld months", (long long) secs / (30 * 86400));
	else
		snprintf(buf, len, "%lld years", (long long) secs / (365 * 86400));
}

static void ago(const char *when, char *buf, size_t len)
{
	char h[64];
	human((int64_t) time(NULL) - parse_time(when), h, sizeof(h));
	snprintf(buf, len, "%s ago", h);
}

/* Kill a running container now: a detached one's sandbox is stopped (its
 * runner records the end), a foreground run's door is killed (its sandbox
 * dies with it) and the end recorded here. Waits until it has ended. */
/* ---- ps ------------------------------------------------------------------------- */

typedef struct ps_opts {
	bool all, quiet, no_trunc;
	const char *format;
	const char *filters[16];
	int n_filters;
	bool bad;
} ps_opts;

enum { P_ALL = 1, P_QUIET, P_NO_TRUNC, P_FILTER, P_FORMAT, P_HELP, P_SIZE };
static const opt_def ps_defs[] = {
	{ "all", 'a', OPT_BOOL, P_ALL, "show every container (default: the running ones)", NULL },
	{ "quiet", 'q', OPT_BOOL, P_QUIET, "only the ids", NULL },
	{ "no-trunc", 0, OPT_BOOL, P_NO_TRUNC, "whole ids and commands", NULL },
	{ "filter", 'f', "K=V", P_FILTER, "name=, id=, status=, label=K[=V] (repeatable)", NULL },
	{ "format", 0, "TEMPLATE", P_FORMAT, "a Go template: {{.ID}} {{.Names}} {{.Image}} {{.Status}}\n{{.State}} "
	  "{{.Command}} {{.CreatedAt}} {{.RunningFor}} {{.Labels}}\n{{.Ports}}", NULL },
	{ "help", 0, NULL, P_HELP, "print this help", NULL },
	{ 0 },
};

static void ps_take(int id, const char *v, void *ctx)
{
	ps_opts *o = ctx;
	switch (id) {
	case P_ALL: o->all = v; break;
	case P_QUIET: o->quiet = v; break;
	case P_NO_TRUNC: o->no_trunc = v; break;
	case P_FORMAT: o->format = v; break;
	case P_FILTER:
		if (o->n_filters < 16)
			o->filters[o->n_filters++] = v;
		break;
	case P_HELP:
		fputs("Usage: nsbox docker ps [OPTIONS]\nList the containers of nsbox docker run.\n\n", stdout);
		opt_help(stdout, ps_defs);
		o->bad = true;
		break;
	}
}

/* One row as docker ps --format sees it. */
static json_t *ps_row(const container *c, bool no_trunc)
{
	json_t *st = store_effective_state(c);
	const char *status = json_string_value(json_object_get(st, "Status"));
	char when[96] = "", run_for[96];
	const char *created = json_string_value(json_object_get(c->info, "Created"));
	human((int64_t) time(NULL) - parse_time(created), run_for, sizeof(run_for));
	if (status && !strcmp(status, "running")) {
		char h[64];
		human((int64_t) time(NULL) - parse_time(json_string_value(json_object_get(st, "StartedAt"))), h, sizeof(h));
		snprintf(when, sizeof(when), "Up %s", h);
	} else if (status && !strcmp(status, "exited")) {
		char a[80];
		ago(json_string_value(json_object_get(st, "FinishedAt")), a, sizeof(a));
		snprintf(when, sizeof(when), "Exited (%lld) %s", (long long) json_integer_value(json_object_get(st, "ExitCode")),
		         a);
	} else {
		snprintf(when, sizeof(when), "Created");
	}
	/* The command, quoted, as Docker shows it (20 characters unless
	 * --no-trunc). */
	char cmd[512] = "";
	size_t n = 0;
	const char *path = json_string_value(json_object_get(c->info, "Path"));
	n += (size_t) snprintf(cmd, sizeof(cmd), "%s", path ? path : "");
	size_t i;
	json_t *arg;
	json_array_foreach(json_object_get(c->info, "Args"), i, arg)
		if (n < sizeof(cmd))
			n += (size_t) snprintf(cmd + n, sizeof(cmd) - n, " %s", json_string_value(arg));
	char quoted[600];
	if (!no_trunc && strlen(cmd) > 20)
		snprintf(quoted, sizeof(quoted), "\"%.19s…\"", cmd);
	else
		snprintf(quoted, sizeof(quoted), "\"%s\"", cmd);
	char labels[1024] = "";
	const char *k;
	json_t *lv;
	size_t ln = 0;
	json_object_foreach(json_object_get(json_object_get(c->info, "Config"), "Labels"), k, lv)
		if (ln < sizeof(labels))
			ln += (size_t) snprintf(labels + ln, sizeof(labels) - ln, "%s%s=%s", ln ? "," : "", k,
			                        json_string_value(lv));
	char created_at[64] = "";
	time_t t = (time_t) parse_time(created);
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(created_at, sizeof(created_at), "%Y-%m-%d %H:%M:%S +0000 UTC", &tm);
	char run_for_ago[128];
	snprintf(run_for_ago, sizeof(run_for_ago), "%s ago", run_for);
	json_t *ports = ports_effective(c, json_is_true(json_object_get(st, "Running")));
	char *shown = ports ? ports_display(ports) : NULL;
	json_decref(ports);
	json_t *row = json_pack("{s:s%,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "ID", c->id, no_trunc ? (size_t) 64 : 12,
	                        "Image", json_string_value(json_object_get(c->info, "Image")), "Command", quoted, "CreatedAt",
	                        created_at, "RunningFor", run_for_ago, "Status", when, "State", status ? status : "created",
	                        "Names", c->name, "Labels", labels, "Ports", shown ? shown : "", "Mounts", "");
	free(shown);
	json_decref(st);
	return row;
}

static bool ps_match(const container *c, json_t *row, const ps_opts *o)
{
	for (int i = 0; i < o->n_filters; i++) {
		const char *f = o->filters[i], *eq = strchr(f, '=');
		const char *v = eq ? eq + 1 : "";
		size_t kl = eq ? (size_t) (eq - f) : strlen(f);
		if (kl == 4 && !strncmp(f, "name", 4)) {
			if (!strstr(c->name, v))
				return false;
		} else if (kl == 2 && !strncmp(f, "id", 2)) {
			if (strncmp(c->id, v, strlen(v)))
				return false;
		} else if (kl == 6 && !strncmp(f, "status", 6)) {
			if (strcmp(json_string_value(json_object_get(row, "State")), v))
				return false;
		} else if (kl == 5 && !strncmp(f, "label", 5)) {
			const char *leq = strchr(v, '=');
			char key[256];
			snprintf(key, sizeof(key), "%.*s", (int) (leq ? (size_t) (leq - v) : strlen(v)), v);
			json_t *lab = json_object_get(json_object_get(json_object_get(c->info, "Config"), "Labels"), key);
			if (!lab || (leq && strcmp(json_string_value(lab), leq + 1)))
				return false;
		}
	}
	return true;
}

static int by_created(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *) a, "_created"));
	const char *y = json_string_value(json_object_get(*(json_t *const *) b, "_created"));
	return strcmp(y ? y : "", x ? x : "");
}

/* The rows to show, newest first (NULL-terminated; each a new reference). */
static json_t **ps_collect(const ps_opts *o, size_t *n)
{
	json_t **v = NULL;
	*n = 0;
	int base = store_open(false);
	DIR *d = base >= 0 ? fdopendir(base) : NULL;
	if (!d && base >= 0)
		close(base);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		container c;
		if (de->d_name[0] == '.' || store_find(dirfd(d), de->d_name, &c, true) < 0)
			continue;
		json_t *row = ps_row(&c, o->no_trunc);
		const char *state = json_string_value(json_object_get(row, "State"));
		json_t **nv = row ? realloc(v, (*n + 2) * sizeof(*v)) : NULL;
		if (nv && (o->all || !strcmp(state, "running")) && ps_match(&c, row, o)) {
			json_object_set(row, "_created", json_object_get(c.info, "Created"));
			v = nv;
			v[(*n)++] = row;
			v[*n] = NULL;
		} else {
			v = nv ? nv : v;
			json_decref(row);
		}
		container_free(&c);
	}
	if (d)
		closedir(d);
	if (v)
		qsort(v, *n, sizeof(*v), by_created);
	for (size_t i = 0; i < *n; i++)
		json_object_del(v[i], "_created");
	return v;
}

/* pw: the PORTS column's width (the longest). */
static int ps_print(const ps_opts *o, json_t *r, int pw)
{
	if (o->quiet) {
		printf("%s\n", json_string_value(json_object_get(r, "ID")));
	} else if (o->format) {
		char *out = NULL, err[256];
		int rc = go_template(o->format, r, &out, err, sizeof(err));
		if (rc < 0)
			print_msg("docker ps: --format: %s", out ? "out of memory" : err);
		else
			printf("%s\n", out);
		free(out);
		return rc;
	} else {
		printf("%-12s   %-15s %-22s %-15s %-24s %-*s %s\n", json_string_value(json_object_get(r, "ID")),
		       json_string_value(json_object_get(r, "Image")), json_string_value(json_object_get(r, "Command")),
		       json_string_value(json_object_get(r, "RunningFor")), json_string_value(json_object_get(r, "Status")), pw,
		       json_string_value(json_object_get(r, "Ports")), json_string_value(json_object_get(r, "Names")));
	}
	return 0;
}

int docker_cmd_ps(int argc, char **argv)
{
	ps_opts o = { 0 };
	int first;
	if (docker_parse_opts("ps", ps_defs, argc, argv, ps_take, &o, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (o.bad)
		return 0;
	if (first < argc) {
		print_msg("docker ps: unexpected argument '%s'", argv[first]);
		return DOCKER_EXIT_CMD;
	}
	for (int i = 0; i < o.n_filters; i++) {
		const char *f = o.filters[i];
		if (strncmp(f, "name=", 5) && strncmp(f, "id=", 3) && strncmp(f, "status=", 7) && strncmp(f, "label=", 6)) {
			print_msg("docker ps: --filter '%s': nsbox filters by name=, id=, status= and label=", f);
			return DOCKER_EXIT_CMD;
		}
	}
	size_t n;
	json_t **v = ps_collect(&o, &n);
	int rc = 0, pw = 6;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(json_string_value(json_object_get(v[i], "Ports")) ?: "");
		if (l + 1 > (size_t) pw && l < 4096)
			pw = (int) l + 1;
	}
	if (!o.quiet && !o.format)
		printf("%-12s   %-15s %-22s %-15s %-24s %-*s %s\n", "CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", pw,
		       "PORTS", "NAMES");
	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && ps_print(&o, v[i], pw) < 0)
			rc = DOCKER_EXIT_CMD;
		json_decref(v[i]);
	}
	free(v);
	return rc;
}
