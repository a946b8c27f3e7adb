/* Network namespace setup: bring the loopback interface up.
 * The RTM_NEWLINK request is built with libmnl in the parent; the child only
 * sends it on a netlink socket and checks the kernel's acknowledgement with
 * mnl_cb_run, which neither allocates nor locks. */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plan/plan.h"

#define LOOPBACK_IFINDEX 1   /* lo is always the first interface of a netns */

int net_build_loopback_msg(nsbox_plan *p)
{
	memset(p->nl_msg, 0, sizeof(p->nl_msg));
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(p->nl_msg);
	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = LOOPBACK_IFINDEX;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	p->nl_len = nlh->nlmsg_len;
	return p->nl_len <= sizeof(p->nl_msg) ? 0 : -ENOMEM;
}

int net_loopback_up(const nsbox_plan *p)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int r = 0;
	if (sendto(fd, p->nl_msg, p->nl_len, 0, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		r = -errno;
		goto out;
	}
	char ack[4096];   /* an ack is an nlmsgerr: far smaller */
	ssize_t n = recv(fd, ack, sizeof(ack), 0);
	if (n < 0) {
		r = -errno;
		goto out;
	}
	/* mnl_cb_run returns -1 with errno set from an NLMSG_ERROR payload. */
	if (mnl_cb_run(ack, (size_t) n, 1, 0, NULL, NULL) < 0)
		r = -errno;
out:
	close(fd);
	return r;
}
