/*
 * shardflow.connectors._jsonl: a JSON Lines parser for flat objects, producing Arrow buffers.
 *
 * parse(buffer, names, kinds, max_line_bytes) parses whole lines of JSON objects whose values
 * are null, true/false, numbers or strings into columns, with the types pyarrow.json.read_json
 * infers or is told (explicit int64, double, string, bool). It returns (rows, columns) or, for
 * anything it does not handle exactly as Arrow would (nested values, timestamps to infer,
 * conflicting types, invalid JSON or UTF-8, duplicate keys, escaped keys, integers outside
 * int64, numbers Arrow rejects), a str saying why it declined: the caller then parses the same
 * bytes with Arrow. Each column is (name, kind, null_count, validity, data, offsets), the
 * buffers being objects that expose memory through the buffer protocol (None when absent).
 *
 * Doubles are correctly rounded (the Eisel-Lemire algorithm over a table of 128-bit powers of
 * ten that set_powers() receives from Python, else strtod_l in the C locale), as Arrow's are.
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
#if defined(__GLIBC__) || defined(__APPLE__)
#include <locale.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif
#define HAVE_STRTOD_L 1
#endif

enum { K_NULL = 0, K_BOOL = 1, K_INT = 2, K_DOUBLE = 3, K_STRING = 4 };

#define MAX_COLUMNS 1024
#define MAX_SLOW_NUMBER 800
#define POW_MIN (-348)
#define POW_MAX 347
#define POW_COUNT (POW_MAX - POW_MIN + 1)

static uint64_t pow10_hi[POW_COUNT];
static uint64_t pow10_lo[POW_COUNT];
static int powers_ready = 0;
#ifdef HAVE_STRTOD_L
static locale_t c_locale = (locale_t)0;
#endif

/* ---------------------------------------------------------------------------------------- */
/* Owned memory exposed through the buffer protocol                                          */

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
} MemObject;

