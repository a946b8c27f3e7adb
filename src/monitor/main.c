/* nsbox-monitor: the monitor of a started sandbox (src/lib/live/monitor.c),
 * exec'd by nsbox_live_start() with its fds in place; not run by hand. */
#include "live/live.h"

int main(int argc, char **argv)
{
	return live_monitor_main(argc, argv);
}
