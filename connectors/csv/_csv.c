/*
 * shardflow.connectors.csv._csv: a CSV parser for files of numbers and strings, producing Arrow
 * buffers.
 *
 * parse(buffer, names, kinds, null_values, true_values, false_values) reads whole lines of
 * comma-separated values (fields quoted with '"', a quote doubled inside) as
 * pyarrow.csv.read_csv does with its default options: the column names from the first line
 * when `names` is empty, else `names` with no header line; each column's type inferred (kind
 * -1) or given (INT64, DOUBLE, STRING). It returns (rows, columns), each column being
 * (name, kind, null_count, validity, data, offsets), or a str saying why it declined: anything
 * it does not read exactly as Arrow would (a column Arrow may read as bool, date, time or
 * timestamp, numbers in forms such as "+1", " 2", ".5", "1e400" or "0x10", invalid UTF-8,
 * rows of the wrong width, quotes inside unquoted values, lone carriage returns, duplicate
 * column names, no data row). The caller then parses the same bytes with Arrow.
 *
 * A column is inferred the way Arrow's inference ends for these values: null when every value
 * is a null value (null_values), else string when some value can only be a string (does not
 * start with a digit, sign or point once trimmed, and is no null, true, false, inf or nan
 * word), else int64 when every other value is an int64 literal, else double. Strings are
 * never null (Arrow's strings_can_be_null is off by default); doubles are correctly rounded.
 * The parse runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_csv_rows.h"
#include "_parse_numbers.h"
#include "_parse_python.h"
#include "_parse_text.h"

enum { K_INFER = -1, K_NULL = 0, K_INT = 2, K_DOUBLE = 3, K_STRING = 4 };
enum { V_NULL, V_INT, V_FLOAT, V_STRING, V_AMBIGUOUS };

#define MAX_COLUMNS 1024
#define MAX_WORDS 64
#define F_QUOTED 1
#define F_DOUBLED 2 /* a quoted value holding doubled quotes */

typedef struct {
    const uint8_t *text;
    Py_ssize_t len;
} Word;

typedef struct {
    Word words[MAX_WORDS];
    int count;
    /* bit b of maybe[len][c >> 6] is set when some word of length len (< 32) starts with the
       byte c = (c & ~63) + b: most values are ruled out without comparing bytes */
    uint64_t maybe[32][4];
} WordList;

typedef struct {
    const uint8_t *buf;
    int ncols;
    int64_t rows, row_cap;
    uint32_t *starts, *lens; /* row-major: field (row, col) at row * ncols + col */
    uint8_t *flags;
    WordList nulls, trues, falses;
    int number_nulls; /* some null value is itself a number literal */
    const char *decline;
    int nomem;
} Csv;

#define DECLINE(reason)          \
    do {                         \
        cv->decline = (reason);  \
        return 0;                \
    } while (0)

/* ---------------------------------------------------------------------------------------- */
/* Lines and fields                                                                          */

/* 1 for the bytes that end an unquoted value (or must not be in one): , \n \r " */
static uint8_t stop_byte[256];
/* 1 for the bytes a quoted value stops at: " \n \r */
static uint8_t quote_stop[256];

static void init_tables(void) {
    stop_byte[','] = stop_byte['\n'] = stop_byte['\r'] = stop_byte['"'] = 1;
    quote_stop['"'] = quote_stop['\n'] = quote_stop['\r'] = 1;
}

enum { FIELD_DECLINE = -1, FIELD_MORE = 0, FIELD_LAST = 1 };

/*
 * Reads the value at *pp: its bytes are [*start, *stop) (inside the quotes of a quoted one),
 * *flag says how it was written, and *pp moves past the comma or the line's end. Returns
 * FIELD_MORE when a comma followed, FIELD_LAST at the end of a line (or of the buffer), or
 * FIELD_DECLINE (cv->decline says why).
 */
