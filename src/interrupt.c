/*
 * The handler only records the signal; the import's reading loop looks at it
 * once per record.  SA_RESETHAND restores the default action, so a second
 * Ctrl-C ends the process at once.
 */
#include "v7fill/interrupt.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;

static void
on_signal(int sig)
{
    received = sig;
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
    return received;
}

const char *
interrupt_name(void)
{
    return received == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM";
}
