/*
 * Where the rows of CSV text end, for cutting a file into chunks (_csv.c's row_end()): a line
 * break ends a row only outside a quoted value. The bytes are lexed as Arrow's CSV parser
 * lexes them: a quote opens a quoted value only at a field's start; inside one, a doubled
 * quote (double_quote) stands for a quote and a single one closes it, the rest of the field
 * being read as unquoted text, in which quotes are plain bytes; an escape character (when
 * there is one) takes the next byte literally, a line break included; "\r", "\n" and "\r\n"
 * end a row.
 */
#ifndef SHARDFLOW_CSV_ROWS_H
#define SHARDFLOW_CSV_ROWS_H

#include <stdint.h>
#include <string.h>

typedef struct {
    int delimiter;    /* a byte */
    int quote;        /* a byte, or -1: no quoting */
    int double_quote; /* "" inside a quoted value stands for one quote */
    int escape;       /* a byte, or -1: no escaping */
} CsvDialect;

enum { ROWS_LAST = 0, ROWS_FIRST = 1 };

/*
 * Lexes buf[0, stop) byte by byte, buf[0] being a row's first byte. ROWS_LAST: the index of the last
 * byte of the last row that ends before `stop` ("\r" at stop - 1 is not counted: a "\n" may
 * follow it); ROWS_FIRST: of the first row that ends at or after index `from` (a "\r" at
 * stop - 1 is counted). A row's last byte is its "\n", or its "\r" when no "\n" follows.
 * Returns -1 when there is none.
 */
static int64_t lex_row_end(const uint8_t *buf, int64_t stop, int mode, int64_t from,
                           const CsvDialect *d) {
    uint8_t special[256];
    memset(special, 0, sizeof(special));
    special['\n'] = special['\r'] = 1;
    special[(uint8_t)d->delimiter] = 1;
    if (d->quote >= 0) special[(uint8_t)d->quote] = 1;
    if (d->escape >= 0) special[(uint8_t)d->escape] = 1;
    int64_t found = -1, i = 0;
    int field_start = 1;
    while (i < stop) {
        int64_t plain = i;
        while (i < stop && !special[buf[i]]) i++; /* the plain bytes of an unquoted value */
        if (i > plain) field_start = 0;
        if (i >= stop) break;
        uint8_t c = buf[i];
        if ((int)c == d->escape) { /* the next byte is literal */
            i += 2;
            field_start = 0;
            continue;
        }
        if ((int)c == d->quote && field_start) { /* a quoted value: find its closing quote */
            i++;
            for (;;) {
                if (d->escape < 0) {
                    const uint8_t *q = memchr(buf + i, d->quote, (size_t)(stop - i));
                    i = q == NULL ? stop : q - buf;
                } else {
                    while (i < stop && (int)buf[i] != d->quote && (int)buf[i] != d->escape) i++;
                }
                if (i >= stop) return mode == ROWS_FIRST ? -1 : found; /* inside the quotes */
                if ((int)buf[i] == d->escape) {
                    i += 2;
                    continue;
                }
                if (d->double_quote && i + 1 < stop && (int)buf[i + 1] == d->quote) {
                    i += 2;
                    continue;
                }
                i++; /* the closing quote: the field goes on unquoted */
                break;
            }
            field_start = 0;
            continue;
        }
        if ((int)c == d->delimiter) {
            field_start = 1;
            i++;
            continue;
        }
        if (c == '\n' || c == '\r') {
            int64_t end = i;
            if (c == '\r') {
                if (i + 1 < stop && buf[i + 1] == '\n') {
                    end = i + 1;
                } else if (i + 1 >= stop && mode == ROWS_LAST) {
                    break; /* perhaps the first half of "\r\n" */
                }
            }
            if (mode == ROWS_FIRST && end >= from) return end;
            found = end;
            i = end + 1;
            field_start = 1;
            continue;
        }
        i++; /* a quote inside an unquoted value: a plain byte */
        field_start = 0;
    }
    return mode == ROWS_FIRST ? -1 : found;
}

