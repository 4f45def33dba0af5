/*
 * SIGINT and SIGTERM as a request to stop at the next safe point instead of
 * at once: the import commits the rows it has read, reports, and exits with
 * EC_INTERRUPTED (status 130), saying that a rerun goes on from there.  A
 * second signal ends the process at once, as without a handler (which is
 * safe too: every batch is its own transaction).
 */
#ifndef V7FILL_INTERRUPT_H
#define V7FILL_INTERRUPT_H

#include <stdbool.h>

/* Install the handlers (SA_RESTART: file I/O and libpq carry on). */
void interrupt_install(void);
/* The signal received since interrupt_install(), or 0. */
int interrupt_signal(void);
/* Its name for messages: "SIGINT (Ctrl-C)" or "SIGTERM". */
const char *interrupt_name(void);

#endif /* V7FILL_INTERRUPT_H */
