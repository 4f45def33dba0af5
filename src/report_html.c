/*
 * The report as one self-contained HTML page: inline CSS, two inline SVG
 * charts (rows per window with the retention cutoff drawn as a line; the
 * delay histogram with the retention marked), tables with the numbers, and
 * the JSON report in a data block.  No scripts, no external assets: the file
 * can be mailed, archived or opened offline.
 *
 * Every text from the database (names, source references) is escaped for
 * HTML; the JSON block has '<' written as \u003c so no content can end it.
 */
#include "v7fill/report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/timeparse.h"

#define CHART_W 1060.0
#define ML      70.0  /* margins: left (y labels), right, top, bottom (x labels) */
#define MR      20.0
#define MT      34.0
#define MB      78.0

#define C_LIVE  "#2f81f7"
#define C_NEAR  "#fb8c00"
#define C_PAST  "#8c959f"
#define C_CUT   "#cf222e"
#define C_NOW   "#1a7f37"
#define C_DELAY "#8250df"
#define C_GRID  "#e6eaef"
#define C_AXIS  "#57606a"

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,"
    "sans-serif;color:#1f2328;background:#fff;max-width:1100px;margin:24px auto;padding:0 16px}"
    "h1{font-size:22px;margin:0 0 2px}h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;"
    "border-bottom:1px solid #d1d9e0}"
    ".sub{color:#59636e;margin:0 0 12px}"
    ".verdict{padding:12px 16px;border-radius:6px;margin:16px 0;font-weight:600}"
    ".ok{background:#dafbe1;border:1px solid #4ac26b}"
    ".warn{background:#ffebe9;border:1px solid #ff8182}"
    ".none{background:#f6f8fa;border:1px solid #d1d9e0}"
    "table{border-collapse:collapse;width:100%;margin:6px 0 12px}"
    "th,td{padding:4px 8px;border-bottom:1px solid #e6eaef;text-align:left;vertical-align:top}"
    "th{background:#f6f8fa;font-weight:600}"
    ".num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    ".kv{width:auto}.kv td:first-child{color:#59636e;padding-right:24px}"
    "code,.ref{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
    "word-break:break-all}"
    ".st-past_cutoff{color:#6e7781}.st-near_cutoff{color:#bc4c00;font-weight:600}"
    ".legend{display:flex;gap:18px;flex-wrap:wrap;color:#59636e;font-size:12px;margin:2px 0 6px}"
    ".legend i{display:inline-block;width:12px;height:12px;margin-right:5px;"
    "vertical-align:-1px;border-radius:2px}"
    ".chart{width:100%;height:auto;display:block}"
    ".muted{color:#59636e}"
    "footer{margin:32px 0 8px;color:#8c959f;font-size:12px}";

/* ----------------------------------------------------------------- text */

static void
esc(FILE *f, const char *s)
{
    for (; *s; s++)
    {
        switch (*s)
        {
            case '&':
                fputs("&amp;", f);
                break;
            case '<':
                fputs("&lt;", f);
                break;
            case '>':
                fputs("&gt;", f);
                break;
            case '"':
                fputs("&quot;", f);
                break;
            case '\'':
                fputs("&#39;", f);
                break;
            default:
                fputc(*s, f);
        }
    }
}

static void escf(FILE *f, const char *fmt, ...) V7FILL_PRINTF(2, 3);

/* printf, then escaped. */
static void
escf(FILE *f, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;

    va_start(ap, fmt);
    (void) vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    esc(f, buf);
}

/* Axis labels: 950, 1.2k, 35k, 1.5M. */
static void
fmt_si(double v, char *out, size_t size)
{
    if (v >= 1e9)
        (void) snprintf(out, size, "%.3gG", v / 1e9);
    else if (v >= 1e6)
        (void) snprintf(out, size, "%.3gM", v / 1e6);
    else if (v >= 1e3)
        (void) snprintf(out, size, "%.3gk", v / 1e3);
    else
        (void) snprintf(out, size, "%.0f", v);
}

/* The smallest 1-2-5 step giving at most `ticks` intervals up to max; at
 * least 1, as the axes count rows (a step of 0.5 printed as "%.0f" repeats
 * labels: 0, 0, 1, 2, 2). */
static double
nice_step(double max, int ticks)
{
    double raw = max / ticks;
    double mag;
    double norm;
    double step;

    if (raw <= 0)
        return 1;
    mag = pow(10, floor(log10(raw)));
    norm = raw / mag;
    step = norm <= 1 ? mag : norm <= 2 ? 2 * mag : norm <= 5 ? 5 * mag : 10 * mag;
    return step < 1 ? 1 : step;
}

/* ----------------------------------------------------------------- charts */

/* Y axis with grid lines; returns the top of the scale. */
static double
y_axis(FILE *f, double max, double plot_h, const char *title)
{
    double step = nice_step(max > 0 ? max : 1, 5);
    double top = ceil((max > 0 ? max : 1) / step) * step;

    for (double v = 0; v <= top + step / 2; v += step)
    {
        double y = MT + plot_h - v / top * plot_h;
        char l[32];

        fmt_si(v, l, sizeof l);
        fprintf(f,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">%s</text>\n",
                ML, CHART_W - MR, y, y, v == 0 ? C_AXIS : C_GRID, ML - 8, y + 4, C_AXIS, l);
    }
    fprintf(f,
            "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"%s\">%s</text>\n",
            MT + plot_h / 2, C_AXIS, title);
    return top;
}

static const char *
state_color(WindowState s)
{
    switch (s)
    {
        case WSTATE_NEAR_CUTOFF:
            return C_NEAR;
        case WSTATE_PAST_CUTOFF:
            return C_PAST;
        case WSTATE_LIVE:
        case WSTATE_NO_RETENTION:
            break;
    }
    return C_LIVE;
}

/* x of instant `us` on a chart of n equal slots, one per window: inside a
 * window proportionally, before the first / after the last at the edges. */
static double
time_x(const Report *r, int64_t us, double slot)
{
    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];

        if (us < w->lower_us)
            return ML + (double) i * slot;
        if (us < w->upper_us)
        {
            double frac = 0.5;

            if (w->lower_us != INT64_MIN && w->upper_us != INT64_MAX)
                frac = (double) (us - w->lower_us) / (double) (w->upper_us - w->lower_us);
            return ML + ((double) i + frac) * slot;
        }
    }
    return ML + (double) r->nwindows * slot;
}

