/*
 * The handler only records the signal; the import's reading loop looks at it
 * once per record.  SA_RESETHAND restores the default action, so a second
 * Ctrl-C ends the process at once.
 */
#include "v7fill/interrupt.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* Set in whichever thread the signal lands and read in both: a lock-free
 * atomic (safe in a handler), not a volatile sig_atomic_t, which only
 * covers the thread the handler interrupted. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the handler needs a lock-free atomic int");
static atomic_int received;

static void
on_signal(int sig)
{
    atomic_store_explicit(&received, sig, memory_order_relaxed);
}

void
interrupt_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    (void) sigemptyset(&sa.sa_mask);
    (void) sigaction(SIGINT, &sa, NULL);
    (void) sigaction(SIGTERM, &sa, NULL);
}

int
interrupt_signal(void)
{
    return atomic_load_explicit(&received, memory_order_relaxed);
}

const char *
interrupt_name(void)
{
    return interrupt_signal() == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM";
}