static void mem_dealloc(MemObject *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int mem_getbuffer(MemObject *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static PyBufferProcs mem_as_buffer = {(getbufferproc)mem_getbuffer, NULL};

static PyTypeObject MemType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shardflow.connectors._jsonl.Memory",
    .tp_basicsize = sizeof(MemObject),
    .tp_dealloc = (destructor)mem_dealloc,
    .tp_as_buffer = &mem_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory filled by the parser (read-only, through the buffer protocol).",
};

/* Takes ownership of data (freed here on failure). */
static PyObject *mem_new(char *data, Py_ssize_t size) {
    MemObject *obj = PyObject_New(MemObject, &MemType);
    if (obj == NULL) {
        free(data);
        return NULL;
    }
    obj->data = data;
    obj->size = size;
    return (PyObject *)obj;
}

/* ---------------------------------------------------------------------------------------- */
/* Columns                                                                                   */

typedef struct {
    const char *name; /* into the input, the names tuple, or owned (owns_name) */
    Py_ssize_t name_len;
    int owns_name;
    int kind;
    int fixed;     /* the kind comes from the explicit schema */
    int allocated; /* buffers exist (a non-null value was stored) */
    int64_t length;
    int64_t null_count;
    uint8_t *validity; /* NULL while there is no null among allocated values */
    uint8_t *data;     /* 8 bytes per row, bits for bool, bytes for strings */
    int32_t *offsets;  /* strings */
    size_t str_len, str_cap;
} Column;

typedef struct {
    Column cols[MAX_COLUMNS];
    int ncols;
    int64_t row_cap; /* rows the fixed-width buffers hold */
    int64_t rows;
    int expect; /* column index the next key most likely names */
    const char *decline;
    int nomem;
    Column key; /* scratch: a key with escapes, decoded */
} Parser;

static int col_alloc(Parser *ps, Column *c, int kind) {
    int64_t cap = ps->row_cap;
    c->kind = kind;
    if (kind == K_STRING) {
        c->offsets = (int32_t *)malloc((size_t)(cap + 1) * sizeof(int32_t));
        c->str_cap = 1024;
        c->data = (uint8_t *)malloc(c->str_cap);
        if (c->offsets == NULL || c->data == NULL) goto nomem;
        for (int64_t i = 0; i <= c->length; i++) c->offsets[i] = 0;
        c->str_len = 0;
    } else if (kind == K_BOOL) {
        c->data = (uint8_t *)calloc((size_t)((cap + 7) / 8 + 1), 1);
        if (c->data == NULL) goto nomem;
    } else {
        c->data = (uint8_t *)calloc((size_t)cap + 1, 8);
        if (c->data == NULL) goto nomem;
    }
    if (c->length > 0) { /* the rows before were null */
        size_t nbytes = (size_t)((cap + 7) / 8 + 1);
        c->validity = (uint8_t *)malloc(nbytes);
        if (c->validity == NULL) goto nomem;
        memset(c->validity, 0xFF, nbytes);
        for (int64_t i = 0; i < c->length; i++) c->validity[i >> 3] &= (uint8_t)~(1u << (i & 7));
    }
    c->allocated = 1;
    return 1;
nomem:
    ps->nomem = 1;
    return 0;
}

/* Appends nulls until the column holds `upto` values. */
static int col_fill_nulls(Parser *ps, Column *c, int64_t upto) {
    if (c->length >= upto) return 1;
    if (c->allocated) {
        if (c->validity == NULL) {
            size_t nbytes = (size_t)((ps->row_cap + 7) / 8 + 1);
            c->validity = (uint8_t *)malloc(nbytes);
            if (c->validity == NULL) {
                ps->nomem = 1;
                return 0;
            }
            memset(c->validity, 0xFF, nbytes);
        }
        for (int64_t i = c->length; i < upto; i++) {
            c->validity[i >> 3] &= (uint8_t)~(1u << (i & 7));
            if (c->kind == K_STRING) c->offsets[i + 1] = (int32_t)c->str_len;
        }
    }
    c->null_count += upto - c->length;
    c->length = upto;
    return 1;
}

static void col_free(Column *c) {
    if (c->owns_name) free((void *)c->name);
    c->owns_name = 0;
    free(c->validity);
    free(c->data);
    free(c->offsets);
    c->validity = NULL;
    c->data = NULL;
    c->offsets = NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Numbers                                                                                   */

static inline int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static inline uint64_t mul64(uint64_t a, uint64_t b, uint64_t *lo) {
    __uint128_t r = (__uint128_t)a * b;
    *lo = (uint64_t)r;
    return (uint64_t)(r >> 64);
}

static inline int clz64(uint64_t x) { return __builtin_clzll(x); }

/* Eisel-Lemire: man * 10^exp10 correctly rounded, or 0 when it cannot decide. */
static int eisel_lemire(uint64_t man, int64_t exp10, int neg, double *out) {
    if (exp10 < POW_MIN || exp10 > POW_MAX) return 0;
    int clz = clz64(man);
    man <<= clz;
    uint64_t ret_exp2 = (uint64_t)(((217706 * exp10) >> 16) + 64 + 1023) - (uint64_t)clz;
    int idx = (int)(exp10 - POW_MIN);
    uint64_t x_lo, x_hi = mul64(man, pow10_hi[idx], &x_lo);
    if ((x_hi & 0x1FF) == 0x1FF && x_lo + man < man) {
        uint64_t y_lo, y_hi = mul64(man, pow10_lo[idx], &y_lo);
        uint64_t merged_hi = x_hi, merged_lo = x_lo + y_hi;
        if (merged_lo < x_lo) merged_hi++;
        if ((merged_hi & 0x1FF) == 0x1FF && merged_lo + 1 == 0 && y_lo + man < man) return 0;
        x_hi = merged_hi;
        x_lo = merged_lo;
    }
    uint64_t msb = x_hi >> 63;
    uint64_t mant = x_hi >> (msb + 9);
    ret_exp2 -= 1 ^ msb;
    if (x_lo == 0 && (x_hi & 0x1FF) == 0 && (mant & 3) == 1) return 0;
    mant += mant & 1;
    mant >>= 1;
    if (mant >> 53) {
        mant >>= 1;
        ret_exp2 += 1;
    }
    if (ret_exp2 - 1 >= 0x7FF - 1) return 0;
    uint64_t bits = (ret_exp2 << 52) | (mant & 0x000FFFFFFFFFFFFFULL);
    if (neg) bits |= 0x8000000000000000ULL;
    memcpy(out, &bits, sizeof(bits));
    return 1;
}

static int slow_double(const char *start, const char *stop, double *out) {
#ifdef HAVE_STRTOD_L
    char text[MAX_SLOW_NUMBER + 1];
    size_t n = (size_t)(stop - start);
    if (n > MAX_SLOW_NUMBER || c_locale == (locale_t)0) return 0;
    memcpy(text, start, n);
    text[n] = '\0';
    char *end = NULL;
    double v = strtod_l(text, &end, c_locale);
    if (end != text + n) return 0;
    if (v == HUGE_VAL || v == -HUGE_VAL) return 0; /* Arrow: "Number too big" */
    *out = v;
    return 1;
#else
    (void)start;
    (void)stop;
    (void)out;
    return 0;
#endif
}

/*
 * Parses a JSON number at *pp. Returns 1 with *iv for an integer literal (no fraction or
 * exponent) that fits in int64, unless want_double; 2 with *dv for a double; 0 to decline.
 */
static int parse_number(const char **pp, const char *end, int want_double, int64_t *iv,
                        double *dv) {
    const char *start = *pp, *p = start;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        if (++p >= end) return 0;
    }
    if (!is_digit(*p)) return 0;
    uint64_t man = 0;
    int sig = 0;         /* significant digits in man */
    int truncated = 0;   /* digits beyond 19 were dropped */
    int64_t exp10 = 0;
    int int_digits = 0;
    if (*p == '0') {
        p++;
        int_digits = 1;
        if (p < end && is_digit(*p)) return 0; /* leading zero */
    } else {
        while (p < end && is_digit(*p)) {
            if (sig < 19) {
                man = man * 10 + (uint64_t)(*p - '0');
                sig++;
            } else {
                exp10++;
                truncated = 1;
            }
            int_digits++;
            p++;
        }
    }
    int integral = 1;
    if (p < end && *p == '.') {
        integral = 0;
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        while (p < end && is_digit(*p)) {
            if (sig == 0 && *p == '0') {
                exp10--;
            } else if (sig < 19) {
                man = man * 10 + (uint64_t)(*p - '0');
                sig++;
                exp10--;
            } else if (*p != '0') {
                truncated = 1;
            }
            p++;
        }
    }
    int64_t e_part = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        int e_neg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            e_neg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p)) return 0;
        while (p < end && is_digit(*p)) {
            if (e_part < 100000) e_part = e_part * 10 + (*p - '0');
            p++;
        }
        if (e_neg) e_part = -e_part;
        if (e_part > 308) return 0; /* Arrow rejects some of these ("0e309") */
        exp10 += e_part;
    }
    *pp = p;
    if (integral && !want_double) {
        if (int_digits > 19 || truncated) return 0; /* Arrow makes it a double: let it */
        if (neg) {
            if (man == 0) return 0; /* "-0": -0.0 if the column becomes double */
            if (man > (uint64_t)INT64_MAX + 1) return 0;
            *iv = (int64_t)(0 - man);
        } else {
            if (man > (uint64_t)INT64_MAX) return 0;
            *iv = (int64_t)man;
        }
        return 1;
    }
    if (man == 0) {
        *dv = neg ? -0.0 : 0.0;
        return 2;
    }
    if (!truncated && powers_ready && eisel_lemire(man, exp10, neg, dv)) return 2;
    return slow_double(start, p, dv) ? 2 : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Strings                                                                                   */