/* A dashed vertical line with its label above the plot; row 1 puts the label
 * a line higher and the dashes in the gaps of row 0's, for two markers at one x. */
static void
marker_row(FILE *f, double x, double plot_h, const char *color, const char *anchor,
           const char *text, int row)
{
    fprintf(f,
            "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2\" stroke-dasharray=\"%s\"/>\n",
            x, x, MT - 12 - 14 * row, MT + plot_h, color, row ? "4 6" : "6 4");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"%s\" font-weight=\"600\">",
            strcmp(anchor, "end") == 0 ? x - 5 : x + 5, MT - 6 - 14 * row, anchor, color);
    esc(f, text);
    fputs("</text>\n", f);
}

static void
marker(FILE *f, double x, double plot_h, const char *color, const char *anchor, const char *text)
{
    marker_row(f, x, plot_h, color, anchor, text, 0);
}

/* Where an instant lies outside the windows drawn, words that say so. */
static const char *
off_windows(const Report *r, int64_t us)
{
    if (us < r->windows[0].lower_us)
        return " (before the first window)";
    if (us >= r->windows[r->nwindows - 1].upper_us)
        return " (after the last window)";
    return "";
}

static void
windows_chart(FILE *f, const Report *r)
{
    const double h = 360;
    const double plot_w = CHART_W - ML - MR;
    const double plot_h = h - MT - MB;
    double max = 0;
    double slot;
    double bw;
    double top;
    double reach = 0; /* how far a rotated x label reaches, down and left */
    bool any_unknown = false;
    size_t every;

    if (r->nwindows == 0)
    {
        fputs("<p class=\"muted\">The table has no partitions.</p>\n", f);
        return;
    }
    for (size_t i = 0; i < r->nwindows; i++)
    {
        char lower[32];

        if (r->windows[i].rows > max)
            max = r->windows[i].rows;
        any_unknown |= r->windows[i].rows < 0;
        report_fmt_date(r->windows[i].lower_us, " UTC", lower, sizeof lower);
        /* at 45°, ~6.2 px a character at font-size 11 */
        if (strlen(lower) * 6.2 * M_SQRT1_2 > reach)
            reach = (double) strlen(lower) * 6.2 * M_SQRT1_2;
    }
    slot = plot_w / (double) r->nwindows;
    bw = slot * 0.78 < 1 ? 1 : slot * 0.78;
    every = (size_t) ceil(34.0 / slot); /* rotated labels need ~34 px apart */
    if (every < 1)
        every = 1;
    {
        /* Room for the longest label ("2026-03-20 12:00 UTC"): a taller
         * picture, and the view starting left of 0 if the first reaches there. */
        double below = 14 + reach + 8;
        double left = ML + slot / 2 + 3 - reach - 4;

        left = left < 0 ? left : 0;
        fprintf(f,
                "<svg class=\"chart\" viewBox=\"%.0f 0 %.0f %.0f\" "
                "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"rows per window\" "
                "font-family=\"system-ui,sans-serif\" font-size=\"11\">\n",
                floor(left), CHART_W - floor(left), below > MB ? MT + plot_h + below : h);
    }
    top = y_axis(f, max, plot_h, "rows");
    if (r->retention.us > 0)
    {
        double xc = time_x(r, r->cutoff_us, slot);

        /* Everything left of the cutoff is due for retirement: shade it. */
        if (xc > ML)
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "fill-opacity=\"0.07\"/>\n",
                    ML, MT, xc - ML, plot_h, C_CUT);
    }
    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];
        double x = ML + (double) i * slot + (slot - bw) / 2;
        double bh = w->rows > 0 ? w->rows / top * plot_h : 0;
        char rows[32];
        char lower[32];
        char upper[32];

        report_fmt_count(w->rows, rows, sizeof rows);
        report_fmt_date(w->lower_us, " UTC", lower, sizeof lower);
        report_fmt_date(w->upper_us, " UTC", upper, sizeof upper);
        if (bh > 0 && bh < 1)
            bh = 1;
        if (w->rows < 0)
        {
            /* Unknown is not empty: a hatched outline over the whole height
             * and a "?" where the count would be. */
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "fill-opacity=\"0.12\" stroke=\"%s\" stroke-dasharray=\"3 3\" "
                    "class=\"rows-unknown\"><title>",
                    x, MT, bw, plot_h, state_color(w->state), state_color(w->state));
            escf(f, "%s [%s, %s): rows unknown (not analyzed since rows arrived; --exact counts "
                    "them), %s",
                 w->name, lower, upper, window_state_name(w->state));
            fputs("</title></rect>\n", f);
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\" "
                    "font-weight=\"600\">?</text>\n",
                    x + bw / 2, MT + plot_h - 4, state_color(w->state));
        }
        else
        {
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "rx=\"1\"><title>",
                    x, MT + plot_h - bh, bw, bh, state_color(w->state));
            escf(f, "%s [%s, %s): %s%s rows, %s", w->name, lower, upper,
                 w->rows_exact ? "" : "~", rows, window_state_name(w->state));
            fputs("</title></rect>\n", f);
        }
        /* The count on top, where it fits: small windows are hard to see. */
        if (slot >= 36 && w->rows >= 0)
        {
            char si[32];

            fmt_si(w->rows, si, sizeof si);
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%s%s</text>\n",
                    x + bw / 2, MT + plot_h - bh - 4, C_AXIS, w->rows_exact ? "" : "~", si);
        }
        if (i % every == 0)
        {
            double lx = ML + ((double) i + 0.5) * slot;

            fprintf(f,
                    "<text transform=\"translate(%.1f %.1f) rotate(-45)\" text-anchor=\"end\" "
                    "fill=\"%s\">",
                    lx + 3, MT + plot_h + 14, C_AXIS);
            esc(f, lower);
            fputs("</text>\n", f);
        }
    }
    {
        double xn = time_x(r, r->now_us, slot);
        double xc = r->retention.us > 0 ? time_x(r, r->cutoff_us, slot) : 0;
        /* now and the cutoff at one x (both before the first window or after
         * the last): now's label goes a line higher, its dashes between */
        bool same_x = r->retention.us > 0 && fabs(xn - xc) < 1;
        char text[240];

        if (r->retention.us > 0)
        {
            char cut[32];

            report_fmt_date(r->cutoff_us, " UTC", cut, sizeof cut);
            (void) snprintf(text, sizeof text, "retention cutoff: now − %s (%s)%s",
                            r->retention.text, cut, off_windows(r, r->cutoff_us));
            /* Label on the side with room. */
            marker(f, xc, plot_h, C_CUT, xc - ML > 260 ? "end" : "start", text);
        }
        /* "now" goes right of its line unless that runs off the chart or
         * into the cutoff's label (which then sits right of its own line). */
        (void) snprintf(text, sizeof text, "now%s", off_windows(r, r->now_us));
        marker_row(f, xn, plot_h, C_NOW,
                   same_x ? (xc - ML > 260 ? "end" : "start")
                   : xn + 40 > CHART_W - MR ||
                           (r->retention.us > 0 && xc - ML <= 260 && xn > xc && xn - xc < 300)
                       ? "end"
                       : "start",
                   text, same_x ? 1 : 0);
    }
    fputs("</svg>\n", f);
    fprintf(f,
            "<div class=\"legend\"><span><i style=\"background:%s\"></i>live</span>"
            "<span><i style=\"background:%s\"></i>near the cutoff</span>"
            "<span><i style=\"background:%s\"></i>past the cutoff (maintenance retires it)</span>"
            "<span><i style=\"background:%s\"></i>retention cutoff</span>"
            "<span><i style=\"background:%s\"></i>now</span>%s</div>\n",
            C_LIVE, C_NEAR, C_PAST, C_CUT, C_NOW,
            any_unknown ? "<span><i style=\"border:1px dashed #8c959f\"></i>? rows unknown "
                          "(not analyzed since rows arrived)</span>"
                        : "");
}

