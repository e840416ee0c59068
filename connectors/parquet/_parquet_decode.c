/*
 * Pages of flat Parquet columns decoded into Arrow buffers (see
 * connectors/parquet/page_decoding.py); the Thrift page header reader is in
 * _parquet_page_header.h, the RLE / bit-packing hybrid in _parquet_rle_decode.h.
 *
 * Arrow's Parquet reader spends about as long on its own bookkeeping as on decompressing a
 * float64 column; this module does the rest of the work of the pages it accepts, and
 * declines everything else. Three functions:
 *
 *   page_header(data, offset) -> (header_length, page_type, uncompressed_size,
 *       compressed_size, num_values, encoding, level_encoding, num_nulls, levels_length,
 *       repetition_length, is_compressed) or None
 *
 * parses one Thrift compact PageHeader (data page v1 and v2, dictionary page; fields a kind
 * of page lacks are -1); None when the header is malformed or of another kind.
 *
 *   decode_page(page, levels_start, levels_length, values_start, num_values, encoding,
 *               width, dictionary, dictionary_count, out, validity, row,
 *               indices_only=False) -> nulls or -1
 *
 * writes ``num_values`` values of ``width`` bytes into ``out`` from slot ``row`` on, and
 * their validity bits into ``validity`` (a bitmap, or None for a required column; the
 * definition levels, of bit width 1, are the RLE / bit-packing hybrid). Values are PLAIN
 * (encoding 0) or dictionary indices (2 or 8) into ``dictionary`` (its PLAIN values); with
 * ``indices_only`` (and no ``dictionary``), the int32 indices themselves, each below
 * ``dictionary_count``, for an Arrow dictionary array. A null's slot is zeroed.
 *
 *   byte_arrays(page, count, offsets, data) -> bytes or -1
 *
 * decodes a dictionary page of PLAIN byte arrays into Arrow offsets and data.
 *
 * A function returns -1 (or None), having possibly written part of its output, when
 * anything does not add up (a level other than 0 or 1, an index out of range, a run past the
 * page): the caller then reads the column with Arrow.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_parquet_page_header.h"
#include "_parquet_rle_decode.h"

static PyObject *page_header(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "y*n", &data, &offset)) return NULL;
    if (offset < 0 || offset > data.len) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    Reader r = {(const uint8_t *)data.buf + offset, (const uint8_t *)data.buf + data.len, 1};
    Header h = {-1, -1, -1, -1, -1, -1, -1, -1, -1, 1, -1, -1, 0};
    int kind_seen = 0, kind = 0, last = 0, id, type;
    while (r.ok && (type = next_field(&r, &last, &id)) != T_STOP) {
        if (id == 1) h.type = read_int(&r, type);
        else if (id == 2) h.uncompressed = read_int(&r, type);
        else if (id == 3) h.compressed = read_int(&r, type);
        else if (id == 4) read_int(&r, type); /* the page's CRC: not checked, as Arrow's default */
        else if (id >= 5 && id <= 8 && type != T_STRUCT) r.ok = 0;
        else if (id == 5 || id == 7 || id == 8) {
            kind_seen++;
            kind = id == 5 ? 1 : id == 7 ? 2 : 3;
            read_page_struct(&r, &h, kind);
        } else skip_value(&r, type, 1);
    }
    Py_ssize_t length = (Py_ssize_t)(r.at - ((const uint8_t *)data.buf + offset));
    PyBuffer_Release(&data);
    /* The page's type must be that of the one header struct it holds; a flat column's v2
     * page holds as many rows as values. */
    static const int64_t TYPE_OF_KIND[4] = {-1, 0, 2, 3};
    if (!r.ok || kind_seen != 1 || (h.seen & REQUIRED[kind]) != REQUIRED[kind] ||
        h.type != TYPE_OF_KIND[kind] || (kind == 3 && h.num_rows != h.num_values) ||
        !known_encoding(h.encoding) ||
        (kind == 1 && (!known_encoding(h.level_encoding) ||
                       !known_encoding(h.repetition_encoding))) ||
        h.uncompressed < 0 || h.compressed < 0 || h.num_values < 0 ||
        h.uncompressed > INT32_MAX || h.compressed > INT32_MAX)
        Py_RETURN_NONE;
    return Py_BuildValue("nLLLLLLLLLL", length, (long long)h.type, (long long)h.uncompressed,
                         (long long)h.compressed, (long long)h.num_values,
                         (long long)h.encoding, (long long)h.level_encoding,
                         (long long)h.num_nulls, (long long)h.levels_length,
                         (long long)h.repetition_length, (long long)h.is_compressed);
}

