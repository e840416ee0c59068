/*
 * What the text parsers (_jsonl.c, _csv.c) share on the Python side: the memory they fill,
 * handed to Python as objects that expose it through the buffer protocol (pyarrow.py_buffer
 * wraps them without a copy) and free it when the last Arrow buffer over them goes; and
 * set_powers(), which loads the table of powers of ten. Include after Python.h and
 * _parse_numbers.h; call PyType_Ready(&MemType).
 */
#ifndef SHARDFLOW_PARSE_PYTHON_H
#define SHARDFLOW_PARSE_PYTHON_H


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
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shardflow.connectors.ParsedMemory",
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

/* The object owning *data (NULL afterwards); None when *data is NULL. */
static PyObject *take_memory(uint8_t **data, size_t size) {
    if (*data == NULL) Py_RETURN_NONE;
    char *owned = (char *)*data;
    *data = NULL;
    return mem_new(owned, (Py_ssize_t)size);
}

/* set_powers(table): the table of 128-bit powers of ten (see native_text.py). */
static PyObject *parser_set_powers(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len != (Py_ssize_t)(POW_COUNT * 16)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "the table must hold 696 pairs of 64-bit words");
        return NULL;
    }
    load_powers((const uint8_t *)view.buf);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

#endif
