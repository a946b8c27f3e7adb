/* How Docker writes ports: docker ps's PORTS column (its grouping of
 * consecutive ports), docker port's order (natural: 8000 before 10000), and
 * addresses with their port (IPv6 in brackets). Pure: unit-tested
 * (tests/unit/test_docker.c). */
#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"

typedef struct port_row {
	unsigned private_port, public_port;
	const char *ip;      /* NULL: not published */
	char type[8];
} port_row;

/* As Go's netip.Addr.Less: none first, then IPv4, then IPv6, by bytes. */
static int ip_cmp(const char *a, const char *b)
{
	unsigned char x[16] = { 0 }, y[16] = { 0 };
	int fa = !a ? 0 : inet_pton(AF_INET, a, x) == 1 ? 1 : inet_pton(AF_INET6, a, x) == 1 ? 2 : 3;
	int fb = !b ? 0 : inet_pton(AF_INET, b, y) == 1 ? 1 : inet_pton(AF_INET6, b, y) == 1 ? 2 : 3;
	if (fa != fb)
		return fa - fb;
	return fa == 3 ? strcmp(a, b) : memcmp(x, y, sizeof(x));
}

static int row_cmp(const void *pa, const void *pb)
{
	const port_row *a = pa, *b = pb;
	if (a->private_port != b->private_port)
		return a->private_port < b->private_port ? -1 : 1;
	int c = ip_cmp(a->ip, b->ip);
	if (c)
		return c;
	if (a->public_port != b->public_port)
		return a->public_port < b->public_port ? -1 : 1;
	return strcmp(a->type, b->type);
}

/* Go's net.JoinHostPort. */
void ports_host_port(FILE *f, const char *ip, const char *port)
{
	fprintf(f, strchr(ip, ':') ? "[%s]:%s" : "%s:%s", ip, port);
}

typedef struct port_group {
	const char *ip;
	const char *type;
	unsigned first, last;
} port_group;

static void group_out(FILE *f, bool *sep, const port_group *g)
{
	char range[16];
	if (g->first == g->last)
		snprintf(range, sizeof(range), "%u", g->first);
	else
		snprintf(range, sizeof(range), "%u-%u", g->first, g->last);
	fputs(*sep ? ", " : "", f);
	*sep = true;
	if (g->ip) {
		ports_host_port(f, g->ip, range);
		fprintf(f, "->");
	}
	fprintf(f, "%s/%s", range, g->type);
}

/* Docker's grouping (docker ps): ports published on the same port number
 * of the same address, and unpublished ones, in runs of consecutive
 * numbers (80-81/tcp, 127.0.0.1:80-81->80-81/tcp) in the order each group
 * first appeared; then the others (127.0.0.1:8080->80/tcp), in order. */
static void display_rows(FILE *f, port_row *rows, size_t n)
{
	if (n)
		qsort(rows, n, sizeof(*rows), row_cmp);
	port_group *groups = calloc(n ? n : 1, sizeof(*groups));
	size_t ng = 0;
	bool sep = false;
	for (size_t i = 0; groups && i < n; i++) {
		const port_row *r = &rows[i];
		if (r->ip && r->public_port != r->private_port)
			continue;   /* a mapping: afterwards */
		port_group *g = NULL;
		for (size_t k = 0; k < ng && !g; k++)
			if (!strcmp(groups[k].type, r->type) && (groups[k].ip && r->ip ? !strcmp(groups[k].ip, r->ip)
			                                                                : !groups[k].ip && !r->ip))
				g = &groups[k];
		if (!g) {
			groups[ng++] = (port_group){ r->ip, r->type, r->private_port, r->private_port };
		} else if (r->private_port == g->last + 1) {
			g->last = r->private_port;
		} else {
			group_out(f, &sep, g);
			g->first = g->last = r->private_port;
		}
	}
	for (size_t k = 0; k < ng; k++)
		group_out(f, &sep, &groups[k]);
	free(groups);
	for (size_t i = 0; i < n; i++) {
		const port_row *r = &rows[i];
		if (!r->ip || r->public_port == r->private_port)
			continue;
		char pub[16];
		snprintf(pub, sizeof(pub), "%u", r->public_port);
		fputs(sep ? ", " : "", f);
		sep = true;
		ports_host_port(f, r->ip, pub);
		fprintf(f, "->%u/%s", r->private_port, r->type);
	}
}

char *ports_display(json_t *ports)
{
	size_t n = 0, cap = 0;
	port_row *rows = NULL;
	const char *key;
	json_t *v;
	json_object_foreach(ports, key, v) {
		port_row r = { 0 };
		char *slash = strchr(key, '/');
		r.private_port = (unsigned) strtoul(key, NULL, 10);
		snprintf(r.type, sizeof(r.type), "%s", slash ? slash + 1 : "tcp");
		size_t k, m = json_is_array(v) && json_array_size(v) ? json_array_size(v) : 1;
		for (k = 0; k < m; k++) {
			json_t *b = json_array_get(v, k);
			if (n == cap) {
				port_row *nr = realloc(rows, (cap = cap ? 2 * cap : 8) * sizeof(*rows));
				if (!nr) {
					free(rows);
					return NULL;
				}
				rows = nr;
			}
			rows[n] = r;
			if (b) {
				rows[n].ip = json_string_value(json_object_get(b, "HostIp"));
				if (rows[n].ip && !*rows[n].ip)
					rows[n].ip = NULL;   /* as Go's invalid address: not shown */
				rows[n].public_port = (unsigned) strtoul(json_string_value(json_object_get(b, "HostPort")) ?: "0",
				                                          NULL, 10);
			}
			n++;
		}
	}
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f) {
		display_rows(f, rows, n);
		if (fclose(f) != 0) {
			free(text);
			text = NULL;
		}
	}
	free(rows);
	return text;
}

/* sortorder.NaturalLess, which docker port sorts with: runs of digits by
 * their value (then the fewer leading zeros first), digits before other
 * bytes, other bytes as they are. */
int ports_natural_cmp(const char *a, const char *b)
{
	while (*a && *b) {
		bool da = isdigit((unsigned char) *a), db = isdigit((unsigned char) *b);
		if (da != db)
			return da ? -1 : 1;
		if (!da) {
			if (*a != *b)
				return (unsigned char) *a < (unsigned char) *b ? -1 : 1;
			a++, b++;
			continue;
		}
		const char *za = a, *zb = b;
		while (*a == '0')
			a++;
		while (*b == '0')
			b++;
		const char *na = a, *nb = b;
		while (isdigit((unsigned char) *a))
			a++;
		while (isdigit((unsigned char) *b))
			b++;
		if (a - na != b - nb)
			return a - na < b - nb ? -1 : 1;
		int c = strncmp(na, nb, (size_t) (a - na));
		if (c)
			return c;
		if (na - za != nb - zb)
			return na - za < nb - zb ? -1 : 1;
	}
	return *a ? 1 : *b ? -1 : 0;
}
