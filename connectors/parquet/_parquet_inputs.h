/*
 * Inputs of connectors/parquet/_parquet_encode.c: Arrow buffers taken from Python objects and checked
 * (sizes, offsets in order, validity long enough), arrays given in parts, word loads and the
 * hash of byte strings.
 */
#ifndef SHARDFLOW_PARQUET_INPUTS_H
#define SHARDFLOW_PARQUET_INPUTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Input;

static void release(Input *input) {
    if (input->held) PyBuffer_Release(&input->view);
    input->held = 0;
}

/* Fills ``input`` from ``object`` (None gives an empty, unheld input). */
static int take(PyObject *object, Input *input) {
    input->held = 0;
    if (object == Py_None) return 0;
    if (PyObject_GetBuffer(object, &input->view, PyBUF_SIMPLE) < 0) return -1;
    input->held = 1;
    return 0;
}

static int check_size(const Input *input, Py_ssize_t need, const char *what) {
    if (input->view.len < need) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes; %zd are needed", what,
                     input->view.len, need);
        return -1;
    }
    return 0;
}

static int check_span(Py_ssize_t offset, Py_ssize_t length) {
    if (offset < 0 || length < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets and lengths must not be negative");
        return -1;
    }
    return 0;
}

static inline int is_valid(const uint8_t *bitmap, Py_ssize_t bit) {
    return bitmap == NULL || ((bitmap[bit >> 3] >> (bit & 7)) & 1);
}

/* Value offsets of 4 or 8 bytes, read as int64. */
static inline int64_t offset_at(const uint8_t *offsets, int width, Py_ssize_t i) {
    if (width == 4) {
        int32_t value;
        memcpy(&value, offsets + i * 4, 4);
        return value;
    }
    int64_t value;
    memcpy(&value, offsets + i * 8, 8);
    return value;
}

/* Checks the offsets of values [offset, offset + length] lie in order inside the data. */
static int check_offsets(const Input *offsets, int width, const Input *data, Py_ssize_t offset,
                         Py_ssize_t length) {
    if (width != 4 && width != 8) {
        PyErr_SetString(PyExc_ValueError, "offset_width must be 4 or 8");
        return -1;
    }
    if (check_size(offsets, (offset + length + 1) * width, "offsets") < 0) return -1;
    const uint8_t *raw = offsets->view.buf;
    int64_t previous = offset_at(raw, width, offset);
    if (previous < 0) goto bad;
    for (Py_ssize_t i = 1; i <= length; i++) {
        int64_t next = offset_at(raw, width, offset + i);
        if (next < previous) goto bad;
        previous = next;
    }
    if (previous > data->view.len) goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "value offsets are out of order or outside the data");
    return -1;
}

static int check_validity(const Input *validity, Py_ssize_t offset, Py_ssize_t length) {
    if (!validity->held) return 0;
    return check_size(validity, (offset + length + 7) / 8, "validity");
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t value;
    memcpy(&value, p, 8);
    return value;
}

static inline uint64_t load32(const uint8_t *p) {
    uint32_t value;
    memcpy(&value, p, 4);
    return value;
}

/* The 128-bit product of a and b, its halves xor-ed: one multiply mixes 128 bits in. */
static inline uint64_t fold_multiply(uint64_t a, uint64_t b) {
    __uint128_t product = (__uint128_t)a * b;
    return (uint64_t)product ^ (uint64_t)(product >> 64);
}

#define K1 0x9e3779b97f4a7c15ULL
#define K2 0xd6e8feb86659fd93ULL
#define K3 0xa0761d6478bd642fULL

/* A hash of n bytes. Values of up to 16 bytes are read as two (overlapping) words, longer
 * ones 16 bytes a step; every byte counts. */
static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t seed = K3 ^ (uint64_t)n;
    uint64_t a, b;
    if (n <= 16) {
        if (n >= 8) {
            a = load64(p);
            b = load64(p + n - 8);
        } else if (n >= 4) {
            a = load32(p);
            b = load32(p + n - 4);
        } else if (n > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t left = n;
        while (left > 16) {
            seed = fold_multiply(load64(p) ^ K1, load64(p + 8) ^ seed);
            p += 16;
            left -= 16;
        }
        a = load64(p + left - 16);
        b = load64(p + left - 8);
    }
    return fold_multiply(fold_multiply(a ^ K1, b ^ seed) ^ K2, (uint64_t)n ^ K1);
}

/* ---------------------------------------------------------------- arrays given in parts */

/* One Arrow array (or slice): fixed-width values, or byte strings with their offsets. */
typedef struct {
    Input offsets, data, validity;
    int offset_width; /* 4 or 8 for byte strings, 0 for fixed-width values */
    Py_ssize_t offset, length;
} Part;

static void release_part(Part *part) {
    release(&part->offsets);
    release(&part->data);
    release(&part->validity);
}

/* Parses (data, offset, length, validity) when width > 0, else
 * (offsets, data, offset_width, offset, length, validity), and checks the buffers. */
static int parse_part(PyObject *tuple, int width, Part *part) {
    PyObject *offsets_object = Py_None, *data_object, *validity_object;
    part->offsets.held = part->data.held = part->validity.held = 0;
    part->offset_width = 0;
    if (!PyTuple_Check(tuple)) {
        PyErr_SetString(PyExc_TypeError, "each part must be a tuple");
        return -1;
    }
    int parsed = width > 0
        ? PyArg_ParseTuple(tuple, "OnnO", &data_object, &part->offset, &part->length,
                           &validity_object)
        : PyArg_ParseTuple(tuple, "OOinnO", &offsets_object, &data_object, &part->offset_width,
                           &part->offset, &part->length, &validity_object);
    if (!parsed || check_span(part->offset, part->length) < 0) return -1;
    if (take(offsets_object, &part->offsets) < 0 || take(data_object, &part->data) < 0 ||
        take(validity_object, &part->validity) < 0)
        goto fail;
    if (check_validity(&part->validity, part->offset, part->length) < 0) goto fail;
    if (width > 0) {
        if (check_size(&part->data, (part->offset + part->length) * width, "data") < 0) goto fail;
    } else if (check_offsets(&part->offsets, part->offset_width, &part->data, part->offset,
                             part->length) < 0) {
        goto fail;
    }
    return 0;
fail:
    release_part(part);
    return -1;
}

typedef struct {
    Part *items;
    Py_ssize_t count, rows;
} Parts;

static void release_parts(Parts *parts) {
    for (Py_ssize_t i = 0; i < parts->count; i++) release_part(&parts->items[i]);
    PyMem_Free(parts->items);
    parts->items = NULL;
    parts->count = 0;
}

static int parse_parts(PyObject *sequence, int width, Parts *parts) {
    parts->items = NULL;
    parts->count = parts->rows = 0;
    PyObject *list = PySequence_Fast(sequence, "parts must be a sequence of tuples");
    if (list == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    parts->items = PyMem_Calloc(n ? n : 1, sizeof(Part));
    if (parts->items == NULL) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_part(PySequence_Fast_GET_ITEM(list, i), width, &parts->items[i]) < 0) {
            Py_DECREF(list);
            release_parts(parts);
            return -1;
        }
        parts->count = i + 1;
        parts->rows += parts->items[i].length;
    }
    Py_DECREF(list);
    return 0;
}

static inline const uint8_t *bitmap_of(const Part *part) {
    return part->validity.held ? part->validity.view.buf : NULL;
}

#endif