static inline int next_field(Csv *cv, const uint8_t **pp, const uint8_t *end,
                             const uint8_t **start, const uint8_t **stop, uint8_t *flag) {
    const uint8_t *p = *pp;
    *flag = 0;
    if (p < end && *p == '"') {
        *flag = F_QUOTED;
        *start = ++p;
        for (;;) {
            const uint8_t *q = p;
            while (q < end && !quote_stop[*q]) q++;
            if (q >= end) {
                cv->decline = "an unterminated quoted value";
                return FIELD_DECLINE;
            }
            if (*q != '"') {
                cv->decline = "a line break inside a quoted value";
                return FIELD_DECLINE;
            }
            if (q + 1 < end && q[1] == '"') {
                *flag |= F_DOUBLED;
                p = q + 2;
                continue;
            }
            *stop = q;
            p = q + 1;
            break;
        }
        if (p < end && *p != ',' && *p != '\n' && *p != '\r') {
            cv->decline = "text after a closing quote";
            return FIELD_DECLINE;
        }
    } else {
        *start = p;
        while (p < end && !stop_byte[*p]) p++;
        if (p < end && *p == '"') {
            cv->decline = "a quote inside an unquoted value";
            return FIELD_DECLINE;
        }
        *stop = p;
    }
    if (p < end && *p == ',') {
        *pp = p + 1;
        return FIELD_MORE;
    }
    if (p < end && *p == '\r') {
        if (p + 1 >= end || p[1] != '\n') {
            cv->decline = "a carriage return that does not end a line";
            return FIELD_DECLINE;
        }
        p++;
    }
    if (p < end) p++; /* the '\n' */
    *pp = p;
    return FIELD_LAST;
}

/*
 * Splits the line at *pp (not empty) into fields, stored as row cv->rows; *pp ends at the
 * next line. Returns the number of fields, or -1 to decline.
 */
static int split_line(Csv *cv, const uint8_t **pp, const uint8_t *end) {
    int col = 0;
    for (;;) {
        const uint8_t *start, *stop;
        uint8_t flag;
        int got = next_field(cv, pp, end, &start, &stop, &flag);
        if (got == FIELD_DECLINE) return -1;
        if (col >= cv->ncols) {
            cv->decline = "a row with more values than columns";
            return -1;
        }
        int64_t at = cv->rows * cv->ncols + col;
        cv->starts[at] = (uint32_t)(start - cv->buf);
        cv->lens[at] = (uint32_t)(stop - start);
        cv->flags[at] = flag;
        col++;
        if (got == FIELD_LAST) return col;
    }
}

/* Whether the rest at p is an empty line (the '\n' or "\r\n" is consumed). */
static int empty_line(const uint8_t **pp, const uint8_t *end) {
    const uint8_t *p = *pp;
    if (*p == '\n') {
        *pp = p + 1;
        return 1;
    }
    if (*p == '\r' && p + 1 < end && p[1] == '\n') {
        *pp = p + 2;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Values                                                                                    */

static int in_list(const WordList *list, const uint8_t *s, size_t n) {
    if (n < 32) {
        uint8_t c = n ? s[0] : 0;
        if (!(list->maybe[n][c >> 6] >> (c & 63) & 1)) return 0;
    }
    for (int i = 0; i < list->count; i++) {
        if ((size_t)list->words[i].len == n && memcmp(list->words[i].text, s, n) == 0) return 1;
    }
    return 0;
}

static int same_word_ignoring_case(const uint8_t *s, size_t n, const char *word) {
    size_t m = strlen(word);
    if (n != m) return 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];
        if (ch >= 'A' && ch <= 'Z') ch = (uint8_t)(ch - 'A' + 'a');
        if (ch != (uint8_t)word[i]) return 0;
    }
    return 1;
}