static void
delay_chart(FILE *f, const Report *r)
{
    const double h = 320;
    const double plot_w = CHART_W - ML - MR;
    const double plot_h = h - MT - MB + 30;
    const TrackerBucket *b;
    size_t nb = tracker_display(r->stats, &b);
    size_t first = nb;
    size_t last = 0;
    size_t ret_bucket = nb;
    double max = 0;
    double slot;
    double top;
    uint64_t total = tracker_total(r->stats);

    if (total == 0)
    {
        fputs("<p class=\"muted\">No delays recorded: no runs with statistics.</p>\n", f);
        return;
    }
    for (size_t i = 0; i < nb; i++)
    {
        if (b[i].count)
        {
            if (first == nb)
                first = i;
            last = i;
            if ((double) b[i].count > max)
                max = (double) b[i].count;
        }
        if (r->retention.us > 0 && r->retention.us >= b[i].lower_us &&
            r->retention.us < b[i].upper_us)
            ret_bucket = i;
    }
    /* Show the retention's bucket too, so the marker has its place. */
    if (ret_bucket < nb)
    {
        if (ret_bucket < first)
            first = ret_bucket;
        if (ret_bucket > last)
            last = ret_bucket;
    }
    slot = plot_w / (double) (last - first + 1);
    fprintf(f,
            "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" xmlns=\"http://www.w3.org/2000/svg\" "
            "role=\"img\" aria-label=\"delay histogram\" font-family=\"system-ui,sans-serif\" "
            "font-size=\"11\">\n",
            CHART_W, h);
    top = y_axis(f, max, plot_h, "rows");
    for (size_t i = first; i <= last; i++)
    {
        double x = ML + (double) (i - first) * slot;
        double bh = (double) b[i].count / top * plot_h;
        bool late = r->retention.us > 0 && b[i].lower_us >= r->retention.us;
        char count[32];
        const char *upper = i + 1 < nb ? b[i + 1].label : "∞";

        if (bh > 0 && bh < 1)
            bh = 1;
        report_fmt_count((double) b[i].count, count, sizeof count);
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" rx=\"1\">"
                "<title>",
                x + slot * 0.1, MT + plot_h - bh, slot * 0.8, bh,
                late ? C_CUT : C_DELAY);
        escf(f, "%s – %s: %s rows (%.1f%%)", i == 0 ? "0" : b[i].label, upper, count,
             100.0 * (double) b[i].count / (double) total);
        fputs("</title></rect>\n", f);
        if (b[i].count && slot >= 30)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                    x + slot / 2, MT + plot_h - bh - 4, C_AXIS, count);
        /* Bucket edges on the axis: a histogram's labels are its boundaries. */
        fprintf(f,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                x, x, MT + plot_h, MT + plot_h + 5, C_AXIS, x, MT + plot_h + 18, C_AXIS,
                i == 0 ? "0" : b[i].label);
        if (i == last)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
                    x + slot - 8, MT + plot_h + 18, C_AXIS, upper);
    }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">delay: id time → "
            "insert (log-spaced buckets)</text>\n",
            ML + plot_w / 2, MT + plot_h + 40, C_AXIS);
    if (ret_bucket < nb)
    {
        const TrackerBucket *rb = &b[ret_bucket];
        double frac = 0;
        double x;
        char text[160];

        /* Within its bucket the retention sits on a log scale, like the edges. */
        if (rb->lower_us > 0 && rb->upper_us != INT64_MAX)
            frac = log((double) r->retention.us / (double) rb->lower_us) /
                   log((double) rb->upper_us / (double) rb->lower_us);
        (void) snprintf(text, sizeof text, "retention %s", r->retention.text);
        if (rb->upper_us == INT64_MAX && r->retention.us > rb->lower_us)
        {
            /* Past the last edge: the open bucket has no scale to place it
             * on; at the right end, with words that say it is off the scale. */
            frac = 1;
            (void) snprintf(text, sizeof text, "retention %s → beyond %s, off the scale",
                            r->retention.text, rb->label);
        }
        x = ML + ((double) (ret_bucket - first) + frac) * slot;
        marker(f, x, plot_h, C_CUT, x - ML > plot_w / 2 ? "end" : "start", text);
    }
    fputs("</svg>\n", f);
}

