/*
 * libFuzzer target: UUID text parsing, formatting round trip and the v7
 * checks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/uuid7.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Err err;
    Uuid u;
    char *text = malloc(size ? size : 1);

    memcpy(text, data, size);
    if (uuid_parse(text, size, &u, &err))
    {
        char out[UUID_TEXT_SIZE];
        Uuid again;

        uuid_format(&u, out);
        if (!uuid_parse(out, strlen(out), &again, &err) || uuid_compare(&u, &again) != 0)
            abort();
        if (uuid7_check(&u, &err) && uuid7_us(&u) / 1000 != uuid7_ms(&u))
            abort();
    }
    free(text);
    return 0;
}