/* An int64 literal: -?[0-9]+ within range ("-0" is 0, as Arrow reads it). */
static int int_literal(const uint8_t *s, size_t n, int64_t *out, int *too_big) {
    *too_big = 0;
    size_t i = 0;
    int neg = 0;
    if (n > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i >= n) return 0;
    uint64_t v = 0;
    size_t fast = n - i <= 18 ? n : i + 18; /* 18 digits cannot overflow */
    for (; i < fast; i++) {
        if (!is_digit((char)s[i])) return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    for (; i < n; i++) {
        if (!is_digit((char)s[i])) return 0;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            *too_big = 1;
            return 0;
        }
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
        *too_big = 1;
        return 0;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

/* A double literal -?digits(.digits)?([eE][+-]?digits)? taking all n bytes. */
static int double_literal(const uint8_t *s, size_t n, double *out) {
    const char *p = (const char *)s;
    int64_t iv;
    if (n == 0) return 0;
    return parse_number_ex(&p, (const char *)s + n, 1, 1, &iv, out) == 2 && p == (const char *)s + n;
}

static int classify(const Csv *cv, const uint8_t *s, size_t n) {
    if (in_list(&cv->nulls, s, n)) return V_NULL;
    int64_t iv;
    int too_big;
    if (int_literal(s, n, &iv, &too_big)) return V_INT;
    double dv;
    if (double_literal(s, n, &dv)) return V_FLOAT; /* int literals past int64 too */
    size_t a = 0, b = n;
    while (a < b && (s[a] == ' ' || s[a] == '\t')) a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) b--;
    if (a == b) return V_AMBIGUOUS;
    uint8_t c = s[a];
    if (is_digit((char)c) || c == '+' || c == '-' || c == '.') return V_AMBIGUOUS;
    const uint8_t *t = s + a;
    size_t m = b - a;
    if (in_list(&cv->nulls, t, m) || in_list(&cv->trues, t, m) || in_list(&cv->falses, t, m))
        return V_AMBIGUOUS;
    if (same_word_ignoring_case(t, m, "inf") || same_word_ignoring_case(t, m, "infinity") ||
        same_word_ignoring_case(t, m, "nan"))
        return V_AMBIGUOUS;
    return V_STRING;
}

/* ---------------------------------------------------------------------------------------- */
/* Columns                                                                                   */

typedef struct {
    int kind;
    int64_t null_count;
    uint8_t *validity, *data;
    int32_t *offsets;
    ByteSink text;
} OutColumn;

static void out_free(OutColumn *o) {
    free(o->validity);
    free(o->data);
    free(o->offsets);
    free(o->text.data);
    memset(o, 0, sizeof(*o));
}

/* Buffers for up to `cap` values of `kind`. */
static int out_prepare(Csv *cv, OutColumn *o, int kind, int64_t cap) {
    o->kind = kind;
    if (kind == K_STRING) {
        o->offsets = (int32_t *)malloc((size_t)(cap + 1) * sizeof(int32_t));
        if (o->offsets == NULL || !sink_reserve(&o->text, 1024, &cv->nomem)) goto nomem;
        o->offsets[0] = 0;
    } else if (kind != K_NULL) {
        o->data = (uint8_t *)malloc((size_t)(cap + 1) * 8);
        if (o->data == NULL) goto nomem;
    }
    return 1;
nomem:
    cv->nomem = 1;
    return 0;
}

static int set_null(Csv *cv, OutColumn *o, int64_t row) {
    if (o->validity == NULL) {
        size_t nbytes = (size_t)((cv->row_cap + 7) / 8 + 1);
        o->validity = (uint8_t *)malloc(nbytes);
        if (o->validity == NULL) {
            cv->nomem = 1;
            return 0;
        }
        memset(o->validity, 0xFF, nbytes);
    }
    o->validity[row >> 3] &= (uint8_t)~(1u << (row & 7));
    o->null_count++;
    memset(o->data + 8 * row, 0, 8);
    return 1;
}

/* Appends the value [s, e) (quotes undoubled when `doubled`) to o's text; 0 on invalid
   UTF-8. */
static int append_text(Csv *cv, OutColumn *o, const uint8_t *s, const uint8_t *e, int doubled) {
    if (s == e) return 1; /* (an empty sink has no memory to copy to) */
    if (!sink_reserve(&o->text, (size_t)(e - s), &cv->nomem)) return 0;
    uint8_t *out = o->text.data + o->text.len;
    if (!doubled) { /* ASCII a word at a time, then one copy */
        const uint8_t *q = s;
        uint64_t high = 0;
        for (; q + 8 <= e; q += 8) {
            uint64_t w;
            memcpy(&w, q, 8);
            high |= w;
        }
        for (; q < e; q++) high |= *q;
        if (!(high & 0x8080808080808080ULL)) {
            memcpy(out, s, (size_t)(e - s));
            o->text.len += (size_t)(e - s);
            return 1;
        }
    }
    while (s < e) {
        uint8_t ch = *s;
        if (ch < 0x80) {
            *out++ = ch;
            s += (doubled && ch == '"') ? 2 : 1; /* "" stands for one quote */
            continue;
        }
        int n = utf8_sequence(s, e);
        if (n == 0) DECLINE("a value that is not UTF-8 (Arrow reads the column as binary)");
        memcpy(out, s, (size_t)n);
        out += n;
        s += n;
    }
    o->text.len = (size_t)(out - o->text.data);
    return 1;
}

/* Stores the value [s, s + n) as row `row` of o (whose kind is known). */
static inline int store_value(Csv *cv, OutColumn *o, int64_t row, const uint8_t *s, size_t n,
                              uint8_t flag) {
    switch (o->kind) {
        case K_STRING:
            if (!append_text(cv, o, s, s + n, flag & F_DOUBLED)) return 0;
            if (o->text.len > (size_t)INT32_MAX) DECLINE("too much text for one chunk");
            o->offsets[row + 1] = (int32_t)o->text.len;
            return 1;
        case K_INT: {
            int64_t v;
            int too_big;
            if (int_literal(s, n, &v, &too_big)) {
                memcpy(o->data + 8 * row, &v, 8);
                return 1;
            }
            if (in_list(&cv->nulls, s, n)) return set_null(cv, o, row);
            DECLINE("a value that is not an int64 literal");
        }
        case K_DOUBLE: {
            double d;
            if (n > 0 && (is_digit((char)s[0]) || s[0] == '-') && double_literal(s, n, &d)) {
                memcpy(o->data + 8 * row, &d, 8);
                return 1;
            }
            if (in_list(&cv->nulls, s, n)) return set_null(cv, o, row);
            DECLINE("a value that is not a plain number");
        }
        default: /* K_NULL */
            return 1;
    }
}

/* The kind Arrow infers for column `col` of the split rows, or K_INFER to decline. */
static int infer_kind(Csv *cv, int col) {
    int64_t rows = cv->rows, ncols = cv->ncols;
    int seen_ambiguous = 0, seen_float = 0, seen_value = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = r * ncols + col;
        int v = classify(cv, cv->buf + cv->starts[i], cv->lens[i]);
        if (v == V_STRING) return K_STRING;
        seen_ambiguous |= v == V_AMBIGUOUS;
        seen_float |= v == V_FLOAT;
        seen_value |= v != V_NULL;
    }
    if (seen_ambiguous) {
        cv->decline = "values Arrow may read as another type";
        return K_INFER;
    }
    if (!seen_value) return K_NULL;
    return seen_float ? K_DOUBLE : K_INT;
}

