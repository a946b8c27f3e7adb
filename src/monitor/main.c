/* nsbox-monitor: the monitor of a started sandbox (src/lib/live/monitor.c),
 * exec'd by nsbox_live_start() with its fds in place; not run by hand. */
#include <stdio.h>

#include "live/live.h"

int main(int argc, char **argv)
{
	int r = live_monitor_main(argc, argv);
	if (r == LIVE_NOT_BY_HAND)
		fprintf(stderr, "nsbox-monitor: started by nsbox itself (nsbox start, or the library), not by hand\n");
	return r;
}