/* ---------------------------------------------------------------------------------------
 * Pages. */

static void set_bits(uint8_t *bitmap, int64_t from, int64_t to) {
    while (from < to && (from & 7)) {
        bitmap[from >> 3] |= (uint8_t)(1u << (from & 7));
        from++;
    }
    if (to - from >= 8) {
        memset(bitmap + (from >> 3), 0xFF, (size_t)((to - from) >> 3));
        from += (to - from) & ~(int64_t)7;
    }
    while (from < to) {
        bitmap[from >> 3] |= (uint8_t)(1u << (from & 7));
        from++;
    }
}

static void clear_bits(uint8_t *bitmap, int64_t from, int64_t to) {
    while (from < to && (from & 7)) {
        bitmap[from >> 3] &= (uint8_t) ~(1u << (from & 7));
        from++;
    }
    if (to - from >= 8) {
        memset(bitmap + (from >> 3), 0, (size_t)((to - from) >> 3));
        from += (to - from) & ~(int64_t)7;
    }
    while (from < to) {
        bitmap[from >> 3] &= (uint8_t) ~(1u << (from & 7));
        from++;
    }
}

#define CHUNK 1024

/* Definition levels of ``count`` values (bit width 1) into ``bitmap`` from bit ``row``.
 * Returns the number of nulls, or -1. */
static int64_t decode_levels(const uint8_t *at, const uint8_t *end, int64_t count,
                             uint8_t *bitmap, int64_t row) {
    Hybrid h = {at, end, 1, 1, 0, 0, 0, NULL, 0, 0};
    uint32_t levels[CHUNK];
    int64_t nulls = 0, done = 0;
    while (done < count) {
        if (h.left == 0 && !next_run(&h)) return -1;
        int64_t n = h.left < count - done ? h.left : count - done;
        if (!h.is_packed) {
            if (h.repeated) set_bits(bitmap, row + done, row + done + n);
            else {
                clear_bits(bitmap, row + done, row + done + n);
                nulls += n;
            }
            h.left -= n;
            done += n;
            continue;
        }
        if (n > CHUNK) n = CHUNK;
        if (!hybrid_decode(&h, levels, n)) return -1;
        for (int64_t i = 0; i < n; i++) {
            int64_t slot = row + done + i;
            if (levels[i]) bitmap[slot >> 3] |= (uint8_t)(1u << (slot & 7));
            else {
                bitmap[slot >> 3] &= (uint8_t) ~(1u << (slot & 7));
                nulls++;
            }
        }
        done += n;
    }
    return nulls;
}

static inline int valid_at(const uint8_t *bitmap, int64_t bit) {
    return (bitmap[bit >> 3] >> (bit & 7)) & 1;
}

/* ``present`` values (the non-null ones) from ``values`` into slots ``row`` .. ``row +
 * count`` of ``out``, nulls zeroed. */
static void scatter_plain(const uint8_t *values, int width, int64_t count, int64_t present,
                          uint8_t *out, const uint8_t *bitmap, int64_t row) {
    if (present == count) {
        memcpy(out + row * width, values, (size_t)(count * width));
        return;
    }
    for (int64_t i = 0; i < count; i++) {
        uint8_t *slot = out + (row + i) * width;
        if (valid_at(bitmap, row + i)) {
            memcpy(slot, values, (size_t)width);
            values += width;
        } else {
            memset(slot, 0, (size_t)width);
        }
    }
}

