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
 * Lexes buf[0, stop), buf[0] being a row's first byte. ROWS_LAST: the index of the last
 * byte of the last row that ends before `stop` ("\r" at stop - 1 is not counted: a "\n" may
 * follow it); ROWS_FIRST: of the first row that ends at or after index `from` (a "\r" at
 * stop - 1 is counted). A row's last byte is its "\n", or its "\r" when no "\n" follows.
 * Returns -1 when there is none.
 */
static int64_t csv_row_end(const uint8_t *buf, int64_t stop, int mode, int64_t from,
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

#endif
