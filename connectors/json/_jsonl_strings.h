/*
 * Strings for _jsonl.c: JSON strings validated (UTF-8, escapes, surrogate pairs) and decoded
 * into a byte sink.
 */
#ifndef SHARDFLOW_JSONL_STRINGS_H
#define SHARDFLOW_JSONL_STRINGS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_parse_text.h"

/* 0: copy, 1: quote, 2: backslash, 3: control character, 4: not ASCII */
static uint8_t str_class[256];

static void init_classes(void) {
    for (int i = 0; i < 256; i++) {
        str_class[i] = i < 0x20 ? 3 : (i >= 0x80 ? 4 : 0);
    }
    str_class['"'] = 1;
    str_class['\\'] = 2;
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= (uint32_t)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') v |= (uint32_t)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F') v |= (uint32_t)(ch - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/*
 * Parses the string that starts at *pp (just after its opening quote) into `out` when it is
 * not NULL, else only validates it; *pp ends after the closing quote. *escaped says whether
 * the string held an escape. Returns 0 to decline (or when out of memory: *nomem set).
 */
static int parse_string(const uint8_t **pp, const uint8_t *end, ByteSink *out, int *escaped,
                        int *nomem) {
    const uint8_t *p = *pp;
    *escaped = 0;
    for (;;) {
        const uint8_t *run = p;
        while (p < end && str_class[*p] == 0) p++;
        if (out != NULL && p > run && !sink_append(out, run, (size_t)(p - run), nomem)) return 0;
        if (p >= end) return 0;
        uint8_t cls = str_class[*p];
        if (cls == 1) {
            *pp = p + 1;
            return 1;
        }
        if (cls == 3) return 0;
        if (cls == 4) {
            int n = utf8_sequence(p, end);
            if (n == 0) return 0;
            if (out != NULL && !sink_append(out, p, (size_t)n, nomem)) return 0;
            p += n;
            continue;
        }
        /* a backslash */
        *escaped = 1;
        if (end - p < 2) return 0;
        uint8_t decoded[4];
        int nout = 1;
        switch (p[1]) {
            case '"': decoded[0] = '"'; break;
            case '\\': decoded[0] = '\\'; break;
            case '/': decoded[0] = '/'; break;
            case 'b': decoded[0] = '\b'; break;
            case 'f': decoded[0] = '\f'; break;
            case 'n': decoded[0] = '\n'; break;
            case 'r': decoded[0] = '\r'; break;
            case 't': decoded[0] = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (end - p < 6 || !hex4(p + 2, &cp)) return 0;
                p += 4; /* now p[1] is the last hex digit */
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t low;
                    if (end - p < 8 || p[2] != '\\' || p[3] != 'u' || !hex4(p + 4, &low)) return 0;
                    if (low < 0xDC00 || low > 0xDFFF) return 0;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    p += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return 0;
                }
                if (cp < 0x80) {
                    decoded[0] = (uint8_t)cp;
                } else if (cp < 0x800) {
                    decoded[0] = (uint8_t)(0xC0 | (cp >> 6));
                    decoded[1] = (uint8_t)(0x80 | (cp & 0x3F));
                    nout = 2;
                } else if (cp < 0x10000) {
                    decoded[0] = (uint8_t)(0xE0 | (cp >> 12));
                    decoded[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    decoded[2] = (uint8_t)(0x80 | (cp & 0x3F));
                    nout = 3;
                } else {
                    decoded[0] = (uint8_t)(0xF0 | (cp >> 18));
                    decoded[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                    decoded[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    decoded[3] = (uint8_t)(0x80 | (cp & 0x3F));
                    nout = 4;
                }
                break;
            }
            default:
                return 0;
        }
        if (out != NULL && !sink_append(out, decoded, (size_t)nout, nomem)) return 0;
        p += 2;
    }
}

/* A decoded string of the form YYYY-MM-DD...: Arrow may infer a timestamp from it. */
static int looks_like_date(const uint8_t *s, size_t n) {
    if (n < 10) return 0;
    return is_digit((char)s[0]) && is_digit((char)s[1]) && is_digit((char)s[2]) &&
           is_digit((char)s[3]) && s[4] == '-' && is_digit((char)s[5]) && is_digit((char)s[6]) &&
           s[7] == '-' && is_digit((char)s[8]) && is_digit((char)s[9]);
}

#endif