/* ----------------------------------------------------------------- tables */

static void
kv(FILE *f, const char *k, const char *v)
{
    fputs("<tr><td>", f);
    esc(f, k);
    fputs("</td><td>", f);
    esc(f, v);
    fputs("</td></tr>\n", f);
}

static void
summary(FILE *f, const Report *r)
{
    char ret[512];
    char buf[256];
    char a[48];

    fputs("<table class=\"kv\">\n", f);
    retention_describe(&r->retention, ret, sizeof ret);
    kv(f, "retention", ret);
    if (r->retention.us > 0)
    {
        report_fmt_date(r->cutoff_us, " UTC", a, sizeof a);
        (void) snprintf(buf, sizeof buf, "%s (windows whose upper bound is older are retired)", a);
        kv(f, "cutoff (now − retention)", buf);
        if (r->near_cutoff_us > 0)
            duration_format(r->near_cutoff_us, buf, sizeof buf);
        else
        {
            duration_format(r->retention.us / 10, a, sizeof a);
            (void) snprintf(buf, sizeof buf,
                            "10%% of the retention (%s) or the window's length, whichever is "
                            "longer",
                            a);
        }
        kv(f, "near-cutoff horizon", buf);
    }
    if (r->partman.manages)
    {
        (void) snprintf(buf, sizeof buf, "pg_partman %s (%s.part_config)%s%s", r->partman.version,
                        r->partman.schema, r->partman.has_retention ? ", retention " : "",
                        r->partman.has_retention ? r->partman.retention : "");
        kv(f, "managed by", buf);
    }
    (void) snprintf(buf, sizeof buf, "%zu%s%s", r->runs, r->runs_skipped ? " (statistics of " : "",
                    r->runs_skipped ? "some runs unreadable)" : "");
    kv(f, "runs merged", buf);
    if (r->since_set)
    {
        report_fmt_date(r->since_us, " UTC", a, sizeof a);
        kv(f, "runs since", a);
    }
    fputs("</table>\n", f);
}

