/*
 * A checker for the Prometheus text exposition format 0.0.4, for the tests
 * (written from the format's description; no client library).  Included by
 * one test program; everything is static.
 *
 * expo_check(text, strict, why, size) returns true when every line is valid:
 *   "# HELP name text" (escapes \\ and \n only), "# TYPE name type" (counter,
 *   gauge, histogram, summary, untyped), other "# " comments, empty lines,
 *   samples `name{label="value",...} value [timestamp]` with valid names,
 *   label values escaping only \\, \" and \n, label values and HELP text
 *   valid UTF-8 (checked by the C library's decoder), values that are floats,
 *   +Inf, -Inf or NaN.  Across lines: HELP and TYPE at most once per family and
 *   before its samples; a family's lines together (no interleaving); no sample
 *   twice; counters not negative; a histogram's samples named _bucket (with
 *   le), _sum and _count; per series its buckets in increasing le ending at
 *   +Inf, cumulative counts never decreasing, and _count equal to the +Inf
 *   bucket, with _sum present.  The text ends with a newline.
 *   strict: also every family has HELP and TYPE and every counter ends in
 *   _total (v7fill's conventions).
 * Otherwise false and why says which line broke which rule.
 */
#ifndef V7FILL_TEST_EXPO_CHECK_H
#define V7FILL_TEST_EXPO_CHECK_H

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define EXPO_MAX_FAMILIES 256
#define EXPO_MAX_SAMPLES  8192
#define EXPO_MAX_HIST     1024
#define EXPO_MAX_LABELS   16
#define EXPO_KEY          1024

typedef struct ExpoFamily
{
    char name[256];
    char type[16]; /* "" until a TYPE line: untyped */
    bool help;
    bool samples; /* a sample was attributed to it */
    bool closed; /* another family's line came after this one's */
} ExpoFamily;

typedef struct ExpoHist
{
    char key[EXPO_KEY]; /* family + labels without le */
    int nbuckets;
    double last_le;
    double last_count;
    bool inf;
    double inf_count;
    bool sum;
    bool count;
    double count_value;
} ExpoHist;

typedef struct ExpoState
{
    ExpoFamily fam[EXPO_MAX_FAMILIES];
    int nfam;
    int cur; /* index of the family of the previous line, -1 none */
    char (*keys)[EXPO_KEY];
    int nkeys;
    ExpoHist *hist;
    int nhist;
} ExpoState;

typedef struct ExpoLabel
{
    char name[128];
    char value[512];
} ExpoLabel;

static bool expo_fail(char *why, size_t size, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static bool
expo_fail(char *why, size_t size, int line, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(why, size, "line %d: %s", line, msg);
    return false;
}

/* expo_utf8: s is valid UTF-8 (glibc's C.UTF-8 decoder: a second opinion
 * beside the renderer's own). */
static bool
expo_utf8(const char *s)
{
    locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t) 0);
    if (utf8 == (locale_t) 0)
    {
        fprintf(stderr, "expo_check: no C.UTF-8 locale\n");
        abort();
    }
    locale_t old = uselocale(utf8);
    bool ok = mbstowcs(NULL, s, 0) != (size_t) -1;
    uselocale(old);
    freelocale(utf8);
    return ok;
}

static bool
expo_name_char(char c, bool first, bool colon)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':'))
        return true;
    return !first && c >= '0' && c <= '9';
}

/* expo_name: read a metric (colon) or label name at *p into out. */
static bool
expo_name(const char **p, bool colon, char *out, size_t size)
{
    size_t n = 0;
    while (expo_name_char((*p)[n], n == 0, colon))
        n++;
    if (n == 0 || n >= size)
        return false;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
    return true;
}

/* expo_float: the whole of s is a float in the format's sense. */
static bool
expo_float(const char *s, double *out)
{
    if (strcmp(s, "NaN") == 0)
        return *out = NAN, true;
    if (strcmp(s, "+Inf") == 0 || strcmp(s, "Inf") == 0)
        return *out = INFINITY, true;
    if (strcmp(s, "-Inf") == 0)
        return *out = -INFINITY, true;
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    size_t digits = 0;
    while (*p >= '0' && *p <= '9')
        p++, digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            digits++;
    if (digits == 0)
        return false;
    if (*p == 'e' || *p == 'E')
    {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != '\0')
        return false;
    *out = strtod(s, NULL);
    return true;
}

