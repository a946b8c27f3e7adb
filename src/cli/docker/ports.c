/* A container's ports as Docker shows them. What its sandbox's monitor
 * listens on (nsbox_live_list's "published") is kept in state.json while
 * the container runs ("Ports", Docker's NetworkSettings.Ports form:
 * {"80/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8080"}]}); with the
 * ports it declares (Config.ExposedPorts, null when not published) that is
 * docker inspect's NetworkSettings.Ports, docker ps's PORTS column (grouped
 * as Docker groups it) and docker port's lines. A container that does not
 * run has none. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "opts.h"

json_t *ports_bound(nsbox_sandbox *sb)
{
	char *list = NULL;
	nsbox_error *e = NULL;
	if (nsbox_live_list(&list, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return NULL;
	}
	json_t *all = json_loads(list, 0, NULL), *out = json_object(), *s;
	free(list);
	const char *name = nsbox_live_name(sb);
	bool found = false;
	size_t i, k;
	json_array_foreach(all, i, s) {
		if (!name || strcmp(json_string_value(json_object_get(s, "name")) ?: "", name))
			continue;
		found = true;
		json_t *p;
		json_array_foreach(json_object_get(s, "published"), k, p) {
			char key[32], hp[16];
			snprintf(key, sizeof(key), "%lld/tcp", (long long) json_integer_value(json_object_get(p, "port")));
			snprintf(hp, sizeof(hp), "%lld", (long long) json_integer_value(json_object_get(p, "host_port")));
			json_t *v = json_object_get(out, key);
			if (!v) {
				v = json_array();
				json_object_set_new(out, key, v);
			}
			json_array_append_new(v, json_pack("{s:s,s:s}", "HostIp",
			                                   json_string_value(json_object_get(p, "host")) ?: "", "HostPort", hp));
		}
	}
	json_decref(all);
	if (!found || !out) {
		print_msg("docker run: the ports of sandbox '%s': it is not listed (nsbox ps)", name ? name : "?");
		json_decref(out);
		return NULL;
	}
	return out;
}

json_t *ports_effective(const container *c, bool running)
{
	json_t *p = json_object();
	if (!running || !p)
		return p;
	json_t *bound = json_object_get(c->state, "Ports");
	if (json_is_object(bound))
		(void) json_object_update(p, bound);
	const char *key;
	json_t *v;
	json_object_foreach(json_object_get(json_object_get(c->info, "Config"), "ExposedPorts"), key, v)
		if (!json_object_get(p, key))
			json_object_set_new(p, key, json_null());
	return p;
}

static int natural_qsort(const void *a, const void *b)
{
	return ports_natural_cmp(*(char *const *) a, *(char *const *) b);
}

enum { PT_HELP = 1 };
static const opt_def port_defs[] = {
	{ "help", 0, NULL, PT_HELP, "print this help", NULL },
	{ 0 },
};

static void port_take(int id, const char *v, void *ctx)
{
	(void) v;
	if (id == PT_HELP) {
		fputs("Usage: nsbox docker port CONTAINER [PORT[/tcp]]\n"
		      "Where a running container's ports are published: each as 'PORT/tcp -> IP:HOSTPORT',\n"
		      "or with PORT, only its IP:HOSTPORT.\n\n", stdout);
		opt_help(stdout, port_defs);
		*(bool *) ctx = true;
	}
}

/* The lines docker port prints, or -1 having said why. */
static int port_lines(const container *c, json_t *ports, const char *want, char ***out, size_t *n)
{
	char key[32] = "";
	if (want) {
		const char *slash = strchr(want, '/');
		size_t pl = slash ? (size_t) (slash - want) : strlen(want);
		char *end = NULL;
		unsigned long p = strtoul(want, &end, 10);
		if (!pl || end != want + pl || p > 65535 || !isdigit((unsigned char) want[0])) {
			print_msg("docker port: invalid port '%.*s'", (int) pl, want);
			return -1;
		}
		snprintf(key, sizeof(key), "%lu/%s", p, slash ? slash + 1 : "tcp");
		json_t *fe = json_object_get(ports, key);
		if (!json_array_size(fe)) {
			print_msg("docker port: no public port '%s' published for %s", want, c->name);
			return -1;
		}
	}
	const char *k;
	json_t *fe;
	json_object_foreach(ports, k, fe) {
		if (want && strcmp(k, key))
			continue;
		size_t i;
		json_t *b;
		json_array_foreach(fe, i, b) {
			char *line = NULL;
			size_t len = 0;
			FILE *f = open_memstream(&line, &len);
			if (!f)
				return -1;
			if (!want)
				fprintf(f, "%s -> ", k);
			ports_host_port(f, json_string_value(json_object_get(b, "HostIp")) ?: "",
			          json_string_value(json_object_get(b, "HostPort")) ?: "");
			char **nv = fclose(f) == 0 ? realloc(*out, (*n + 1) * sizeof(char *)) : NULL;
			if (!nv) {
				free(line);
				return -1;
			}
			*out = nv;
			nv[(*n)++] = line;
		}
	}
	return 0;
}

int docker_cmd_port(int argc, char **argv)
{
	bool help = false;
	int first;
	if (docker_parse_opts("port", port_defs, argc, argv, port_take, &help, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (help)
		return 0;
	if (argc - first < 1 || argc - first > 2) {
		print_msg("docker port: usage: nsbox docker port CONTAINER [PORT[/tcp]]");
		return DOCKER_EXIT_CMD;
	}
	int base = store_open(false), rc = DOCKER_EXIT_CMD;
	container c = { .dirfd = -1 };
	if (base < 0)
		print_msg("no such container: %s", argv[first]);
	if (base < 0 || store_find(base, argv[first], &c, false) < 0) {
		if (base >= 0)
			close(base);
		return rc;
	}
	json_t *st = store_effective_state(&c);
	json_t *ports = ports_effective(&c, json_is_true(json_object_get(st, "Running")));
	char **lines = NULL;
	size_t n = 0;
	if (ports && port_lines(&c, ports, argc - first == 2 ? argv[first + 1] : NULL, &lines, &n) == 0) {
		if (n)
			qsort(lines, n, sizeof(*lines), natural_qsort);
		for (size_t i = 0; i < n; i++)
			printf("%s\n", lines[i]);
		rc = 0;
	}
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
	json_decref(ports);
	json_decref(st);
	container_free(&c);
	close(base);
	return rc;
}
