/*
 * Thrift's compact protocol, read side, just enough for Parquet's PageHeader, for
 * connectors/parquet/_parquet_decode.c: the fields it uses, which of them a header holds, and
 * everything else skipped (nested no deeper than 16). Any malformed input clears ``ok``.
 */
#ifndef SHARDFLOW_PARQUET_PAGE_HEADER_H
#define SHARDFLOW_PARQUET_PAGE_HEADER_H

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Thrift compact protocol, just enough for PageHeader. */

typedef struct {
    const uint8_t *at, *end;
    int ok;
} Reader;

static uint64_t read_varint(Reader *r) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->at >= r->end) break;
        uint8_t byte = *r->at++;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) return value;
    }
    r->ok = 0;
    return 0;
}

static int64_t read_zigzag(Reader *r) {
    uint64_t raw = read_varint(r);
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}

enum { T_STOP = 0, T_TRUE = 1, T_FALSE = 2, T_I8 = 3, T_I16 = 4, T_I32 = 5, T_I64 = 6,
       T_DOUBLE = 7, T_BINARY = 8, T_LIST = 9, T_SET = 10, T_MAP = 11, T_STRUCT = 12 };

static void skip_value(Reader *r, int type, int depth);

/* The next field header of a struct: its type (T_STOP at the struct's end, or when the
 * input ends, with ``ok`` cleared) and, in ``id``, its field id (``last`` is the previous
 * field's id, updated). */
static int next_field(Reader *r, int *last, int *id) {
    if (r->at >= r->end) {
        r->ok = 0;
        return T_STOP;
    }
    uint8_t head = *r->at++;
    int type = head & 0x0F;
    if (type == T_STOP) return T_STOP;
    int delta = head >> 4;
    *id = delta ? *last + delta : (int)read_zigzag(r); /* a delta, or a long-form id */
    *last = *id;
    return type;
}

static void skip_struct(Reader *r, int depth) {
    if (depth > 16) {
        r->ok = 0;
        return;
    }
    int last = 0, id, type;
    while (r->ok && (type = next_field(r, &last, &id)) != T_STOP) skip_value(r, type, depth + 1);
}

static void skip_value(Reader *r, int type, int depth) {
    switch (type) {
    case T_TRUE:
    case T_FALSE:
        return;
    case T_I8:
        if (r->at >= r->end) r->ok = 0;
        else r->at++;
        return;
    case T_I16:
    case T_I32:
    case T_I64:
        read_varint(r);
        return;
    case T_DOUBLE:
        if (r->end - r->at < 8) r->ok = 0;
        else r->at += 8;
        return;
    case T_BINARY: {
        uint64_t n = read_varint(r);
        if (!r->ok || n > (uint64_t)(r->end - r->at)) r->ok = 0;
        else r->at += n;
        return;
    }
    case T_LIST:
    case T_SET: {
        if (r->at >= r->end) {
            r->ok = 0;
            return;
        }
        uint8_t head = *r->at++;
        uint64_t n = head >> 4;
        if (n == 15) n = read_varint(r);
        int element = head & 0x0F;
        for (uint64_t i = 0; i < n && r->ok; i++) {
            if (element == T_TRUE || element == T_FALSE) { /* one byte a bool in a list */
                if (r->at >= r->end) r->ok = 0;
                else r->at++;
            } else {
                skip_value(r, element, depth + 1);
            }
        }
        return;
    }
    case T_STRUCT:
        skip_struct(r, depth);
        return;
    default: /* maps do not occur in a PageHeader */
        r->ok = 0;
        return;
    }
}

/* The fields of a PageHeader this module uses; -1 where absent. ``seen`` has bit ``id`` set
 * for each field of the page's own header struct read (its required fields must all be). */
typedef struct {
    int64_t type, uncompressed, compressed, num_values, encoding, level_encoding, num_nulls,
        levels_length, repetition_length, is_compressed, num_rows, repetition_encoding;
    unsigned seen;
} Header;

/* The required fields of DataPageHeader (kind 1), DictionaryPageHeader (2) and
 * DataPageHeaderV2 (3), as bits by field id. */
static const unsigned REQUIRED[4] = {0, 0x1E, 0x06, 0x7E};

/* An i32 field; any other type (a writer never uses one) fails the parse. */
static int64_t read_int(Reader *r, int type) {
    if (type != T_I32) {
        r->ok = 0;
        return 0;
    }
    return read_zigzag(r);
}

/* Reads the fields of a DataPageHeader (kind 1), DictionaryPageHeader (kind 2) or
 * DataPageHeaderV2 (kind 3) into ``h``. */
static void read_page_struct(Reader *r, Header *h, int kind) {
    int last = 0, id, type;
    while (r->ok && (type = next_field(r, &last, &id)) != T_STOP) {
        if (id > 0 && id < 32) h->seen |= 1u << id;
        int is_bool = type == T_TRUE || type == T_FALSE;
        if ((kind == 3 && id == 7) || (kind == 2 && id == 3)) { /* is_compressed, is_sorted */
            if (!is_bool) r->ok = 0;
            if (kind == 3) h->is_compressed = type == T_TRUE;
            continue;
        }
        int64_t *target = NULL;
        if (id == 1) target = &h->num_values;
        else if (id == 2) target = kind == 3 ? &h->num_nulls : &h->encoding;
        else if (kind == 1 && id == 3) target = &h->level_encoding;
        else if (kind == 1 && id == 4) target = &h->repetition_encoding;
        else if (kind == 3 && id == 3) target = &h->num_rows;
        else if (kind == 3 && id == 4) target = &h->encoding;
        else if (kind == 3 && id == 5) target = &h->levels_length;
        else if (kind == 3 && id == 6) target = &h->repetition_length;
        if (target != NULL) {
            *target = read_int(r, type);
        } else {
            /* statistics (v1's field 5, v2's 8) are a struct; other ids are skipped */
            if (((kind == 1 && id == 5) || (kind == 3 && id == 8)) && type != T_STRUCT) r->ok = 0;
            skip_value(r, type, 1);
        }
    }
}

/* Whether ``encoding`` is one of the format's encodings (PLAIN .. BYTE_STREAM_SPLIT). */
static int known_encoding(int64_t encoding) { return encoding >= 0 && encoding <= 9; }

#endif /* SHARDFLOW_PARQUET_PAGE_HEADER_H */
