/*
 * libFuzzer target: the time parser in every format, and durations.  The
 * first byte picks the format; the rest is the text (no terminating NUL, so
 * reads past the end are caught by ASan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static TimeParser *parsers[6];
    static const char *const formats[6] = {"iso", "epoch-s", "epoch-ms", "epoch-us",
                                           "%d/%m/%Y %H:%M:%S.%f %z", "iso"};
    Err err;
    int64_t us;
    char *copy;

    if (size < 1)
        return 0;
    if (parsers[0] == NULL)
    {
        for (int i = 0; i < 6; i++)
            if (!time_parser_new(formats[i], i == 5 ? "America/New_York" : NULL, &parsers[i], &err))
                abort();
    }
    {
        char *text = malloc(size - 1 ? size - 1 : 1);
        memcpy(text, data + 1, size - 1);
        (void) time_parse(parsers[data[0] % 6], text, size - 1, &us, &err);
        free(text);
    }
    copy = malloc(size);
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    (void) time_parse_iso(copy, &us, &err);
    (void) duration_parse(copy, &us, &err);
    free(copy);
    return 0;
}
