/*
 * Memory the text parsers (_jsonl.c, _csv.c) fill, handed to Python as objects that expose it
 * through the buffer protocol (pyarrow.py_buffer wraps them without a copy) and free it when
 * the last Arrow buffer over them goes. Include after Python.h; call PyType_Ready(&MemType).
 */
#ifndef SHARDFLOW_PARSE_MEMORY_H
#define SHARDFLOW_PARSE_MEMORY_H


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

#endif