/* 0: copy, 1: quote, 2: backslash, 3: control character, 4: not ASCII */
static uint8_t str_class[256];

static void init_classes(void) {
    for (int i = 0; i < 256; i++) {
        str_class[i] = i < 0x20 ? 3 : (i >= 0x80 ? 4 : 0);
    }
    str_class['"'] = 1;
    str_class['\\'] = 2;
}

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

static int str_reserve(Parser *ps, Column *c, size_t more) {
    if (c->str_len + more <= c->str_cap) return 1;
    size_t cap = c->str_cap * 2;
    while (cap < c->str_len + more) cap *= 2;
    if (cap > (size_t)INT32_MAX) return 0;
    uint8_t *grown = (uint8_t *)realloc(c->data, cap);
    if (grown == NULL) {
        ps->nomem = 1;
        return 0;
    }
    c->data = grown;
    c->str_cap = cap;
    return 1;
}

/*
 * Parses the string that starts at *pp (just after its opening quote) into c's data when c
 * is not NULL, else only validates it; *pp ends after the closing quote. *escaped says
 * whether the string held an escape (keys with escapes are declined). Returns 0 to decline.
 */
static int parse_string(Parser *ps, const uint8_t **pp, const uint8_t *end, Column *c,
                        int *escaped) {
    const uint8_t *p = *pp;
    *escaped = 0;
    for (;;) {
        const uint8_t *run = p;
        while (p < end && str_class[*p] == 0) p++;
        if (c != NULL && p > run) {
            if (!str_reserve(ps, c, (size_t)(p - run))) return 0;
            memcpy(c->data + c->str_len, run, (size_t)(p - run));
            c->str_len += (size_t)(p - run);
        }
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
            if (c != NULL) {
                if (!str_reserve(ps, c, (size_t)n)) return 0;
                memcpy(c->data + c->str_len, p, (size_t)n);
                c->str_len += (size_t)n;
            }
            p += n;
            continue;
        }
        /* a backslash */
        *escaped = 1;
        if (end - p < 2) return 0;
        uint8_t out[4];
        int nout = 1;
        switch (p[1]) {
            case '"': out[0] = '"'; break;
            case '\\': out[0] = '\\'; break;
            case '/': out[0] = '/'; break;
            case 'b': out[0] = '\b'; break;
            case 'f': out[0] = '\f'; break;
            case 'n': out[0] = '\n'; break;
            case 'r': out[0] = '\r'; break;
            case 't': out[0] = '\t'; break;
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
                    out[0] = (uint8_t)cp;
                } else if (cp < 0x800) {
                    out[0] = (uint8_t)(0xC0 | (cp >> 6));
                    out[1] = (uint8_t)(0x80 | (cp & 0x3F));
                    nout = 2;
                } else if (cp < 0x10000) {
                    out[0] = (uint8_t)(0xE0 | (cp >> 12));
                    out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    out[2] = (uint8_t)(0x80 | (cp & 0x3F));
                    nout = 3;
                } else {
                    out[0] = (uint8_t)(0xF0 | (cp >> 18));
                    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
                    nout = 4;
                }
                break;
            }
            default:
                return 0;
        }
        if (c != NULL) {
            if (!str_reserve(ps, c, (size_t)nout)) return 0;
            memcpy(c->data + c->str_len, out, (size_t)nout);
            c->str_len += (size_t)nout;
        }
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