/* Converts column `col` of the split rows (a chunk whose types are inferred). */
static int convert_column(Csv *cv, int col, int kind, OutColumn *o) {
    if (kind == K_INFER) {
        kind = infer_kind(cv, col);
        if (kind == K_INFER) return 0;
    }
    if (!out_prepare(cv, o, kind, cv->rows)) return 0;
    if (kind == K_NULL) {
        o->null_count = cv->rows;
        return 1;
    }
    for (int64_t r = 0; r < cv->rows; r++) {
        int64_t i = r * cv->ncols + col;
        if (!store_value(cv, o, r, cv->buf + cv->starts[i], cv->lens[i], cv->flags[i]))
            return 0;
    }
    return 1;
}

/*
 * The common case of a number column: an unquoted number followed by a comma or the line's
 * end is parsed where it stands (one pass over its bytes). Returns 0, moving nothing, for
 * anything else (the caller then reads the value the general way).
 */
static inline int number_in_place(Csv *cv, OutColumn *o, int64_t row, const uint8_t **pp,
                                  const uint8_t *end, int *got) {
    if (o->kind != K_INT && o->kind != K_DOUBLE) return 0;
    const uint8_t *p = *pp;
    if (p >= end || !(is_digit((char)*p) || *p == '-')) return 0;
    const char *q = (const char *)p;
    int64_t iv;
    double dv;
    int kind = parse_number_ex(&q, (const char *)end, o->kind == K_DOUBLE, 1, &iv, &dv);
    const uint8_t *after = (const uint8_t *)q;
    if (kind == 0 || (kind == 2 && o->kind == K_INT)) return 0;
    if (after < end && *after != ',' && *after != '\n' && *after != '\r') return 0;
    if (cv->number_nulls && in_list(&cv->nulls, p, (size_t)(after - p))) return 0;
    if (o->kind == K_INT) {
        memcpy(o->data + 8 * row, &iv, 8);
    } else {
        memcpy(o->data + 8 * row, &dv, 8);
    }
    if (after < end && *after == ',') {
        *pp = after + 1;
        *got = FIELD_MORE;
        return 1;
    }
    if (after < end && *after == '\r') {
        if (after + 1 >= end || after[1] != '\n') return 0;
        after++;
    }
    if (after < end) after++;
    *pp = after;
    *got = FIELD_LAST;
    return 1;
}