static void
delay_table(FILE *f, const Report *r)
{
    static const double ps[] = {50, 90, 99};
    char d[48];

    if (tracker_total(r->stats) == 0)
        return;
    fputs("<table class=\"kv\" id=\"delay-stats\">\n", f);
    fprintf(f,
            "<tr><td>rows</td><td class=\"num\" data-value=\"%" PRIu64 "\">%" PRIu64 "</td></tr>\n"
            "<tr><td>on time</td><td class=\"num\" data-value=\"%" PRIu64 "\">%" PRIu64
            "</td></tr>\n"
            "<tr><td>near cutoff</td><td class=\"num\" data-value=\"%" PRIu64 "\">%" PRIu64
            "</td></tr>\n"
            "<tr><td>expired</td><td class=\"num\" data-value=\"%" PRIu64 "\">%" PRIu64
            "</td></tr>\n",
            tracker_total(r->stats), tracker_total(r->stats),
            tracker_count(r->stats, DELAY_ON_TIME), tracker_count(r->stats, DELAY_ON_TIME),
            tracker_count(r->stats, DELAY_NEAR_CUTOFF), tracker_count(r->stats, DELAY_NEAR_CUTOFF),
            tracker_count(r->stats, DELAY_EXPIRED), tracker_count(r->stats, DELAY_EXPIRED));
    {
        uint64_t ai[3];
        char note[256];
        char at_insert[160];

        report_fmt_class_note(r, note, sizeof note, at_insert, sizeof at_insert);
        fputs("<tr><td>classes</td><td id=\"class-note\">", f);
        esc(f, note);
        fputs("</td></tr>\n", f);
        for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
            ai[c] = tracker_count_at_insert(r->stats, (DelayClass) c);
        if (ai[0] + ai[1] + ai[2] > 0)
        {
            fputs("<tr><td>not judged again</td><td id=\"class-at-insert\">", f);
            escf(f,
                 "%s (their class changed while the run inserted them, or their window was not "
                 "tracked): on time %" PRIu64 ", near cutoff %" PRIu64 ", expired %" PRIu64,
                 at_insert, ai[0], ai[1], ai[2]);
            fputs("</td></tr>\n", f);
        }
    }
    duration_format(tracker_min(r->stats), d, sizeof d);
    fprintf(f, "<tr><td>min</td><td class=\"num\" data-us=\"%" PRId64 "\">%s</td></tr>\n",
            tracker_min(r->stats), d);
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    {
        int64_t v = tracker_percentile(r->stats, ps[i]);

        duration_format(v, d, sizeof d);
        fprintf(f, "<tr><td>p%.0f</td><td class=\"num\" data-us=\"%" PRId64 "\">%s</td></tr>\n",
                ps[i], v, d);
    }
    duration_format(tracker_max(r->stats), d, sizeof d);
    fprintf(f, "<tr><td>max</td><td class=\"num\" data-us=\"%" PRId64 "\">%s</td></tr>\n",
            tracker_max(r->stats), d);
    fputs("</table>\n", f);
}

