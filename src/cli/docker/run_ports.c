/* docker run's ports: -p/--publish [IP:][HOSTPORT:]PORT[/tcp] (HOSTPORT and
 * PORT may be ranges A-B of the same length), --expose PORT[-PORT][/tcp],
 * and -P/--publish-all (each --expose port on a free host port). They turn
 * into the library's "[ADDR:]HOSTPORT:PORT" (nsbox_live_options.publish,
 * kept in run_args.publish as nsbox start keeps its -p): the monitor of the
 * container's sandbox listens on the host and connects each connection to
 * PORT on the sandbox's own loopback, so the container keeps its network
 * mode (none by default).
 *
 * Where no IP is given, the library's default, 127.0.0.1, is the address:
 * Docker binds every interface, but a sandbox runs code nobody reviewed, and
 * a server it starts is for this host to look at; whoever wants it on the
 * network says so (-p 0.0.0.0:8080:80). Only TCP is forwarded: udp and sctp
 * are refused. No side effects: unit-tested (tests/unit/test_docker.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"
#include "docker/run_values.h"

/* "N" or "A-B" (A <= B), each 1..65535 (0 too with `zero`: any free host
 * port); "" is 0..0 with `zero`. 0, or -1. */
static int port_range(const char *s, size_t len, bool zero, unsigned *lo, unsigned *hi)
{
	if (len == 0) {
		*lo = *hi = 0;
		return zero ? 0 : -1;
	}
	char buf[16];
	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	char *dash = strchr(buf, '-');
	if (dash)
		*dash = '\0';
	unsigned v[2];
	const char *part[2] = { buf, dash ? dash + 1 : buf };
	for (int i = 0; i < 2; i++) {
		const char *p = part[i];
		if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 5)
			return -1;
		v[i] = (unsigned) strtoul(p, NULL, 10);
		if (v[i] > 65535 || (v[i] == 0 && (!zero || dash)))
			return -1;
	}
	if (v[0] > v[1])
		return -1;
	*lo = v[0];
	*hi = v[1];
	return 0;
}

/* The protocol after '/': tcp only. Sets *len to the part before it. */
static int protocol(const char *opt, const char *v, size_t *len, char *err, size_t errlen)
{
	const char *slash = strrchr(v, '/');
	*len = slash ? (size_t) (slash - v) : strlen(v);
	if (!slash || !strcmp(slash + 1, "tcp") || !strcmp(slash + 1, "TCP"))
		return 0;
	if (!strcmp(slash + 1, "udp") || !strcmp(slash + 1, "sctp") || !strcmp(slash + 1, "UDP") ||
	    !strcmp(slash + 1, "SCTP"))
		return dr_fail(err, errlen, "%s '%s': nsbox forwards TCP only (no %s)", opt, v, slash + 1);
	return dr_fail(err, errlen, "%s '%s': unknown protocol '%s' (tcp)", opt, v, slash + 1);
}

