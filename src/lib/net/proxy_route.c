/* Whether a resolved address is this host's own. The address classes of
 * proxy_addr.c name the ranges that are someone's inside everywhere; but
 * the host's public addresses are inside too: a service bound to 0.0.0.0
 * answers on them. Only the kernel knows them all (interface addresses,
 * "local" routes of whole ranges), so ask it where it would send a
 * packet, in the proxy's own network namespace: only a unicast route
 * leads off this host. */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/proxy.h"

static int route_type(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type != RTM_NEWROUTE)
		return MNL_CB_OK;
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	*(int *) data = rtm->rtm_type;
	return MNL_CB_STOP;
}

const char *proxy_addr_route(const struct sockaddr *sa)
{
	int family = sa->sa_family;
	const void *addr;
	size_t alen;
	if (family == AF_INET) {
		addr = &((const struct sockaddr_in *) sa)->sin_addr;
		alen = 4;
	} else if (family == AF_INET6) {
		const uint8_t *a6 = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;
		static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (!memcmp(a6, mapped, sizeof(mapped))) {
			family = AF_INET;   /* a mapped address is reached over IPv4 */
			addr = a6 + 12;
			alen = 4;
		} else {
			addr = a6;
			alen = 16;
		}
	} else {
		return "not an IP address";
	}

	uint8_t buf[8192] __attribute__((aligned(4)));   /* one route: far smaller */
	memset(buf, 0, sizeof(buf));
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = (unsigned) time(NULL);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = (unsigned char) family;
	rtm->rtm_dst_len = (unsigned char) (alen * 8);
	mnl_attr_put(nlh, RTA_DST, alen, addr);

	const char *unknown = "of unknown reach (the route lookup failed)";
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl)
		return unknown;
	int type = -1;
	const char *what = unknown;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 || mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		goto out;
	unsigned seq = nlh->nlmsg_seq, portid = mnl_socket_get_portid(nl);
	ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n < 0)
		goto out;
	if (mnl_cb_run(buf, (size_t) n, seq, portid, route_type, &type) < 0) {
		/* No route at all: the connection cannot leave either, and
		 * connect() says so. Anything else is unknown: refused. */
		if (errno == ENETUNREACH || errno == EHOSTUNREACH)
			what = NULL;
		goto out;
	}
	switch (type) {
	case RTN_UNICAST:
		what = NULL;
		break;
	case RTN_LOCAL:
		what = "this host's own";
		break;
	case RTN_BROADCAST:
	case RTN_MULTICAST:
	case RTN_ANYCAST:
		what = "a broadcast or multicast address here";
		break;
	case RTN_BLACKHOLE:
	case RTN_UNREACHABLE:
	case RTN_PROHIBIT:
		what = NULL;   /* the kernel refuses it itself */
		break;
	default:
		break;
	}
out:
	mnl_socket_close(nl);
	return what;
}