/* Decodes ``present`` dictionary indices into slots ``row`` .. ``row + count`` of ``out``
 * (null slots zeroed), writing VALUE for each (``index[i]`` in scope), every index checked
 * against the dictionary's size. */
#define GATHER(NAME, T, VALUE)                                                                \
    static int NAME(Hybrid *h, const T *dictionary, int64_t dictionary_count, int64_t count,  \
                    int64_t present, T *out, const uint8_t *bitmap, int64_t row) {            \
        uint32_t index[CHUNK];                                                                \
        int64_t slot = row, end = row + count, taken = 0;                                     \
        (void)dictionary;                                                                     \
        while (taken < present) {                                                             \
            int64_t n = present - taken < CHUNK ? present - taken : CHUNK;                    \
            if (!hybrid_decode(h, index, n)) return 0;                                        \
            for (int64_t i = 0; i < n; i++) {                                                 \
                if ((int64_t)index[i] >= dictionary_count) return 0;                          \
                if (present != count) {                                                       \
                    while (!valid_at(bitmap, slot)) out[slot++] = 0;                          \
                }                                                                             \
                out[slot++] = VALUE;                                                          \
            }                                                                                 \
            taken += n;                                                                       \
        }                                                                                     \
        while (slot < end) out[slot++] = 0;                                                   \
        return 1;                                                                             \
    }

GATHER(gather_uint32_t, uint32_t, dictionary[index[i]])
GATHER(gather_uint64_t, uint64_t, dictionary[index[i]])
/* The dictionary indices themselves (int32), for an Arrow dictionary array. */
GATHER(indices_only, uint32_t, index[i])

/* byte_arrays(page, count, offsets, data) -> bytes, or -1: ``count`` PLAIN byte arrays
 * (a 4-byte little-endian length, then the bytes) as Arrow int32 offsets and data. */
static PyObject *byte_arrays(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer page, offsets, data;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*nw*w*", &page, &count, &offsets, &data)) return NULL;
    long long result = -1;
    PyObject *answer = NULL;
    if (count < 0 || offsets.len < (count + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "offsets must hold count + 1 int32 values");
        goto done;
    }
    answer = Py_None;
    const uint8_t *at = (const uint8_t *)page.buf, *end = at + page.len;
    int32_t *offset = (int32_t *)offsets.buf;
    uint8_t *out = (uint8_t *)data.buf;
    int64_t total = 0;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    offset[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (end - at < 4) {
            ok = 0;
            break;
        }
        uint32_t length;
        memcpy(&length, at, 4);
        at += 4;
        if ((int64_t)length > end - at || total + length > INT32_MAX ||
            total + length > (int64_t)data.len) {
            ok = 0;
            break;
        }
        memcpy(out + total, at, length);
        at += length;
        total += length;
        offset[i + 1] = (int32_t)total;
    }
    Py_END_ALLOW_THREADS
    if (ok && at == end) result = total; /* bytes past the values: declined, never guessed */
done:
    PyBuffer_Release(&page);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    if (answer == NULL) return NULL;
    return PyLong_FromLongLong(result);
}