/* ---------------------------------------------------------------------------------------- */
/* Objects                                                                                   */

static inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    return p;
}

static Column *find_column(Parser *ps, const uint8_t *name, Py_ssize_t len) {
    int e = ps->expect;
    if (e < ps->ncols) {
        Column *c = &ps->cols[e];
        if (c->name_len == len && memcmp(c->name, name, (size_t)len) == 0) {
            ps->expect = e + 1;
            return c;
        }
    }
    for (int i = 0; i < ps->ncols; i++) {
        Column *c = &ps->cols[i];
        if (c->name_len == len && memcmp(c->name, name, (size_t)len) == 0) {
            ps->expect = i + 1;
            return c;
        }
    }
    if (ps->ncols >= MAX_COLUMNS) return NULL;
    Column *c = &ps->cols[ps->ncols++];
    memset(c, 0, sizeof(*c));
    c->name = (const char *)name;
    c->name_len = len;
    c->kind = K_NULL;
    ps->expect = ps->ncols;
    return c;
}

/* The column a key with escapes names: the key decoded, the name kept if it is new. */
static Column *find_escaped(Parser *ps, const uint8_t *start, const uint8_t *end) {
    Column *k = &ps->key;
    k->str_len = 0;
    if (k->data == NULL) {
        k->str_cap = 256;
        k->data = (uint8_t *)malloc(k->str_cap);
        if (k->data == NULL) {
            ps->nomem = 1;
            return NULL;
        }
    }
    const uint8_t *q = start;
    int escaped;
    if (!parse_string(ps, &q, end, k, &escaped)) return NULL;
    int before = ps->ncols;
    Column *c = find_column(ps, k->data, (Py_ssize_t)k->str_len);
    if (c != NULL && ps->ncols > before) { /* new: keep its own copy of the name */
        char *copy = (char *)malloc(k->str_len ? k->str_len : 1);
        if (copy == NULL) {
            ps->nomem = 1;
            return NULL;
        }
        memcpy(copy, k->data, k->str_len);
        c->name = copy;
        c->owns_name = 1;
    }
    return c;
}

