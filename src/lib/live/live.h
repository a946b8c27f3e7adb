/* Starting a sandbox's monitor (live.c) and the monitor's program
 * (monitor.c, run as nsbox-monitor). */
#ifndef NSBOX_LIVE_LIVE_H
#define NSBOX_LIVE_LIVE_H

/* The fds the monitor is started with. */
enum {
	LIVE_FD_LOCK = 3,     /* NAME.lock, flock'ed by the starter for it */
	LIVE_FD_DIR = 4,      /* the directory of sandboxes */
	LIVE_FD_CONFIG = 5,   /* the configuration, as a policy (a memfd) */
	LIVE_FD_READY = 6,    /* 'O' + warning, or 'E' + the error's JSON */
	LIVE_FD_OWNER = 7,    /* with --owner: a pidfd of the starter */
};

/* nsbox-monitor's main: 0 when the sandbox ended, 1 when it could not
 * start (its starter was told why), LIVE_NOT_BY_HAND when it was not
 * started by the library (its fds or arguments are not there). It never
 * prints: the program says what the status means. */
enum { LIVE_NOT_BY_HAND = 2 };
int live_monitor_main(int argc, char **argv);

#endif
