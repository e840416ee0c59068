/*
 * Rows and sums per group code in one pass (see grouped_sums in dense_groups.py).
 *
 *   ok = count_and_sum(codes, span, counts, weights, totals)
 *
 * ``codes`` holds int64 codes, ``counts`` (int64) and every array of ``totals`` (float64)
 * hold ``span`` values, zeroed by the caller; ``weights`` are float64 arrays as long as
 * ``codes``. Each row adds 1 to its code's count and its weights to its code's totals, in
 * row order: the sums are those of ``np.bincount(codes, weights=w)``, bit for bit, which
 * reads the codes once per call and again to find their range. Returns False, having
 * possibly written part of the output, when a code is outside [0, span).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_WEIGHTS 8

static PyObject *count_and_sum(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer codes, counts;
    Py_ssize_t span;
    PyObject *weights_object, *totals_object;
    if (!PyArg_ParseTuple(args, "y*nw*OO", &codes, &span, &counts, &weights_object,
                          &totals_object))
        return NULL;
    Py_buffer weights[MAX_WEIGHTS], totals[MAX_WEIGHTS];
    Py_ssize_t held_weights = 0, held_totals = 0;
    PyObject *result = NULL;
    PyObject *weight_list = PySequence_Fast(weights_object, "weights must be a sequence");
    PyObject *total_list = weight_list == NULL
                               ? NULL
                               : PySequence_Fast(totals_object, "totals must be a sequence");
    if (total_list == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(weight_list);
    if (n > MAX_WEIGHTS || PySequence_Fast_GET_SIZE(total_list) != n) {
        PyErr_Format(PyExc_ValueError, "give as many totals as weights, at most %d",
                     MAX_WEIGHTS);
        goto done;
    }
    Py_ssize_t rows = codes.len / 8;
    if (span < 0 || codes.len % 8 || counts.len < span * 8) {
        PyErr_SetString(PyExc_ValueError, "codes must be int64; counts must hold span values");
        goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(weight_list, j), &weights[j],
                               PyBUF_SIMPLE) < 0)
            goto done;
        held_weights++;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(total_list, j), &totals[j],
                               PyBUF_WRITABLE) < 0)
            goto done;
        held_totals++;
        if (weights[j].len != rows * 8 || totals[j].len < span * 8) {
            PyErr_SetString(PyExc_ValueError,
                            "weights must be float64 as long as codes; totals must hold span "
                            "values");
            goto done;
        }
    }
    const int64_t *code = (const int64_t *)codes.buf;
    int64_t *count = (int64_t *)counts.buf;
    const double *w[MAX_WEIGHTS];
    double *t[MAX_WEIGHTS];
    for (Py_ssize_t j = 0; j < n; j++) {
        w[j] = (const double *)weights[j].buf;
        t[j] = (double *)totals[j].buf;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    const uint64_t limit = (uint64_t)span;
    if (n == 1) {
        const double *w0 = w[0];
        double *t0 = t[0];
        for (Py_ssize_t i = 0; i < rows; i++) {
            uint64_t c = (uint64_t)code[i];
            if (c >= limit) {
                ok = 0;
                break;
            }
            count[c]++;
            t0[c] += w0[i];
        }
    } else {
        for (Py_ssize_t i = 0; i < rows; i++) {
            uint64_t c = (uint64_t)code[i];
            if (c >= limit) {
                ok = 0;
                break;
            }
            count[c]++;
            for (Py_ssize_t j = 0; j < n; j++) t[j][c] += w[j][i];
        }
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
done:
    for (Py_ssize_t j = 0; j < held_weights; j++) PyBuffer_Release(&weights[j]);
    for (Py_ssize_t j = 0; j < held_totals; j++) PyBuffer_Release(&totals[j]);
    Py_XDECREF(weight_list);
    Py_XDECREF(total_list);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&counts);
    return result;
}

static PyMethodDef methods[] = {
    {"count_and_sum", count_and_sum, METH_VARARGS,
     "count_and_sum(codes, span, counts, weights, totals) -> bool: rows and sums per code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_grouped_sums", "Rows and sums per group code in one pass.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__grouped_sums(void) { return PyModule_Create(&module); }