/* Parses a chunk whose every column's type is known in one pass, row by row. */
static int parse_typed(Csv *cv, const uint8_t *buf, Py_ssize_t size, OutColumn *outs) {
    const uint8_t *p = buf, *end = buf + size;
    int64_t row = 0;
    while (p < end) {
        if (empty_line(&p, end)) continue;
        int col = 0, got = FIELD_MORE;
        while (got == FIELD_MORE) {
            const uint8_t *start, *stop;
            uint8_t flag;
            if (col < cv->ncols && number_in_place(cv, &outs[col], row, &p, end, &got)) {
                col++;
                continue;
            }
            got = next_field(cv, &p, end, &start, &stop, &flag);
            if (got == FIELD_DECLINE) return 0;
            if (col >= cv->ncols) DECLINE("a row with more values than columns");
            if (!store_value(cv, &outs[col], row, start, (size_t)(stop - start), flag)) return 0;
            col++;
        }
        if (col != cv->ncols) DECLINE("a row with fewer values than columns");
        row++;
    }
    cv->rows = row;
    if (row == 0) DECLINE("no data row");
    for (int c = 0; c < cv->ncols; c++) {
        if (outs[c].kind == K_NULL) outs[c].null_count = row;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Python API                                                                                */

static int load_words(PyObject *tuple, WordList *list) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) > MAX_WORDS) {
        PyErr_SetString(PyExc_ValueError, "word lists must be tuples of at most 64 bytes");
        return 0;
    }
    list->count = (int)PyTuple_GET_SIZE(tuple);
    for (int i = 0; i < list->count; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "word lists hold bytes");
            return 0;
        }
        list->words[i].text = (const uint8_t *)PyBytes_AS_STRING(item);
        list->words[i].len = PyBytes_GET_SIZE(item);
        Py_ssize_t n = list->words[i].len;
        if (n < 32) {
            uint8_t c = n ? list->words[i].text[0] : 0;
            list->maybe[n][c >> 6] |= (uint64_t)1 << (c & 63);
        }
    }
    return 1;
}

/* Splits every line of [buf, buf + size) into rows of cv's span arrays. */
static int split_all(Csv *cv, const uint8_t *buf, Py_ssize_t size) {
    const uint8_t *p = buf, *end = buf + size;
    while (p < end) {
        if (empty_line(&p, end)) continue;
        int fields = split_line(cv, &p, end);
        if (fields < 0) return 0;
        if (fields != cv->ncols) DECLINE("a row with fewer values than columns");
        cv->rows++;
    }
    if (cv->rows == 0) DECLINE("no data row");
    return 1;
}

#define SAMPLE_ROWS 64
#define SAMPLE_COLUMNS 64

/*
 * Guesses the kind of each column of kinds[] still K_INFER from the first rows of
 * [buf, buf + size), as inference would decide if the chunk ended there. Returns 0 when a
 * column cannot be guessed (only nulls, or a value of unclear type so far): the chunk is
 * then split and inferred whole.
 */
