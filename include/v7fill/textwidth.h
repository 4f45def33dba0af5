/*
 * Terminal columns of UTF-8 text, for tables whose cells hold names from
 * the database ("ünï" is three columns, not five bytes).  Locale-free:
 * one column per character, none for combining marks, two for East Asian
 * wide characters; a byte that does not start a valid sequence counts one.
 */
#ifndef V7FILL_TEXTWIDTH_H
#define V7FILL_TEXTWIDTH_H

#include <stdio.h>

/* Columns `s` takes. */
int text_width(const char *s);

/* Print `s` cut to at most `max` columns (at a character boundary; max < 0:
 * no cut), then spaces up to `width` columns. */
void text_pad(FILE *out, const char *s, int width, int max);

#endif /* V7FILL_TEXTWIDTH_H */