static PyObject *decode_page(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer page, dictionary = {0}, out, validity = {0};
    PyObject *dictionary_object, *validity_object;
    Py_ssize_t levels_start, levels_length, values_start, num_values, encoding, width,
        dictionary_count, row;
    int want_indices = 0;
    if (!PyArg_ParseTuple(args, "y*nnnnnnOnw*On|p", &page, &levels_start, &levels_length,
                          &values_start, &num_values, &encoding, &width, &dictionary_object,
                          &dictionary_count, &out, &validity_object, &row, &want_indices))
        return NULL;
    int has_dictionary = 0, has_validity = 0;
    long long result = -1;
    PyObject *answer = NULL;
    if (dictionary_object != Py_None) {
        if (PyObject_GetBuffer(dictionary_object, &dictionary, PyBUF_SIMPLE) < 0) goto done;
        has_dictionary = 1;
    }
    if (validity_object != Py_None) {
        if (PyObject_GetBuffer(validity_object, &validity, PyBUF_WRITABLE) < 0) goto done;
        has_validity = 1;
    }
    if ((width != 4 && width != 8) || num_values < 0 || row < 0 || levels_start < 0 ||
        levels_length < 0 || values_start < 0 || dictionary_count < 0) {
        PyErr_SetString(PyExc_ValueError, "width must be 4 or 8; counts and offsets >= 0");
        goto done;
    }
    if ((row + num_values) * width > out.len ||
        (has_validity && (row + num_values + 7) / 8 > validity.len) ||
        (has_dictionary && dictionary_count * width > dictionary.len)) {
        PyErr_SetString(PyExc_ValueError, "an output or the dictionary is too small");
        goto done;
    }
    answer = Py_None; /* from here on, a mismatch declines (-1) rather than raises */
    if (levels_start + levels_length > page.len || values_start > page.len) goto done;
    const uint8_t *base = (const uint8_t *)page.buf;
    const uint8_t *values = base + values_start, *values_end = base + page.len;
    uint8_t *target = (uint8_t *)out.buf;
    uint8_t *bitmap = has_validity ? (uint8_t *)validity.buf : NULL;
    int dictionary_encoded = encoding == 2 || encoding == 8;
    if (want_indices ? !dictionary_encoded || width != 4 || has_dictionary
                     : !(encoding == 0 || (dictionary_encoded && has_dictionary)))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    int64_t nulls = 0;
    if (has_validity) {
        nulls = decode_levels(base + levels_start, base + levels_start + levels_length,
                              num_values, bitmap, row);
    } else if (levels_length != 0) {
        nulls = -1;
    }
    if (nulls >= 0) {
        int64_t present = num_values - nulls;
        if (!dictionary_encoded) {
            if (present * width <= values_end - values) {
                scatter_plain(values, (int)width, num_values, present, target, bitmap, row);
                result = nulls;
            }
        } else if (values >= values_end || *values > 32) {
            /* no bit width, or one Arrow rejects (even where every value is null) */
        } else if (present == 0) {
            memset(target + row * width, 0, (size_t)(num_values * width));
            result = nulls;
        } else {
            int bits = *values;
            Hybrid h = {values + 1, values_end, bits,
                        bits == 32 ? 0xFFFFFFFFull : ((1ull << bits) - 1), 0, 0, 0, NULL, 0, 0};
            int ok = want_indices ? indices_only(&h, NULL, dictionary_count, num_values,
                                                 present, (uint32_t *)target, bitmap, row)
                     : width == 4 ? gather_uint32_t(&h, (const uint32_t *)dictionary.buf,
                                                  dictionary_count, num_values, present,
                                                  (uint32_t *)target, bitmap, row)
                                : gather_uint64_t(&h, (const uint64_t *)dictionary.buf,
                                                  dictionary_count, num_values, present,
                                                  (uint64_t *)target, bitmap, row);
            if (ok) result = nulls;
        }
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&page);
    PyBuffer_Release(&out);
    if (has_dictionary) PyBuffer_Release(&dictionary);
    if (has_validity) PyBuffer_Release(&validity);
    if (answer == NULL) return NULL;
    return PyLong_FromLongLong(result);
}

static PyMethodDef methods[] = {
    {"page_header", page_header, METH_VARARGS,
     "page_header(data, offset) -> (header_length, page_type, uncompressed_size, "
     "compressed_size, num_values, encoding, level_encoding, num_nulls, levels_length, "
     "repetition_length, is_compressed) or None."},
    {"decode_page", decode_page, METH_VARARGS,
     "decode_page(page, levels_start, levels_length, values_start, num_values, encoding, "
     "width, dictionary, dictionary_count, out, validity, row, indices_only=False) -> nulls, "
     "or -1 (declined)."},
    {"byte_arrays", byte_arrays, METH_VARARGS,
     "byte_arrays(page, count, offsets, data) -> bytes, or -1 (declined)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_parquet_decode",
    "Pages of flat fixed-width Parquet columns decoded into Arrow buffers.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__parquet_decode(void) { return PyModule_Create(&module); }