static void
near_table(FILE *f, const Report *r)
{
    size_t n = 0;

    if (r->retention.us <= 0)
    {
        fputs("<p class=\"muted\">No retention: no window is ever retired.</p>\n", f);
        return;
    }
    for (size_t i = 0; i < r->nwindows; i++)
        n += r->windows[i].state == WSTATE_NEAR_CUTOFF;
    if (n == 0)
    {
        fputs("<p class=\"muted\">None.</p>\n", f);
        return;
    }
    fputs("<table id=\"near-cutoff\"><tr><th>window</th><th>from</th><th>to</th><th>retires</th>"
          "<th class=\"num\">days left</th><th class=\"num\">rows</th>"
          "<th class=\"num\">near-cutoff rows written</th></tr>\n",
          f);
    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];
        char lo[32];
        char up[32];
        char ret[32];
        char rows[32];
        char left[32];

        if (w->state != WSTATE_NEAR_CUTOFF)
            continue;
        report_fmt_date(w->lower_us, " UTC", lo, sizeof lo);
        report_fmt_date(w->upper_us, " UTC", up, sizeof up);
        report_fmt_date(w->retires_at_us, " UTC", ret, sizeof ret);
        report_fmt_count(w->rows, rows, sizeof rows);
        report_fmt_days_left(w->time_left_us, left, sizeof left);
        fputs("<tr><td><code>", f);
        esc(f, w->name);
        fprintf(f,
                "</code></td><td>%s</td><td>%s</td><td>%s</td><td class=\"num\">%s</td>"
                "<td class=\"num\">%s%s</td><td class=\"num\">%" PRIu64 "</td></tr>\n",
                lo, up, ret, left,
                w->rows_exact ? "" : "~", rows, w->run_rows[DELAY_NEAR_CUTOFF]);
    }
    fputs("</table>\n", f);
}