static int
expo_family_find(ExpoState *st, const char *name)
{
    for (int i = 0; i < st->nfam; i++)
        if (strcmp(st->fam[i].name, name) == 0)
            return i;
    return -1;
}

/* expo_enter: the line belongs to family i; no interleaving. */
static bool
expo_enter(ExpoState *st, int i, int line, char *why, size_t size)
{
    if (st->cur != i)
    {
        if (st->fam[i].closed)
            return expo_fail(why, size, line, "lines of family %s are not together", st->fam[i].name);
        if (st->cur >= 0)
            st->fam[st->cur].closed = true;
        st->cur = i;
    }
    return true;
}

static int
expo_family_add(ExpoState *st, const char *name)
{
    if (st->nfam == EXPO_MAX_FAMILIES)
        return -1;
    ExpoFamily *f = &st->fam[st->nfam];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return st->nfam++;
}

static bool
expo_ends(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a > b && strcmp(s + a - b, suffix) == 0;
}

/* expo_sample_family: the family a sample name belongs to, created untyped
 * if none; *suffix is "", "_bucket", "_sum" or "_count". */
static int
expo_sample_family(ExpoState *st, const char *name, const char **suffix)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (size_t k = 0; k < 3; k++)
        if (expo_ends(name, sfx[k]))
        {
            char base[256];
            snprintf(base, sizeof base, "%.*s", (int) (strlen(name) - strlen(sfx[k])), name);
            int i = expo_family_find(st, base);
            if (i >= 0 && (strcmp(st->fam[i].type, "histogram") == 0 || strcmp(st->fam[i].type, "summary") == 0))
            {
                *suffix = sfx[k];
                return i;
            }
        }
    *suffix = "";
    int i = expo_family_find(st, name);
    return i >= 0 ? i : expo_family_add(st, name);
}

static int
expo_label_cmp(const void *a, const void *b)
{
    return strcmp(((const ExpoLabel *) a)->name, ((const ExpoLabel *) b)->name);
}

static ExpoHist *
expo_hist(ExpoState *st, const char *key)
{
    for (int i = 0; i < st->nhist; i++)
        if (strcmp(st->hist[i].key, key) == 0)
            return &st->hist[i];
    if (st->nhist == EXPO_MAX_HIST)
        return NULL;
    ExpoHist *h = &st->hist[st->nhist++];
    memset(h, 0, sizeof *h);
    snprintf(h->key, sizeof h->key, "%s", key);
    h->last_le = -INFINITY;
    return h;
}

