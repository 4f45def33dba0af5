/*
 * Logging to stderr with levels.  The level is tested before the arguments
 * are evaluated.  Never pass secrets or row values here.
 */
#ifndef V7FILL_LOG_H
#define V7FILL_LOG_H

#include "v7fill/err.h"

typedef enum LogLevel
{
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN,
    LOG_LEVEL_INFO,
    LOG_LEVEL_DETAIL,
    LOG_LEVEL_DEBUG,
} LogLevel;

extern LogLevel log_current_level;

void log_set_level(LogLevel level);
void log_write(LogLevel level, const char *fmt, ...) V7FILL_PRINTF(2, 3);

/* Print an Err as "ERROR: msg" plus DETAIL/HINT/SQLSTATE lines. */
void log_err(const Err *e);

#define log_at(lvl, ...)                                                                           \
    do                                                                                             \
    {                                                                                              \
        if ((lvl) <= log_current_level)                                                            \
            log_write((lvl), __VA_ARGS__);                                                         \
    } while (0)
#define log_error(...)  log_at(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)   log_at(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)   log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_detail(...) log_at(LOG_LEVEL_DETAIL, __VA_ARGS__)
#define log_debug(...)  log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif /* V7FILL_LOG_H */
