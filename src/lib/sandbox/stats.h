/* Live resource samples of a running sandbox. */
#ifndef NSBOX_STATS_H
#define NSBOX_STATS_H

#include "sandbox/sandbox.h"

void stats_sample(nsbox_sandbox *sb, cg_sample *s);
/* Write one JSON line to the sandbox's stats fd. */
void stats_write(nsbox_sandbox *sb);

#endif