/* expo_sample: one sample line. */
static bool
expo_sample(ExpoState *st, const char *p, int line, char *why, size_t size)
{
    char name[256];
    if (!expo_name(&p, true, name, sizeof name))
        return expo_fail(why, size, line, "bad metric name");
    ExpoLabel labels[EXPO_MAX_LABELS];
    int nl = 0;
    if (*p == '{')
    {
        p++;
        while (*p != '}')
        {
            if (nl == EXPO_MAX_LABELS)
                return expo_fail(why, size, line, "too many labels");
            ExpoLabel *l = &labels[nl];
            if (!expo_name(&p, false, l->name, sizeof l->name))
                return expo_fail(why, size, line, "bad label name");
            if (p[0] != '=' || p[1] != '"')
                return expo_fail(why, size, line, "label %s: expected =\"", l->name);
            p += 2;
            size_t n = 0;
            for (; *p != '"'; p++)
            {
                if (*p == '\0' || *p == '\n')
                    return expo_fail(why, size, line, "label %s: unterminated value", l->name);
                char c = *p;
                if (c == '\\')
                {
                    p++;
                    if (*p == 'n')
                        c = '\n';
                    else if (*p == '\\' || *p == '"')
                        c = *p;
                    else
                        return expo_fail(why, size, line, "label %s: bad escape", l->name);
                }
                if (n + 1 >= sizeof l->value)
                    return expo_fail(why, size, line, "label %s: value too long", l->name);
                l->value[n++] = c;
            }
            l->value[n] = '\0';
            if (!expo_utf8(l->value))
                return expo_fail(why, size, line, "label %s: the value is not valid UTF-8", l->name);
            p++;
            for (int j = 0; j < nl; j++)
                if (strcmp(labels[j].name, l->name) == 0)
                    return expo_fail(why, size, line, "label %s twice", l->name);
            nl++;
            if (*p == ',')
                p++;
            else if (*p != '}')
                return expo_fail(why, size, line, "expected , or } after label %s", l->name);
        }
        p++;
    }
    if (*p != ' ' && *p != '\t')
        return expo_fail(why, size, line, "expected a space before the value of %s", name);
    while (*p == ' ' || *p == '\t')
        p++;
    char valtext[64];
    size_t vn = strcspn(p, " \t");
    if (vn == 0 || vn >= sizeof valtext)
        return expo_fail(why, size, line, "no value for %s", name);
    memcpy(valtext, p, vn);
    valtext[vn] = '\0';
    p += vn;
    double value;
    if (!expo_float(valtext, &value))
        return expo_fail(why, size, line, "bad value \"%s\"", valtext);
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '\0')
    {
        const char *q = *p == '-' ? p + 1 : p;
        if (*q == '\0' || strspn(q, "0123456789") != strlen(q))
            return expo_fail(why, size, line, "bad timestamp after %s", name);
    }

    const char *suffix;
    int fi = expo_sample_family(st, name, &suffix);
    if (fi < 0)
        return expo_fail(why, size, line, "too many families");
    ExpoFamily *f = &st->fam[fi];
    if (!expo_enter(st, fi, line, why, size))
        return false;
    f->samples = true;
    bool is_hist = strcmp(f->type, "histogram") == 0;
    if (is_hist && suffix[0] == '\0')
        return expo_fail(why, size, line, "histogram sample %s without _bucket, _sum or _count", name);
    if (strcmp(f->type, "counter") == 0 && !(value >= 0))
        return expo_fail(why, size, line, "counter %s is negative or NaN", name);

    /* the key: name and labels sorted; le apart for histograms */
    qsort(labels, (size_t) nl, sizeof labels[0], expo_label_cmp);
    char key[EXPO_KEY], hkey[EXPO_KEY];
    size_t kn = (size_t) snprintf(key, sizeof key, "%s", name);
    size_t hn = (size_t) snprintf(hkey, sizeof hkey, "%s", f->name);
    const char *le = NULL;
    for (int j = 0; j < nl && kn < sizeof key && hn < sizeof hkey; j++)
    {
        kn += (size_t) snprintf(key + kn, sizeof key - kn, "\x01%s=%s", labels[j].name, labels[j].value);
        if (is_hist && strcmp(labels[j].name, "le") == 0)
            le = labels[j].value;
        else
            hn += (size_t) snprintf(hkey + hn, sizeof hkey - hn, "\x01%s=%s", labels[j].name, labels[j].value);
    }
    for (int k = 0; k < st->nkeys; k++)
        if (strcmp(st->keys[k], key) == 0)
            return expo_fail(why, size, line, "sample %s twice", name);
    if (st->nkeys == EXPO_MAX_SAMPLES)
        return expo_fail(why, size, line, "too many samples");
    snprintf(st->keys[st->nkeys++], EXPO_KEY, "%s", key);

    if (!is_hist)
        return true;
    ExpoHist *h = expo_hist(st, hkey);
    if (h == NULL)
        return expo_fail(why, size, line, "too many histogram series");
    if (strcmp(suffix, "_bucket") == 0)
    {
        double lev;
        if (le == NULL || !expo_float(le, &lev) || isnan(lev))
            return expo_fail(why, size, line, "bucket of %s without a valid le", f->name);
        if (h->inf || h->sum || h->count)
            return expo_fail(why, size, line, "bucket of %s after its +Inf bucket, _sum or _count", f->name);
        if (!(lev > h->last_le))
            return expo_fail(why, size, line, "buckets of %s not in increasing le", f->name);
        if (!(value >= h->last_count))
            return expo_fail(why, size, line, "bucket counts of %s decrease", f->name);
        h->last_le = lev;
        h->last_count = value;
        h->nbuckets++;
        if (isinf(lev))
        {
            h->inf = true;
            h->inf_count = value;
        }
        return true;
    }
    if (le != NULL)
        return expo_fail(why, size, line, "%s has an le label", name);
    if (strcmp(suffix, "_sum") == 0)
        h->sum = true;
    else
    {
        h->count = true;
        h->count_value = value;
    }
    return true;
}

