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

        char digits[40];
        size_t nd = 0;

        uuid_format(&u, out);
        if (!uuid_parse(out, strlen(out), &again, &err) || uuid_compare(&u, &again) != 0)
            abort();
        /* what was accepted is the value's 32 hex digits, in either case,
         * with nothing but hyphens between them and maybe braces around */
        for (size_t i = 0; i < size; i++)
        {
            char c = text[i];
            if (c == '-' || ((i == 0 || i == size - 1) && (c == '{' || c == '}')))
                continue;
            if (nd == 32)
                abort();
            digits[nd++] = (char) ((c >= 'A' && c <= 'F') ? c - 'A' + 'a' : c);
        }
        for (size_t i = 0, k = 0; i < UUID_TEXT_LEN; i++)
            if (out[i] != '-' && (k >= nd || out[i] != digits[k++]))
                abort();
        if (uuid7_check(&u, &err) && uuid7_us(&u) / 1000 != uuid7_ms(&u))
            abort();
    }
    free(text);
    return 0;
}
