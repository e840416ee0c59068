/*
 * Text for the text parsers (_jsonl.c, _csv.c): a growable byte sink and UTF-8 validation.
 */
#ifndef SHARDFLOW_PARSE_TEXT_H
#define SHARDFLOW_PARSE_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t len, cap;
} ByteSink;

static inline int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0. */
static int utf8_sequence(const uint8_t *p, const uint8_t *end) {
    uint8_t b0 = p[0];
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (b0 == 0xE0 && p[1] < 0xA0) return 0;
        if (b0 == 0xED && p[1] > 0x9F) return 0;
        return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (b0 == 0xF0 && p[1] < 0x90) return 0;
        if (b0 == 0xF4 && p[1] > 0x8F) return 0;
        return 4;
    }
    return 0;
}

/* Room for `more` bytes; 0 when out of memory (*nomem set) or past 2 GiB. */
static int sink_reserve(ByteSink *s, size_t more, int *nomem) {
    if (s->len + more <= s->cap) return 1;
    size_t cap = s->cap ? s->cap * 2 : 256;
    while (cap < s->len + more) cap *= 2;
    if (cap > (size_t)INT32_MAX) return 0;
    uint8_t *grown = (uint8_t *)realloc(s->data, cap);
    if (grown == NULL) {
        *nomem = 1;
        return 0;
    }
    s->data = grown;
    s->cap = cap;
    return 1;
}

static inline int sink_append(ByteSink *s, const uint8_t *bytes, size_t n, int *nomem) {
    if (!sink_reserve(s, n, nomem)) return 0;
    memcpy(s->data + s->len, bytes, n);
    s->len += n;
    return 1;
}

#endif