static void
largest_table(FILE *f, const Report *r)
{
    const TrackerLargest *l;
    size_t n = tracker_largest(r->stats, &l);

    if (n == 0)
    {
        fputs("<p class=\"muted\">None recorded.</p>\n", f);
        return;
    }
    {
        char note[256];
        char at_insert[160];

        report_fmt_class_note(r, note, sizeof note, at_insert, sizeof at_insert);
        fputs("<p class=\"muted\" id=\"largest-class-note\">Class ", f);
        esc(f, note);
        fputs(".</p>\n", f);
    }
    fputs("<table id=\"largest\"><tr><th class=\"num\">delay</th><th>origin</th>"
          "<th>class</th><th>source reference</th><th>id</th><th>id time</th>"
          "<th>inserted</th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++)
    {
        char d[48];
        char id[48];
        char ins[48];

        duration_format(l[i].delay_us, d, sizeof d);
        civil_format_rfc3339(l[i].id_us, false, id, sizeof id);
        civil_format_rfc3339(l[i].insert_us, false, ins, sizeof ins);
        fprintf(f, "<tr><td class=\"num\" data-us=\"%" PRId64 "\">%s</td><td class=\"%s\">",
                l[i].delay_us, d, l[i].origin[0] ? "ref" : "muted");
        esc(f, report_largest_origin(&l[i]));
        fprintf(f, "</td><td>%s", delay_class_name(l[i].cls));
        if (l[i].cls_at_insert)
        {
            char ret[48];

            report_fmt_retention_us(l[i].cls_retention_us, ret, sizeof ret);
            fprintf(f, " (as judged at insert under %s)", ret);
        }
        fputs("</td><td class=\"ref\">", f);
        esc(f, l[i].ref);
        if (l[i].ref_truncated)
            fputs("…", f);
        fputs("</td><td class=\"ref\">", f);
        esc(f, l[i].id);
        fprintf(f, "</td><td>%s</td><td>%s</td></tr>\n", id, ins);
    }
    fputs("</table>\n", f);
}

static void
windows_table(FILE *f, const Report *r)
{
    fputs("<table id=\"windows\"><tr><th>window</th><th>from</th><th>to</th>"
          "<th class=\"num\">rows</th><th>state</th><th>retires</th>"
          "<th class=\"num\">days left</th></tr>\n",
          f);
    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];
        char lo[32];
        char up[32];
        char rows[32];

        report_fmt_date(w->lower_us, " UTC", lo, sizeof lo);
        report_fmt_date(w->upper_us, " UTC", up, sizeof up);
        report_fmt_count(w->rows, rows, sizeof rows);
        fprintf(f, "<tr class=\"st-%s\"><td><code>", window_state_name(w->state));
        esc(f, w->name);
        fprintf(f, "</code></td><td>%s</td><td>%s</td>", lo, up);
        if (w->rows < 0)
            fputs("<td class=\"num\">?</td>", f);
        else
            fprintf(f, "<td class=\"num\" data-rows=\"%.0f\">%s%s</td>", w->rows,
                    w->rows_exact ? "" : "~", rows);
        fprintf(f, "<td>%s</td>", window_state_name(w->state));
        if (w->state == WSTATE_NO_RETENTION)
            fputs("<td>never</td><td class=\"num\">–</td></tr>\n", f);
        else
        {
            char ret[32];
            char left[32];

            report_fmt_date(w->retires_at_us, " UTC", ret, sizeof ret);
            report_fmt_days_left(w->time_left_us, left, sizeof left);
            fprintf(f, "<td>%s</td><td class=\"num\">%s</td></tr>\n", ret, left);
        }
    }
    if (r->has_default)
    {
        char rows[32];

        report_fmt_count(r->default_rows, rows, sizeof rows);
        fputs("<tr><td><code>", f);
        esc(f, r->default_name);
        fprintf(f, "</code></td><td colspan=\"2\">DEFAULT</td><td class=\"num\">%s</td>"
                   "<td>default</td><td>never</td><td class=\"num\">–</td></tr>\n",
                rows);
    }
    fputs("</table>\n", f);
}

/* Partitions left "detach pending": not windows; each with the SQL that
 * settles it. */