/* The last row end in buf[a, b) of text outside quotes ("\r" at stop - 1 not counted). */
static int64_t last_break(const uint8_t *buf, int64_t a, int64_t b, int64_t stop) {
    for (int64_t i = b - 1; i >= a; i--) {
        if (buf[i] == '\n' || (buf[i] == '\r' && i + 1 < stop)) return i;
    }
    return -1;
}

#define RECENT_QUOTED 64

typedef struct {
    int inside;                    /* in a quoted value */
    int64_t opened, skip;          /* where it opened; quotes before `skip` are taken */
    int64_t count;                 /* quoted values so far */
    int64_t starts[RECENT_QUOTED]; /* the last ones' spans, ends exclusive */
    int64_t ends[RECENT_QUOTED];
} QuoteWalk;

/* The quote at buf[at] (quotes come in order). */
static inline void on_quote(QuoteWalk *w, const uint8_t *buf, int64_t at, int64_t stop,
                            const CsvDialect *d) {
    if (at < w->skip) return; /* the second quote of a doubled one */
    if (w->inside) {
        if (d->double_quote && at + 1 < stop && (int)buf[at + 1] == d->quote) {
            w->skip = at + 2;
            return;
        }
        w->inside = 0; /* the closing quote: the field goes on unquoted */
        w->starts[w->count % RECENT_QUOTED] = w->opened;
        w->ends[w->count % RECENT_QUOTED] = at + 1;
        w->count++;
        return;
    }
    uint8_t before = at > 0 ? buf[at - 1] : '\n';
    if ((int)before == d->delimiter || before == '\n' || before == '\r') {
        w->inside = 1; /* a field's first byte (else a plain byte of an unquoted value) */
        w->opened = at;
    }
}

/*
 * ROWS_LAST without escape characters, visiting quotes only (found 8 bytes a step): a quote
 * outside quotes opens a quoted value when the byte before it is a delimiter or a line
 * break, or it is the first byte. The last row end is then in the text after the last
 * quoted values. Returns -2 when it is not after the last RECENT_QUOTED of them (the caller
 * lexes every byte).
 */
static int64_t last_row_end_by_quotes(const uint8_t *buf, int64_t stop, const CsvDialect *d) {
    QuoteWalk walk;
    walk.inside = 0;
    walk.opened = walk.skip = walk.count = 0;
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL;
    const uint64_t pattern = 0x0101010101010101ULL * (uint8_t)d->quote;
    int64_t at = 0;
    for (; at + 8 <= stop; at += 8) {
        uint64_t word;
        memcpy(&word, buf + at, 8);
        uint64_t x = word ^ pattern; /* zero bytes where the quotes are */
        uint64_t hits = ~(((x & low7) + low7) | x | low7); /* their top bits, exactly */
        while (hits) {
            on_quote(&walk, buf, at + (__builtin_ctzll(hits) >> 3), stop, d);
            hits &= hits - 1;
        }
    }
    for (; at < stop; at++) {
        if ((int)buf[at] == d->quote) on_quote(&walk, buf, at, stop, d);
    }
    if (walk.inside) { /* unterminated: the rest is inside the quotes */
        walk.starts[walk.count % RECENT_QUOTED] = walk.opened;
        walk.ends[walk.count % RECENT_QUOTED] = stop;
        walk.count++;
    }
    int64_t gap_end = stop;
    for (int64_t k = walk.count - 1; k >= 0 && k >= walk.count - RECENT_QUOTED; k--) {
        int64_t found = last_break(buf, walk.ends[k % RECENT_QUOTED], gap_end, stop);
        if (found >= 0) return found;
        gap_end = walk.starts[k % RECENT_QUOTED];
    }
    return walk.count > RECENT_QUOTED ? -2 : last_break(buf, 0, gap_end, stop);
}

/* See lex_row_end(); the same answer, faster where there are no escape characters. */
static int64_t csv_row_end(const uint8_t *buf, int64_t stop, int mode, int64_t from,
                           const CsvDialect *d) {
    if (mode == ROWS_LAST && d->escape < 0) {
        if (d->quote < 0) return last_break(buf, 0, stop, stop);
        int64_t found = last_row_end_by_quotes(buf, stop, d);
        if (found != -2) return found;
    }
    return lex_row_end(buf, stop, mode, from, d);
}

#endif
