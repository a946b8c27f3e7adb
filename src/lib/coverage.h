/* `make coverage` (--enable-coverage): gcov writes its counts when a process
 * exits normally. Host-side helpers that end with _exit (the janitor, the
 * network keeper) dump them first, so that their code is counted too. The
 * sandbox's own processes cannot: they end by exec or after pivot_root,
 * where the build tree is out of sight. */
#ifndef NSBOX_COVERAGE_H
#define NSBOX_COVERAGE_H

#ifdef NSBOX_COVERAGE
void __gcov_dump(void);
static inline void coverage_dump(void) { __gcov_dump(); }
#else
static inline void coverage_dump(void) {}
#endif

#endif