#define DECLINE(reason)          \
    do {                         \
        ps->decline = (reason);  \
        return 0;                \
    } while (0)

static int store_value(Parser *ps, Column *c, const uint8_t **pp, const uint8_t *end) {
    const uint8_t *p = *pp;
    int64_t row = ps->rows;
    if (c->length > row) DECLINE("a key appears twice in one object");
    uint8_t ch = *p;
    if (ch == 'n') {
        if (end - p < 4 || memcmp(p, "null", 4) != 0) DECLINE("invalid literal");
        *pp = p + 4;
        return col_fill_nulls(ps, c, row + 1);
    }
    if (ch == 't' || ch == 'f') {
        int truth = ch == 't';
        size_t n = truth ? 4 : 5;
        if ((size_t)(end - p) < n || memcmp(p, truth ? "true" : "false", n) != 0)
            DECLINE("invalid literal");
        if (c->kind == K_NULL && !c->fixed) c->kind = K_BOOL;
        if (c->kind != K_BOOL) DECLINE("a boolean in a column of another type");
        if (!c->allocated && !col_alloc(ps, c, K_BOOL)) return 0;
        if (!col_fill_nulls(ps, c, row)) return 0;
        if (truth) c->data[row >> 3] |= (uint8_t)(1u << (row & 7));
        c->length = row + 1;
        *pp = p + n;
        return 1;
    }
    if (ch == '-' || is_digit((char)ch)) {
        if (c->kind == K_BOOL || c->kind == K_STRING) DECLINE("a number in a column of another type");
        int64_t iv = 0;
        double dv = 0;
        const char *q = (const char *)p;
        int got = parse_number(&q, (const char *)end, c->kind == K_DOUBLE, &iv, &dv);
        if (got == 0) DECLINE("a number Arrow may read differently");
        if (got == 2 && c->kind == K_INT) {
            if (c->fixed) DECLINE("a fraction in an int64 column");
            for (int64_t i = 0; i < c->length; i++) { /* promote: Arrow reads them as doubles */
                int64_t v;
                memcpy(&v, c->data + 8 * i, 8);
                double d = (double)v;
                memcpy(c->data + 8 * i, &d, 8);
            }
            c->kind = K_DOUBLE;
        }
        if (c->kind == K_NULL) c->kind = got == 1 ? K_INT : K_DOUBLE;
        if (!c->allocated && !col_alloc(ps, c, c->kind)) return 0;
        if (!col_fill_nulls(ps, c, row)) return 0;
        if (c->kind == K_INT) memcpy(c->data + 8 * row, &iv, 8);
        else {
            if (got == 1) dv = (double)iv;
            memcpy(c->data + 8 * row, &dv, 8);
        }
        c->length = row + 1;
        *pp = (const uint8_t *)q;
        return 1;
    }
    if (ch == '"') {
        if (c->kind == K_NULL && !c->fixed) c->kind = K_STRING;
        if (c->kind != K_STRING) DECLINE("a string in a column of another type");
        if (!c->allocated && !col_alloc(ps, c, K_STRING)) return 0;
        if (!col_fill_nulls(ps, c, row)) return 0;
        size_t before = c->str_len;
        const uint8_t *q = p + 1;
        int escaped;
        if (!parse_string(ps, &q, end, c, &escaped)) {
            if (ps->nomem) return 0;
            DECLINE("a string Arrow may read differently");
        }
        if (!c->fixed && looks_like_date(c->data + before, c->str_len - before))
            DECLINE("a string Arrow may infer as a timestamp");
        c->offsets[row + 1] = (int32_t)c->str_len;
        c->length = row + 1;
        *pp = q;
        return 1;
    }
    DECLINE("a nested or invalid value");
}

