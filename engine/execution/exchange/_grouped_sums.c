/*
 * Rows and sums per group code in one pass (see grouped_sums in dense_groups.py).
 *
 *   ok = count_and_sum(codes, code_width, span, counts, weights, totals)
 *
 * ``codes`` holds int32 or int64 codes (``code_width`` 4 or 8 bytes), ``counts`` (int64) and every array of ``totals`` (float64)
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

/* One pass over the rows; 0 at the first code outside [0, limit). A negative code becomes
 * a huge unsigned one, so one comparison checks both ends. */
#define SUMS(T)                                                                               \
    static int sum_##T(const T *code, Py_ssize_t rows, uint64_t limit, int64_t *count,        \
                       Py_ssize_t n, const double *const *w, double *const *t) {              \
        if (n == 1) {                                                                         \
            const double *w0 = w[0];                                                          \
            double *t0 = t[0];                                                                \
            for (Py_ssize_t i = 0; i < rows; i++) {                                           \
                uint64_t c = (uint64_t)(int64_t)code[i];                                      \
                if (c >= limit) return 0;                                                     \
                count[c]++;                                                                   \
                t0[c] += w0[i];                                                               \
            }                                                                                 \
            return 1;                                                                         \
        }                                                                                     \
        for (Py_ssize_t i = 0; i < rows; i++) {                                               \
            uint64_t c = (uint64_t)(int64_t)code[i];                                          \
            if (c >= limit) return 0;                                                         \
            count[c]++;                                                                       \
            for (Py_ssize_t j = 0; j < n; j++) t[j][c] += w[j][i];                            \
        }                                                                                     \
        return 1;                                                                             \
    }

SUMS(int64_t)
SUMS(int32_t)

static PyObject *count_and_sum(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer codes, counts;
    Py_ssize_t code_width, span;
    PyObject *weights_object, *totals_object;
    if (!PyArg_ParseTuple(args, "y*nnw*OO", &codes, &code_width, &span, &counts,
                          &weights_object, &totals_object))
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
    if ((code_width != 4 && code_width != 8) || span < 0 || codes.len % code_width ||
        counts.len < span * 8) {
        PyErr_SetString(PyExc_ValueError,
                        "codes must be int32 or int64 (code_width 4 or 8); counts must hold "
                        "span values");
        goto done;
    }
    Py_ssize_t rows = codes.len / code_width;
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
    int64_t *count = (int64_t *)counts.buf;
    const double *w[MAX_WEIGHTS];
    double *t[MAX_WEIGHTS];
    for (Py_ssize_t j = 0; j < n; j++) {
        w[j] = (const double *)weights[j].buf;
        t[j] = (double *)totals[j].buf;
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    if (code_width == 8)
        ok = sum_int64_t((const int64_t *)codes.buf, rows, (uint64_t)span, count, n, w, t);
    else
        ok = sum_int32_t((const int32_t *)codes.buf, rows, (uint64_t)span, count, n, w, t);
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
     "count_and_sum(codes, code_width, span, counts, weights, totals) -> bool: rows and sums "
     "per code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_grouped_sums", "Rows and sums per group code in one pass.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__grouped_sums(void) { return PyModule_Create(&module); }