static void
pending_table(FILE *f, const Report *r)
{
    if (r->npending == 0)
        return;
    fputs("<h2>Detach pending</h2>\n<p id=\"detach-pending-note\">", f);
    escf(f,
         "%zu partition%s left \"detach pending\" by a DETACH ... CONCURRENTLY that stopped "
         "half-way: not a window, and not counted above.  PostgreSQL routes no row there and "
         "queries do not see the rows there; no partition can be created for that range until "
         "the detach is finalized.",
         r->npending, r->npending == 1 ? " is" : "s are");
    fputs("</p>\n<table id=\"detach-pending\"><tr><th>partition</th><th>from</th><th>to</th>"
          "<th class=\"num\">rows (invisible to queries)</th><th>settle it</th></tr>\n",
          f);
    for (size_t i = 0; i < r->npending; i++)
    {
        const ReportPending *p = &r->pending[i];
        char lo[32];
        char up[32];
        char rows[32];

        report_fmt_date(p->lower_us, " UTC", lo, sizeof lo);
        report_fmt_date(p->upper_us, " UTC", up, sizeof up);
        report_fmt_count(p->rows, rows, sizeof rows);
        fputs("<tr><td><code>", f);
        escf(f, "%s.%s", p->schema, p->name);
        fprintf(f,
                "</code></td><td>%s</td><td>%s</td><td class=\"num\">%s%s</td>"
                "<td>finalize: <code>",
                lo, up, p->rows_exact || p->rows < 0 ? "" : "~", rows);
        esc(f, p->finalize_sql);
        fputs(";</code> then drop it, or restore its rows: <code>", f);
        esc(f, p->attach_sql);
        fputs(";</code></td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* The JSON report as a data block; '<' becomes \u003c (only strings can hold
 * it), so neither "</script" nor "<!--" can appear inside. */
static void
json_block(FILE *f, const Report *r)
{
    char *json = report_json(r);

    fputs("<script type=\"application/json\" id=\"v7fill-report\">\n", f);
    if (json)
        for (const char *s = json; *s; s++)
        {
            if (*s == '<')
                fputs("\\u003c", f);
            else
                fputc(*s, f);
        }
    fputs("\n</script>\n", f);
    free(json);
}

bool
report_write_html(const Report *r, const char *path, Err *err)
{
    FILE *f = fopen(path, "w");
    char now[48];
    const char *vclass = !r->verdict_known ? "none" : r->verdict_ok ? "ok" : "warn";

    if (f == NULL)
        return err_errno(err, EC_IO, "could not write %s", path);
    report_fmt_date(r->now_us, " UTC", now, sizeof now);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    escf(f, "v7fill report: %s.%s", r->schema, r->table);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", css);
    escf(f, "Retention report: %s.%s", r->schema, r->table);
    fputs("</h1>\n<p class=\"sub\">", f);
    escf(f, "%s key · %zu windows · generated %s by v7fill %s",
         catalog_key_kind_name(r->key_kind), r->nwindows, now, V7FILL_VERSION);
    fprintf(f, "</p>\n<div class=\"verdict %s\" id=\"verdict\">%s", vclass,
            !r->verdict_known ? "" : r->verdict_ok ? "✔ " : "⚠ ");
    esc(f, r->verdict);
    fputs("</div>\n", f);

    summary(f, r);
    fputs("<h2>Rows per window</h2>\n", f);
    windows_chart(f, r);
    pending_table(f, r);
    fputs("<h2>Delay distribution</h2>\n", f);
    delay_chart(f, r);
    delay_table(f, r);
    fputs("<h2>Windows near the cutoff</h2>\n", f);
    near_table(f, r);
    fputs("<h2>Largest delays</h2>\n", f);
    largest_table(f, r);
    fputs("<h2>All windows</h2>\n", f);
    windows_table(f, r);
    fputs("<footer>A window [from, to) retires once now &gt; to + retention. A row is expired "
          "when its window's to + retention is not after its insert time.</footer>\n",
          f);
    json_block(f, r);
    fputs("</body>\n</html>\n", f);
    if (ferror(f))
    {
        int e = errno;

        (void) fclose(f);
        errno = e;
        return err_errno(err, EC_IO, "could not write %s", path);
    }
    if (fclose(f) != 0)
        return err_errno(err, EC_IO, "could not write %s", path);
    return true;
}