/* Add a port to the exposed ones (ascending, each once). */
static int expose_one(docker_run *d, unsigned port)
{
	size_t i = 0;
	while (i < d->n_exposed && d->exposed[i] < port)
		i++;
	if (i < d->n_exposed && d->exposed[i] == port)
		return 0;
	uint16_t *v = realloc(d->exposed, (d->n_exposed + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	d->exposed = v;
	memmove(v + i + 1, v + i, (d->n_exposed - i) * sizeof(*v));
	v[i] = (uint16_t) port;
	d->n_exposed++;
	return 0;
}

static int publish_one(docker_run *d, const char *addr, unsigned host_port, unsigned port, char *err,
                       size_t errlen)
{
	if (d->n_ports >= DOCKER_PORTS_MAX)
		return dr_fail(err, errlen, "--publish: nsbox publishes at most %d ports a container", DOCKER_PORTS_MAX);
	docker_port *v = realloc(d->ports, (d->n_ports + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	d->ports = v;
	docker_port *p = &v[d->n_ports++];
	*p = (docker_port){ .host_port = (uint16_t) host_port, .port = (uint16_t) port };
	snprintf(p->addr, sizeof(p->addr), "%s", addr);
	return expose_one(d, port);
}

/* Split [IP:][HOSTPORT:]PORT (the protocol taken off) as Docker does: the
 * last part is PORT, the one before HOSTPORT, the rest IP (an IPv6 address
 * bare or in brackets). */
static int split_spec(const char *v, size_t len, char *addr, size_t addr_len, const char **hp, size_t *hp_len,
                      const char **cp, size_t *cp_len)
{
	const char *end = v + len;
	const char *last = memrchr(v, ':', len);
	const char *prev = last ? memrchr(v, ':', (size_t) (last - v)) : NULL;
	addr[0] = '\0';
	*cp = last ? last + 1 : v;
	*cp_len = (size_t) (end - *cp);
	*hp = prev ? prev + 1 : v;
	*hp_len = last ? (size_t) (last - *hp) : 0;
	if (!prev)
		return 0;
	size_t n = (size_t) (prev - v);
	const char *a = v;
	if (n >= 2 && a[0] == '[' && a[n - 1] == ']') {
		a++;
		n -= 2;
	}
	if (n == 0 || n >= addr_len)
		return -1;
	memcpy(addr, a, n);
	addr[n] = '\0';
	return 0;
}

int dr_publish(docker_run *d, const char *v, char *err, size_t errlen)
{
	size_t len;
	if (protocol("--publish", v, &len, err, errlen) < 0)
		return -1;
	char addr[INET6_ADDRSTRLEN + 2];
	const char *hp, *cp;
	size_t hp_len, cp_len;
	unsigned hlo, hhi, clo, chi;
	unsigned char bin[16];
	if (split_spec(v, len, addr, sizeof(addr), &hp, &hp_len, &cp, &cp_len) < 0 ||
	    (addr[0] && inet_pton(AF_INET, addr, bin) != 1 && inet_pton(AF_INET6, addr, bin) != 1))
		return dr_fail(err, errlen, "--publish '%s': expected [IP:][HOSTPORT:]PORT, IP an address (127.0.0.1, "
		               "0.0.0.0, [::1])", v);
	if (port_range(cp, cp_len, false, &clo, &chi) < 0)
		return dr_fail(err, errlen, "--publish '%s': the container's port is 1..65535, or a range A-B", v);
	if (port_range(hp, hp_len, true, &hlo, &hhi) < 0)
		return dr_fail(err, errlen, "--publish '%s': the host port is 1..65535 (none or 0: any free one), or a "
		               "range A-B", v);
	if (hhi != hlo && clo == chi)
		return dr_fail(err, errlen, "--publish '%s': nsbox publishes a port on one host port, not on any of a "
		               "range: give HOSTPORT:PORT, or PORT alone for any free one", v);
	if (hhi != 0 && hhi - hlo != chi - clo)
		return dr_fail(err, errlen, "--publish '%s': the host's and the container's ranges differ in length", v);
	if (chi - clo >= DOCKER_PORTS_MAX)
		return dr_fail(err, errlen, "--publish '%s': nsbox publishes at most %d ports a container", v,
		               DOCKER_PORTS_MAX);
	for (unsigned p = clo; p <= chi; p++) {
		int r = publish_one(d, addr, hlo ? hlo + (p - clo) : 0, p, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

int dr_expose(docker_run *d, const char *v, char *err, size_t errlen)
{
	size_t len;
	unsigned lo, hi;
	if (protocol("--expose", v, &len, err, errlen) < 0)
		return -1;
	if (port_range(v, len, false, &lo, &hi) < 0)
		return dr_fail(err, errlen, "--expose '%s': expected PORT or a range PORT-PORT (1..65535)", v);
	for (unsigned p = lo; p <= hi; p++) {
		int r = expose_one(d, p);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Once every option is read: -P's ports, then the library's specs. */
int dr_ports_finish(docker_run *d, char *err, size_t errlen)
{
	if (d->publish_all) {
		if (!d->n_exposed)
			return dr_fail(err, errlen, "--publish-all: it publishes the --expose ports, and there are none "
			               "(nsbox images declare no ports): give --expose PORT, or -p");
		size_t given = d->n_ports;
		for (size_t i = 0; i < d->n_exposed; i++) {
			bool bound = false;
			for (size_t k = 0; k < given && !bound; k++)
				bound = d->ports[k].port == d->exposed[i];
			int r = bound ? 0 : publish_one(d, "", 0, d->exposed[i], err, errlen);
			if (r < 0)
				return r;
		}
	}
	if (!d->n_ports)
		return 0;
	const char **v = calloc(d->n_ports + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	free(d->a.publish);
	d->a.publish = v;
	d->a.n_publish = 0;
	for (size_t i = 0; i < d->n_ports; i++) {
		const docker_port *p = &d->ports[i];
		const char *s = !p->addr[0]        ? dr_own_fmt(d, "%u:%u", p->host_port, p->port)
		                : strchr(p->addr, ':') ? dr_own_fmt(d, "[%s]:%u:%u", p->addr, p->host_port, p->port)
		                                       : dr_own_fmt(d, "%s:%u:%u", p->addr, p->host_port, p->port);
		if (!s)
			return -ENOMEM;
		v[d->a.n_publish++] = s;
	}
	return 0;
}