static int guess_kinds(const Csv *cv, const uint8_t *buf, Py_ssize_t size, int *kinds) {
    Csv sample = *cv;
    uint32_t starts[SAMPLE_ROWS * SAMPLE_COLUMNS], lens[SAMPLE_ROWS * SAMPLE_COLUMNS];
    uint8_t flags[SAMPLE_ROWS * SAMPLE_COLUMNS];
    if (cv->ncols > SAMPLE_COLUMNS) return 0;
    sample.starts = starts;
    sample.lens = lens;
    sample.flags = flags;
    sample.rows = 0;
    const uint8_t *p = buf, *end = buf + size;
    while (p < end && sample.rows < SAMPLE_ROWS) {
        if (empty_line(&p, end)) continue;
        if (split_line(&sample, &p, end) != cv->ncols) return 0;
        sample.rows++;
    }
    for (int c = 0; c < cv->ncols; c++) {
        if (kinds[c] != K_INFER) continue; /* given */
        kinds[c] = infer_kind(&sample, c);
        if (kinds[c] == K_INFER || kinds[c] == K_NULL) return 0;
    }
    return 1;
}

/* The chunk's columns: typed in one pass where the kinds are known (or guessed right), else
   split into spans and each column inferred. */
static int parse_chunk(Csv *cv, const uint8_t *buf, Py_ssize_t size, const int *given,
                       OutColumn *outs) {
    int kinds[MAX_COLUMNS];
    int typed = 1;
    for (int c = 0; c < cv->ncols; c++) {
        kinds[c] = given[c];
        typed &= given[c] != K_INFER;
    }
    int guessed = !typed && guess_kinds(cv, buf, size, kinds);
    if (typed || guessed) {
        int ok = 1;
        for (int c = 0; ok && c < cv->ncols; c++) ok = out_prepare(cv, &outs[c], kinds[c], cv->row_cap);
        ok = ok && parse_typed(cv, buf, size, outs);
        if (ok || typed || cv->nomem) return ok;
        for (int c = 0; c < cv->ncols; c++) out_free(&outs[c]); /* a wrong guess */
        cv->decline = NULL;
        cv->rows = 0;
    }
    size_t cells = (size_t)cv->row_cap * (size_t)cv->ncols;
    cv->starts = (uint32_t *)malloc(cells * sizeof(uint32_t));
    cv->lens = (uint32_t *)malloc(cells * sizeof(uint32_t));
    cv->flags = (uint8_t *)malloc(cells);
    if (!cv->starts || !cv->lens || !cv->flags) {
        cv->nomem = 1;
        return 0;
    }
    if (!split_all(cv, buf, size)) return 0;
    for (int c = 0; c < cv->ncols; c++) {
        if (!convert_column(cv, c, given[c], &outs[c])) return 0;
    }
    return 1;
}

/* Python object for column c's buffers (moved out of o). */
static PyObject *column_tuple(Csv *cv, OutColumn *o, PyObject *name) {
    int64_t rows = cv->rows;
    size_t data_size = 0, offsets_size = 0;
    if (o->kind == K_STRING) {
        free(o->data);
        o->data = o->text.data;
        o->text.data = NULL;
        data_size = o->text.len;
        offsets_size = (size_t)(rows + 1) * sizeof(int32_t);
    } else if (o->kind != K_NULL) {
        data_size = (size_t)rows * 8;
    }
    PyObject *validity = o->null_count > 0 && o->validity
                             ? take_memory(&o->validity, (size_t)((rows + 7) / 8))
                             : (Py_INCREF(Py_None), Py_None);
    PyObject *data = take_memory(&o->data, data_size);
    uint8_t *off = (uint8_t *)o->offsets;
    o->offsets = NULL;
    PyObject *offsets = take_memory(&off, offsets_size);
    if (validity == NULL || data == NULL || offsets == NULL) {
        Py_XDECREF(validity);
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        return NULL;
    }
    Py_INCREF(name);
    return Py_BuildValue("(NiLNNN)", name, o->kind, (long long)o->null_count, validity, data,
                         offsets);
}