/* expo_meta: a "# HELP" or "# TYPE" line (other comments pass). */
static bool
expo_meta(ExpoState *st, const char *p, int line, bool strict, char *why, size_t size)
{
    bool help = strncmp(p, "# HELP ", 7) == 0;
    bool type = strncmp(p, "# TYPE ", 7) == 0;
    if (!help && !type)
        return true;
    p += 7;
    char name[256];
    if (!expo_name(&p, true, name, sizeof name) || *p != ' ')
        return expo_fail(why, size, line, "bad name in %s line", help ? "HELP" : "TYPE");
    p++;
    int fi = expo_family_find(st, name);
    if (fi < 0 && (fi = expo_family_add(st, name)) < 0)
        return expo_fail(why, size, line, "too many families");
    ExpoFamily *f = &st->fam[fi];
    if (!expo_enter(st, fi, line, why, size))
        return false;
    /* samples seen under this name, or under one of its suffixed names
     * before a TYPE made them this family's */
    bool has_samples = f->samples;
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (size_t k = 0; k < 3 && !has_samples; k++)
    {
        char sub[300];
        snprintf(sub, sizeof sub, "%s%s", name, sfx[k]);
        int si = expo_family_find(st, sub);
        has_samples = si >= 0 && st->fam[si].samples;
    }
    if (help)
    {
        if (f->help)
            return expo_fail(why, size, line, "second HELP for %s", name);
        if (!expo_utf8(p))
            return expo_fail(why, size, line, "HELP of %s is not valid UTF-8", name);
        for (; *p != '\0'; p++)
            if (*p == '\\' && p[1] != '\\' && p[1] != 'n')
                return expo_fail(why, size, line, "bad escape in HELP of %s", name);
            else if (*p == '\\')
                p++;
        if (strict && has_samples)
            return expo_fail(why, size, line, "HELP of %s after its samples", name);
        f->help = true;
        return true;
    }
    if (f->type[0] != '\0')
        return expo_fail(why, size, line, "second TYPE for %s", name);
    if (has_samples)
        return expo_fail(why, size, line, "TYPE of %s after its samples", name);
    if (strcmp(p, "counter") != 0 && strcmp(p, "gauge") != 0 && strcmp(p, "histogram") != 0
        && strcmp(p, "summary") != 0 && strcmp(p, "untyped") != 0)
        return expo_fail(why, size, line, "unknown type \"%s\"", p);
    snprintf(f->type, sizeof f->type, "%s", p);
    return true;
}

static bool
expo_check(const char *text, bool strict, char *why, size_t size)
{
    ExpoState *st = calloc(1, sizeof *st);
    st->keys = calloc(EXPO_MAX_SAMPLES, EXPO_KEY);
    st->hist = calloc(EXPO_MAX_HIST, sizeof *st->hist);
    st->cur = -1;
    bool ok = true;
    size_t len = strlen(text);
    if (len > 0 && text[len - 1] != '\n')
        ok = expo_fail(why, size, 0, "the text does not end with a newline");
    int line = 0;
    for (const char *p = text; ok && *p != '\0';)
    {
        line++;
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t) (nl - p) : strlen(p);
        char *buf = malloc(n + 1);
        memcpy(buf, p, n);
        buf[n] = '\0';
        if (memchr(p, '\0', n) != NULL || strchr(buf, '\r') != NULL)
            ok = expo_fail(why, size, line, "a NUL or CR in the line");
        else if (buf[0] == '#')
            ok = expo_meta(st, buf, line, strict, why, size);
        else if (buf[0] != '\0')
            ok = expo_sample(st, buf, line, why, size);
        free(buf);
        p += n + (nl != NULL);
    }
    for (int i = 0; ok && i < st->nhist; i++)
    {
        ExpoHist *h = &st->hist[i];
        if (!h->inf)
            ok = expo_fail(why, size, line, "histogram series %s has no +Inf bucket", h->key);
        else if (!h->sum || !h->count)
            ok = expo_fail(why, size, line, "histogram series %s lacks _sum or _count", h->key);
        else if (h->count_value != h->inf_count)
            ok = expo_fail(why, size, line, "histogram series %s: _count differs from the +Inf bucket", h->key);
    }
    for (int i = 0; ok && strict && i < st->nfam; i++)
    {
        ExpoFamily *f = &st->fam[i];
        if (!f->help || f->type[0] == '\0')
            ok = expo_fail(why, size, line, "family %s lacks HELP or TYPE", f->name);
        else if (strcmp(f->type, "counter") == 0 && !expo_ends(f->name, "_total"))
            ok = expo_fail(why, size, line, "counter %s does not end in _total", f->name);
    }
    free(st->keys);
    free(st->hist);
    free(st);
    return ok;
}

#endif /* V7FILL_TEST_EXPO_CHECK_H */
