/* --network user: user-mode NAT by a helper program (pasta, from the passt
 * package, or slirp4netns) attached to the sandbox's network namespace. */
#ifndef NSBOX_NETUSER_H
#define NSBOX_NETUSER_H

#include <stdbool.h>
#include <sys/types.h>

#include "config/conf.h"
#include "base/error.h"

/* The addresses the sandbox sees, whichever helper serves it (slirp4netns'
 * defaults; pasta is told to use the same). */
#define NETUSER_ADDRESS "10.0.2.100"
#define NETUSER_GATEWAY "10.0.2.2"     /* the host's loopback, when allowed */
#define NETUSER_DNS     "10.0.2.3"     /* forwarded to the host's resolver */
#define NETUSER_RESOLV_CONF "nameserver " NETUSER_DNS "\n"

/* What the parent decided: which helper, where it is. */
typedef struct netuser_plan {
	enum net_helper kind;      /* HELPER_PASTA or HELPER_SLIRP4NETNS */
	char *path;                /* the helper's executable */
	bool host_loopback;        /* --allow-host-loopback */
	bool as_root;              /* we are host root: the helper keeps uid 0 */
} netuser_plan;

/* The running helper, supervisor side. */
typedef struct netuser {
	pid_t pid;                 /* the helper: not our child (see netuser.c) */
	int pidfd;
	int exit_fd;               /* slirp4netns --exit-fd: it quits when this closes */
	int log_fd;                /* a memfd holding its stderr */
	int life_fd;               /* the keeper kills the helper when this closes */
	int report_fd;             /* the keeper's reports: the helper's pid, then its status */
	int ready_fd;              /* readable once the helper configured the interface */
} netuser;

#define NETUSER_INIT ((netuser){ .pid = 0, .pidfd = -1, .exit_fd = -1, .log_fd = -1, .life_fd = -1, .report_fd = -1, .ready_fd = -1 })

const char *netuser_helper_name(enum net_helper kind);
/* Find the helper and check that it can work here (/dev/net/tun). */
int netuser_prepare(netuser_plan *np, const nsbox_config *cfg, bool rootless, nsbox_error **err);
void netuser_plan_free(netuser_plan *np);
/* Start the helper on the namespaces of `child` (its user namespace has its
 * id maps); then wait until it has configured the interface. */
int netuser_start(const netuser_plan *np, pid_t child, netuser *h, nsbox_error **err);
int netuser_wait(const netuser_plan *np, netuser *h, nsbox_error **err);
/* Stop it (if running) and release everything, without waiting for the
 * helper's slow exit; safe to call twice. */
void netuser_stop(netuser *h);

#endif