/* The header's names (a new tuple), a str saying why they are declined, or NULL on error. */
static PyObject *header_names(Csv *header) {
    PyObject *names = PyTuple_New(header->ncols);
    if (names == NULL) return NULL;
    for (int c = 0; c < header->ncols; c++) {
        OutColumn scratch = {0};
        const uint8_t *start = header->buf + header->starts[c];
        int valid = append_text(header, &scratch, start, start + header->lens[c],
                                header->flags[c] & F_DOUBLED);
        PyObject *name = NULL;
        if (valid) {
            name = PyUnicode_DecodeUTF8((const char *)scratch.text.data,
                                        (Py_ssize_t)scratch.text.len, "strict");
        }
        out_free(&scratch);
        if (name == NULL) {
            Py_DECREF(names);
            if (header->nomem) return PyErr_NoMemory();
            if (!valid) return PyUnicode_FromString("a column name that is not UTF-8");
            return NULL;
        }
        PyTuple_SET_ITEM(names, c, name);
    }
    PyObject *seen = PySet_New(names); /* Arrow takes duplicate names; leave them to it */
    if (seen == NULL) {
        Py_DECREF(names);
        return NULL;
    }
    Py_ssize_t distinct = PySet_GET_SIZE(seen);
    Py_DECREF(seen);
    if (distinct != header->ncols) {
        Py_DECREF(names);
        return PyUnicode_FromString("duplicate column names");
    }
    return names;
}