static int parse_line(Parser *ps, const uint8_t *p, const uint8_t *end) {
    p = skip_ws(p, end);
    if (p >= end) return 1; /* a blank line: Arrow skips it */
    if (*p != '{') DECLINE("a line that is not an object");
    p = skip_ws(p + 1, end);
    ps->expect = 0;
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            if (p >= end || *p != '"') DECLINE("invalid object");
            const uint8_t *name = p + 1, *q = p + 1;
            int escaped;
            if (!parse_string(ps, &q, end, NULL, &escaped)) DECLINE("invalid key");
            Column *c = escaped ? find_escaped(ps, name, end)
                                : find_column(ps, name, (Py_ssize_t)(q - 1 - name));
            if (c == NULL) {
                if (ps->nomem) return 0;
                DECLINE("too many columns");
            }
            p = skip_ws(q, end);
            if (p >= end || *p != ':') DECLINE("invalid object");
            p = skip_ws(p + 1, end);
            if (p >= end) DECLINE("invalid object");
            if (!store_value(ps, c, &p, end)) return 0;
            p = skip_ws(p, end);
            if (p >= end) DECLINE("invalid object");
            if (*p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (*p == '}') {
                p++;
                break;
            }
            DECLINE("invalid object");
        }
    }
    p = skip_ws(p, end);
    if (p != end) DECLINE("more than one object on a line");
    ps->rows++;
    return 1;
}

