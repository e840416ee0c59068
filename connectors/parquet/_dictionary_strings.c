/*
 * Dictionary-encoded strings to plain Arrow strings (see connectors/parquet/dictionary_strings.py).
 *
 * Reading a dictionary-encoded Parquet string column as an Arrow dictionary and expanding it
 * here costs about a third of what Arrow's dense read (and its dictionary cast) costs: the
 * work is one pass computing offsets and one pass copying bytes, in 16-byte steps where the
 * buffers allow. The caller allocates the output buffers (from Arrow's memory pool) and
 * this module fills them:
 *
 *   total = offsets(indices, indices_offset, length, validity, validity_offset,
 *                   dict_offsets, dict_offset, dict_length, dict_data, out_offsets)
 *   gather(indices, indices_offset, length, dict_offsets, dict_offset, dict_length,
 *          dict_data, out_offsets, out_data)
 *
 * Indices are int32; offsets are int32 (string and binary). offsets() returns -1, having
 * written nothing the caller may use, when an index is out of range, a dictionary offset is
 * out of order or outside its data, or the result would not fit int32 offsets; the caller
 * then expands the array with Arrow. gather() copies only the values offsets() accepted.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Copies of up to this many bytes past a value's end are allowed (the caller allocates the
 * output this much longer than the values it holds). */
#define STEP 16

static int valid_at(const uint8_t *bitmap, Py_ssize_t bit) {
    return (bitmap[bit >> 3] >> (bit & 7)) & 1;
}

static int check_size(Py_buffer *view, Py_ssize_t need, const char *what) {
    if (view->len < need) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes; %zd are needed", what, view->len,
                     need);
        return -1;
    }
    return 0;
}

static PyObject *dictionary_offsets(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer indices, dict_offsets, dict_data, out_offsets, validity = {0};
    PyObject *validity_object;
    Py_ssize_t indices_offset, length, validity_offset, dict_offset, dict_length;
    if (!PyArg_ParseTuple(args, "y*nnOny*nny*w*", &indices, &indices_offset, &length,
                          &validity_object, &validity_offset, &dict_offsets, &dict_offset,
                          &dict_length, &dict_data, &out_offsets))
        return NULL;
    int has_validity = validity_object != Py_None;
    PyObject *result = NULL;
    if (has_validity && PyObject_GetBuffer(validity_object, &validity, PyBUF_SIMPLE) < 0) {
        has_validity = 0;
        goto done;
    }
    if (indices_offset < 0 || length < 0 || validity_offset < 0 || dict_offset < 0 ||
        dict_length < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets and lengths must not be negative");
        goto done;
    }
    if (check_size(&indices, (indices_offset + length) * 4, "indices") < 0 ||
        check_size(&dict_offsets, (dict_offset + dict_length + 1) * 4, "dictionary offsets") < 0 ||
        check_size(&out_offsets, (length + 1) * 4, "output offsets") < 0 ||
        (has_validity && check_size(&validity, (validity_offset + length + 7) / 8, "validity") < 0))
        goto done;

    const int32_t *index = (const int32_t *)indices.buf + indices_offset;
    const int32_t *starts = (const int32_t *)dict_offsets.buf + dict_offset;
    const uint8_t *bitmap = has_validity ? (const uint8_t *)validity.buf : NULL;
    const int64_t data_size = dict_data.len;
    int32_t *out = (int32_t *)out_offsets.buf;
    int64_t total = 0;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    out[0] = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        if (bitmap != NULL && !valid_at(bitmap, validity_offset + i)) {
            out[i + 1] = (int32_t)total;
            continue;
        }
        int32_t k = index[i];
        if (k < 0 || k >= dict_length) {
            ok = 0;
            break;
        }
        int32_t start = starts[k], end = starts[k + 1];
        if (start < 0 || end < start || end > data_size) {
            ok = 0;
            break;
        }
        total += end - start;
        if (total > INT32_MAX - STEP) {
            ok = 0;
            break;
        }
        out[i + 1] = (int32_t)total;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(ok ? total : -1);
done:
    PyBuffer_Release(&indices);
    PyBuffer_Release(&dict_offsets);
    PyBuffer_Release(&dict_data);
    PyBuffer_Release(&out_offsets);
    if (has_validity) PyBuffer_Release(&validity);
    return result;
}

static PyObject *dictionary_gather(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer indices, dict_offsets, dict_data, out_offsets, out_data;
    Py_ssize_t indices_offset, length, dict_offset, dict_length;
    if (!PyArg_ParseTuple(args, "y*nny*nny*y*w*", &indices, &indices_offset, &length,
                          &dict_offsets, &dict_offset, &dict_length, &dict_data, &out_offsets,
                          &out_data))
        return NULL;
    PyObject *result = NULL;
    if (indices_offset < 0 || length < 0 || dict_offset < 0 || dict_length < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets and lengths must not be negative");
        goto done;
    }
    if (check_size(&indices, (indices_offset + length) * 4, "indices") < 0 ||
        check_size(&dict_offsets, (dict_offset + dict_length + 1) * 4, "dictionary offsets") < 0 ||
        check_size(&out_offsets, (length + 1) * 4, "output offsets") < 0)
        goto done;
    const int32_t *out = (const int32_t *)out_offsets.buf;
    if (out[0] != 0 || out[length] < 0 ||
        check_size(&out_data, (Py_ssize_t)out[length] + STEP, "output data") < 0)
        goto done;

    const int32_t *index = (const int32_t *)indices.buf + indices_offset;
    const int32_t *starts = (const int32_t *)dict_offsets.buf + dict_offset;
    const uint8_t *source = (const uint8_t *)dict_data.buf;
    const int64_t source_size = dict_data.len;
    uint8_t *target = (uint8_t *)out_data.buf;
    const int64_t target_size = out_data.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < length; i++) {
        int32_t at = out[i], size = out[i + 1] - at;
        if (size <= 0) continue; /* a null or an empty value; a null's index is never read */
        int32_t k = index[i];
        if (k < 0 || k >= dict_length) continue; /* offsets() has rejected such input */
        int64_t start = starts[k];
        if (start < 0 || starts[k + 1] - start != size || start + size > source_size ||
            at + (int64_t)size + STEP > target_size)
            continue;
        const uint8_t *from = source + start;
        uint8_t *to = target + at;
        int64_t rounded = ((int64_t)size + STEP - 1) / STEP * STEP;
        if (start + rounded <= source_size) {
            for (int32_t j = 0; j < size; j += STEP) memcpy(to + j, from + j, STEP);
        } else {
            memcpy(to, from, (size_t)size);
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&indices);
    PyBuffer_Release(&dict_offsets);
    PyBuffer_Release(&dict_data);
    PyBuffer_Release(&out_offsets);
    PyBuffer_Release(&out_data);
    return result;
}

static PyMethodDef methods[] = {
    {"offsets", dictionary_offsets, METH_VARARGS,
     "offsets(indices, indices_offset, length, validity, validity_offset, dict_offsets, "
     "dict_offset, dict_length, dict_data, out_offsets) -> total bytes, or -1 (declined)."},
    {"gather", dictionary_gather, METH_VARARGS,
     "gather(indices, indices_offset, length, dict_offsets, dict_offset, dict_length, "
     "dict_data, out_offsets, out_data): copy the values."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dictionary_strings",
    "Dictionary-encoded strings expanded into Arrow string buffers.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dictionary_strings(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyModule_AddIntConstant(m, "STEP", STEP);
    return m;
}