static PyObject *csv_parse(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *given_names, *kinds, *nulls, *trues, *falses;
    if (!PyArg_ParseTuple(args, "y*O!O!OOO", &view, &PyTuple_Type, &given_names, &PyTuple_Type,
                          &kinds, &nulls, &trues, &falses))
        return NULL;
    PyObject *result = NULL, *names = NULL, *columns = NULL;
    OutColumn *outs = NULL;
    Csv header = {0};
    Csv *cv = (Csv *)calloc(1, sizeof(Csv));
    if (cv == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    if (!load_words(nulls, &cv->nulls) || !load_words(trues, &cv->trues) ||
        !load_words(falses, &cv->falses))
        goto done;
    for (int w = 0; w < cv->nulls.count; w++) { /* null values come before numbers */
        const Word *word = &cv->nulls.words[w];
        double d;
        cv->number_nulls |= double_literal(word->text, (size_t)word->len, &d);
    }
    const uint8_t *buf = (const uint8_t *)view.buf, *end = buf + view.len;
    if (view.len > (Py_ssize_t)UINT32_MAX) {
        result = PyUnicode_FromString("a chunk larger than 4 GiB");
        goto done;
    }
    if (view.len >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF) {
        result = PyUnicode_FromString("a byte order mark");
        goto done;
    }
    int given[MAX_COLUMNS];
    const uint8_t *body = buf;
    if (PyTuple_GET_SIZE(given_names) == 0) { /* the first non-empty line names the columns */
        while (body < end && empty_line(&body, end)) {
        }
        header.buf = buf;
        header.ncols = MAX_COLUMNS;
        header.starts = (uint32_t *)malloc(MAX_COLUMNS * sizeof(uint32_t));
        header.lens = (uint32_t *)malloc(MAX_COLUMNS * sizeof(uint32_t));
        header.flags = (uint8_t *)malloc(MAX_COLUMNS);
        if (!header.starts || !header.lens || !header.flags) {
            PyErr_NoMemory();
            goto done;
        }
        int ncols = body < end ? split_line(&header, &body, end) : 0;
        if (ncols <= 0) {
            result = PyUnicode_FromString(header.decline ? header.decline : "no header line");
            goto done;
        }
        header.ncols = ncols;
        names = header_names(&header);
        if (names == NULL || PyUnicode_Check(names)) {
            result = names;
            names = NULL;
            goto done;
        }
        for (int c = 0; c < ncols; c++) given[c] = K_INFER;
    } else {
        names = given_names;
        Py_INCREF(names);
        if (PyTuple_GET_SIZE(kinds) != PyTuple_GET_SIZE(names) ||
            PyTuple_GET_SIZE(names) > MAX_COLUMNS) {
            PyErr_SetString(PyExc_ValueError, "names and kinds must have the same length");
            goto done;
        }
        for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(names); c++) {
            long k = PyLong_AsLong(PyTuple_GET_ITEM(kinds, c));
            if (k == -1 && PyErr_Occurred()) goto done;
            if (k != K_INFER && k != K_INT && k != K_DOUBLE && k != K_STRING) {
                PyErr_SetString(PyExc_ValueError, "unknown column kind");
                goto done;
            }
            given[c] = (int)k;
        }
    }
    int ncols = (int)PyTuple_GET_SIZE(names);
    if (ncols == 0) {
        result = PyUnicode_FromString("no columns");
        goto done;
    }
    int64_t lines = 1;
    for (const uint8_t *p = body; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++) lines++;
    cv->buf = buf;
    cv->ncols = ncols;
    cv->row_cap = lines;
    outs = (OutColumn *)calloc((size_t)ncols, sizeof(OutColumn));
    if (outs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS;
    ok = parse_chunk(cv, body, (Py_ssize_t)(end - body), given, outs);
    Py_END_ALLOW_THREADS;
    if (!ok) {
        if (cv->nomem) PyErr_NoMemory();
        else result = PyUnicode_FromString(cv->decline ? cv->decline : "declined");
        goto done;
    }
    columns = PyList_New(ncols);
    if (columns == NULL) goto done;
    for (int c = 0; c < ncols; c++) {
        PyObject *item = column_tuple(cv, &outs[c], PyTuple_GET_ITEM(names, c));
        if (item == NULL) goto done;
        PyList_SET_ITEM(columns, c, item);
    }
    result = Py_BuildValue("(LO)", (long long)cv->rows, columns);
done:
    Py_XDECREF(columns);
    Py_XDECREF(names);
    if (outs != NULL) {
        for (int c = 0; c < cv->ncols; c++) out_free(&outs[c]);
        free(outs);
    }
    free(header.starts);
    free(header.lens);
    free(header.flags);
    free(cv->starts);
    free(cv->lens);
    free(cv->flags);
    free(cv);
    PyBuffer_Release(&view);
    return result;
}

/* row_end(buffer, stop, first_from, delimiter, quote, double_quote, escape): see
   _csv_rows.h; first_from < 0 asks for the last row end before stop. */
static PyObject *csv_py_row_end(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t stop, from;
    CsvDialect dialect;
    if (!PyArg_ParseTuple(args, "y*nniipi", &view, &stop, &from, &dialect.delimiter,
                          &dialect.quote, &dialect.double_quote, &dialect.escape))
        return NULL;
    if (stop < 0 || stop > view.len || dialect.delimiter < 0 || dialect.delimiter > 255 ||
        dialect.quote < -1 || dialect.quote > 255 || dialect.escape < -1 ||
        dialect.escape > 255) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "row_end: stop or a dialect byte out of range");
        return NULL;
    }
    int64_t end;
    Py_BEGIN_ALLOW_THREADS;
    end = csv_row_end((const uint8_t *)view.buf, stop, from < 0 ? ROWS_LAST : ROWS_FIRST, from,
                      &dialect);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    return PyLong_FromLongLong((long long)end);
}

static PyMethodDef methods[] = {
    {"row_end", csv_py_row_end, METH_VARARGS,
     "row_end(buffer, stop, first_from, delimiter, quote, double_quote, escape) -> index "
     "of the last byte of the last row ending before stop (first_from < 0), or of the first "
     "row ending at or after first_from; -1 when there is none."},
    {"parse", csv_parse, METH_VARARGS,
     "parse(buffer, names, kinds, null_values, true_values, false_values) -> (rows, columns) "
     "or a reason (str)."},
    {"set_powers", parser_set_powers, METH_O,
     "Give the parser its table of 128-bit powers of ten (see native_text.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_csv", "CSV to Arrow buffers.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__csv(void) {
    init_numbers();
    init_tables();
    if (PyType_Ready(&MemType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyModule_AddIntConstant(m, "INFER", K_INFER);
    PyModule_AddIntConstant(m, "NULL", K_NULL);
    PyModule_AddIntConstant(m, "INT64", K_INT);
    PyModule_AddIntConstant(m, "DOUBLE", K_DOUBLE);
    PyModule_AddIntConstant(m, "STRING", K_STRING);
    return m;
}