static int parse_all(Parser *ps, const uint8_t *buf, Py_ssize_t size, Py_ssize_t max_line) {
    const uint8_t *end = buf + size, *p = buf;
    while (p < end) {
        const uint8_t *nl = (const uint8_t *)memchr(p, '\n', (size_t)(end - p));
        const uint8_t *line_end = nl ? nl : end;
        if (line_end - p > max_line) DECLINE("a line longer than a block");
        if (!parse_line(ps, p, line_end)) return 0;
        p = nl ? nl + 1 : end;
    }
    if (ps->rows == 0) DECLINE("no object (Arrow: an empty file)");
    if (ps->ncols == 0) DECLINE("objects without fields (rows of no column)");
    for (int i = 0; i < ps->ncols; i++) {
        if (!col_fill_nulls(ps, &ps->cols[i], ps->rows)) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Python API                                                                                */

static PyObject *take_memory(uint8_t **data, size_t size) {
    if (*data == NULL) Py_RETURN_NONE;
    char *owned = (char *)*data;
    *data = NULL;
    return mem_new(owned, (Py_ssize_t)size);
}

static PyObject *column_tuple(Parser *ps, Column *c) {
    int64_t rows = ps->rows;
    size_t data_size = 0, offsets_size = 0;
    if (c->allocated) {
        if (c->kind == K_STRING) {
            data_size = c->str_len;
            offsets_size = (size_t)(rows + 1) * sizeof(int32_t);
            if (c->str_len < c->str_cap) { /* give back what the doubling left over */
                uint8_t *fit = (uint8_t *)realloc(c->data, c->str_len ? c->str_len : 1);
                if (fit != NULL) c->data = fit;
            }
        } else if (c->kind == K_BOOL) {
            data_size = (size_t)((rows + 7) / 8);
        } else {
            data_size = (size_t)rows * 8;
        }
    }
    PyObject *name = PyUnicode_DecodeUTF8(c->name, c->name_len, "strict");
    if (name == NULL) return NULL;
    PyObject *validity = NULL, *data = NULL, *offsets = NULL;
    if (c->null_count > 0 && c->validity != NULL) {
        validity = take_memory(&c->validity, (size_t)((rows + 7) / 8));
    } else {
        validity = Py_None;
        Py_INCREF(Py_None);
    }
    data = take_memory(&c->data, data_size);
    uint8_t *off = (uint8_t *)c->offsets;
    c->offsets = NULL;
    offsets = take_memory(&off, offsets_size);
    if (validity == NULL || data == NULL || offsets == NULL) {
        Py_XDECREF(name);
        Py_XDECREF(validity);
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        return NULL;
    }
    int kind = (c->allocated || c->fixed) ? c->kind : K_NULL;
    int64_t nulls = c->allocated ? c->null_count : rows;
    return Py_BuildValue("(NiLNNN)", name, kind, (long long)nulls, validity, data, offsets);
}

static PyObject *jsonl_parse(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *names, *kinds;
    Py_ssize_t max_line;
    if (!PyArg_ParseTuple(args, "y*O!O!n", &view, &PyTuple_Type, &names, &PyTuple_Type, &kinds,
                          &max_line))
        return NULL;
    PyObject *result = NULL;
    Parser *ps = (Parser *)calloc(1, sizeof(Parser));
    if (ps == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Py_ssize_t nfixed = PyTuple_GET_SIZE(names);
    if (nfixed != PyTuple_GET_SIZE(kinds) || nfixed > MAX_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "names and kinds must be tuples of the same length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nfixed; i++) {
        Column *c = &ps->cols[ps->ncols++];
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &len);
        if (utf8 == NULL) goto done;
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
        if (kind == -1 && PyErr_Occurred()) goto done;
        if (kind < K_BOOL || kind > K_STRING) {
            PyErr_SetString(PyExc_ValueError, "unknown column kind");
            goto done;
        }
        c->name = utf8; /* the names tuple outlives the parse */
        c->name_len = len;
        c->kind = (int)kind;
        c->fixed = 1;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t size = view.len;
    int ok;
    Py_BEGIN_ALLOW_THREADS;
    int64_t lines = 1;
    const uint8_t *p = buf, *end = buf + size;
    while (p < end) {
        const uint8_t *nl = (const uint8_t *)memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) break;
        lines++;
        p = nl + 1;
    }
    ps->row_cap = lines;
    ok = parse_all(ps, buf, size, max_line);
    Py_END_ALLOW_THREADS;
    if (!ok) {
        if (ps->nomem) {
            PyErr_NoMemory();
        } else {
            result = PyUnicode_FromString(ps->decline ? ps->decline : "declined");
        }
        goto done;
    }
    PyObject *columns = PyList_New(ps->ncols);
    if (columns == NULL) goto done;
    for (int i = 0; i < ps->ncols; i++) {
        PyObject *item = column_tuple(ps, &ps->cols[i]);
        if (item == NULL) {
            Py_DECREF(columns);
            goto done;
        }
        PyList_SET_ITEM(columns, i, item);
    }
    result = Py_BuildValue("(LN)", (long long)ps->rows, columns);
done:
    for (int i = 0; i < ps->ncols; i++) col_free(&ps->cols[i]);
    col_free(&ps->key);
    free(ps);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *jsonl_set_powers(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len != (Py_ssize_t)(POW_COUNT * 16)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "the table must hold 696 pairs of 64-bit words");
        return NULL;
    }
    const uint8_t *b = (const uint8_t *)view.buf;
    for (int i = 0; i < POW_COUNT; i++) {
        uint64_t lo = 0, hi = 0;
        for (int k = 7; k >= 0; k--) {
            lo = (lo << 8) | b[16 * i + k];
            hi = (hi << 8) | b[16 * i + 8 + k];
        }
        pow10_lo[i] = lo;
        pow10_hi[i] = hi;
    }
    powers_ready = 1;
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *jsonl_parse_double(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(arg, &len);
    if (text == NULL) return NULL;
    const char *p = text;
    int64_t iv;
    double dv;
    if (len == 0 || parse_number(&p, text + len, 1, &iv, &dv) != 2 || p != text + len)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(dv);
}

static PyMethodDef methods[] = {
    {"parse", jsonl_parse, METH_VARARGS,
     "parse(buffer, names, kinds, max_line_bytes) -> (rows, columns) or a reason (str)."},
    {"set_powers", jsonl_set_powers, METH_O,
     "Give the parser its table of 128-bit powers of ten (see json_lines_native.py)."},
    {"parse_double", jsonl_parse_double, METH_O,
     "The double a JSON number literal stands for, or None (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_jsonl", "JSON Lines to Arrow buffers.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jsonl(void) {
    init_classes();
#ifdef HAVE_STRTOD_L
    if (c_locale == (locale_t)0) c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
#endif
    if (PyType_Ready(&MemType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyModule_AddIntConstant(m, "NULL", K_NULL);
    PyModule_AddIntConstant(m, "BOOL", K_BOOL);
    PyModule_AddIntConstant(m, "INT64", K_INT);
    PyModule_AddIntConstant(m, "DOUBLE", K_DOUBLE);
    PyModule_AddIntConstant(m, "STRING", K_STRING);
    return m;
}
