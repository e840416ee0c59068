/*
 * shardflow.connectors.json._jsonl: a JSON Lines parser for flat objects, producing Arrow buffers.
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

#include "_parse_numbers.h"
#include "_parse_python.h"
#include "_parse_text.h"
#include "_jsonl_strings.h"

enum { K_NULL = 0, K_BOOL = 1, K_INT = 2, K_DOUBLE = 3, K_STRING = 4 };

#define MAX_COLUMNS 1024

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
    uint8_t *data;     /* 8 bytes per row, or bits for bool */
    int32_t *offsets;  /* strings: offsets into text */
    ByteSink text;     /* strings */
} Column;

typedef struct {
    Column cols[MAX_COLUMNS];
    int ncols;
    int64_t row_cap; /* rows the fixed-width buffers hold */
    int64_t rows;
    int expect; /* column index the next key most likely names */
    const char *decline;
    int nomem;
    ByteSink key; /* scratch: a key with escapes, decoded */
} Parser;

static int col_alloc(Parser *ps, Column *c, int kind) {
    int64_t cap = ps->row_cap;
    c->kind = kind;
    if (kind == K_STRING) {
        c->offsets = (int32_t *)malloc((size_t)(cap + 1) * sizeof(int32_t));
        if (c->offsets == NULL || !sink_reserve(&c->text, 1024, &ps->nomem)) goto nomem;
        for (int64_t i = 0; i <= c->length; i++) c->offsets[i] = 0;
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
            if (c->kind == K_STRING) c->offsets[i + 1] = (int32_t)c->text.len;
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
    free(c->text.data);
    c->validity = NULL;
    c->data = NULL;
    c->offsets = NULL;
    c->text.data = NULL;
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
    ByteSink *k = &ps->key;
    k->len = 0;
    const uint8_t *q = start;
    int escaped;
    if (!parse_string(&q, end, k, &escaped, &ps->nomem)) return NULL;
    int before = ps->ncols;
    Column *c = find_column(ps, k->data, (Py_ssize_t)k->len);
    if (c != NULL && ps->ncols > before) { /* new: keep its own copy of the name */
        char *copy = (char *)malloc(k->len ? k->len : 1);
        if (copy == NULL) {
            ps->nomem = 1;
            return NULL;
        }
        memcpy(copy, k->data, k->len);
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
        size_t before = c->text.len;
        const uint8_t *q = p + 1;
        int escaped;
        if (!parse_string(&q, end, &c->text, &escaped, &ps->nomem)) {
            if (ps->nomem) return 0;
            DECLINE("a string Arrow may read differently");
        }
        if (!c->fixed && looks_like_date(c->text.data + before, c->text.len - before))
            DECLINE("a string Arrow may infer as a timestamp");
        c->offsets[row + 1] = (int32_t)c->text.len;
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
            if (!parse_string(&q, end, NULL, &escaped, &ps->nomem)) DECLINE("invalid key");
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

static PyObject *column_tuple(Parser *ps, Column *c) {
    int64_t rows = ps->rows;
    size_t data_size = 0, offsets_size = 0;
    if (c->allocated) {
        if (c->kind == K_STRING) {
            data_size = c->text.len;
            offsets_size = (size_t)(rows + 1) * sizeof(int32_t);
            if (c->text.len < c->text.cap) { /* give back what the doubling left over */
                uint8_t *fit = (uint8_t *)realloc(c->text.data, c->text.len ? c->text.len : 1);
                if (fit != NULL) c->text.data = fit;
            }
            free(c->data); /* strings keep their bytes in text */
            c->data = c->text.data;
            c->text.data = NULL;
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
    free(ps->key.data);
    free(ps);
    PyBuffer_Release(&view);
    return result;
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
    {"set_powers", parser_set_powers, METH_O,
     "Give the parser its table of 128-bit powers of ten (see native_text.py)."},
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
    init_numbers();
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
