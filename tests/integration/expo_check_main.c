/*
 * expo_check_main: read a /metrics page on stdin and check every line against
 * the text exposition format 0.0.4 (tests/unit/expo_check.h, strict).
 * Exit 0 when valid, 1 with the broken rule on stderr.
 */
#include "../unit/expo_check.h"

int
main(void)
{
    size_t cap = 1 << 16, len = 0, n;
    char *text = malloc(cap);
    char why[512] = "";

    setlocale(LC_ALL, "C.UTF-8");
    while ((n = fread(text + len, 1, cap - len - 1, stdin)) > 0)
    {
        len += n;
        if (cap - len < 2)
            text = realloc(text, cap *= 2);
    }
    text[len] = '\0';
    if (!expo_check(text, true, why, sizeof why))
    {
        fprintf(stderr, "invalid exposition: %s\n", why);
        return 1;
    }
    free(text);
    return 0;
}
