/*
 * Encoders for shardflow's Parquet writer of flat columns (connectors/parquet/flat_writer.py).
 *
 * The Python side lays out pages, compresses them and writes the Thrift metadata; this module
 * does the per-value work:
 *
 *   dictionary_fixed([(data, offset, length, validity), ...], width, max_entries, integers)
 *       -> (indices, dictionary) or None
 *   dictionary_bytes([(offsets, data, offset_width, offset, length, validity), ...],
 *                    max_bytes) -> (indices, plain_dictionary, entries, min, max) or None
 *   plain_bytes(offsets, data, offset_width, offset, length, validity) -> bytes
 *   bytes_min_max(offsets, data, offset_width, offset, length, validity) -> (min, max) or None
 *   rle_hybrid(indices, start, count, bit_width) -> bytes
 *
 * Arrays are given as Arrow buffers: ``offset`` and ``length`` in values, the validity bitmap
 * (or None) indexed from the same offset, value offsets of 4 or 8 bytes. A column chunk made
 * of several arrays is dictionary-encoded as one (a list of parts). Only non-null values are
 * encoded, as Parquet stores them; ``integers`` says fixed-width values are integers (whose
 * range may be small enough to index an array instead of hashing). Dictionary indices are uint32, in order of first
 * appearance; the dictionary encoders return None, having used nothing, once the dictionary
 * outgrows ``max_entries`` values or ``max_bytes`` plain-encoded bytes (the caller then
 * writes the column plainly). Minimum and maximum of byte strings compare unsigned bytes, as
 * Parquet orders BYTE_ARRAY statistics.
 */
#include "_parquet_inputs.h"
#include "_parquet_rle.h"

/* Arrow buffers and Parquet pages are little-endian; this module reads and writes them as
 * native integers. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "_parquet_encode supports little-endian machines only"
#endif

/* ---------------------------------------------------------------- the hash table */

/* Open addressing over 64-bit keys (a fixed-width value's bits, or a byte string's hash),
 * kept at most a quarter full; a slot holds its entry's index + 1 (0: empty). */
typedef struct {
    uint64_t *keys;
    uint32_t *slots;
    size_t mask;
    int shift;
} Table;

static int table_init(Table *table, int bits) {
    size_t capacity = (size_t)1 << bits;
    table->keys = malloc(capacity * sizeof(uint64_t));
    table->slots = calloc(capacity, sizeof(uint32_t));
    table->mask = capacity - 1;
    table->shift = 64 - bits;
    if (table->keys == NULL || table->slots == NULL) {
        free(table->keys);
        free(table->slots);
        table->keys = NULL;
        table->slots = NULL;
        return -1;
    }
    return 0;
}

static void table_free(Table *table) {
    free(table->keys);
    free(table->slots);
}

/* The first slot to probe for key: the top bits of a multiplicative hash. */
static inline size_t table_home(const Table *table, uint64_t key) {
    return (size_t)((key * K1) >> table->shift);
}

/* Doubles the table when ``entries`` would make it more than a quarter full. */
static int table_make_room(Table *table, size_t entries) {
    if (entries * 4 <= table->mask) return 0;
    Table bigger;
    if (table_init(&bigger, 64 - table->shift + 1) < 0) return -1;
    for (size_t i = 0; i <= table->mask; i++) {
        if (table->slots[i] == 0) continue;
        size_t at = table_home(&bigger, table->keys[i]);
        while (bigger.slots[at] != 0) at = (at + 1) & bigger.mask;
        bigger.keys[at] = table->keys[i];
        bigger.slots[at] = table->slots[i];
    }
    table_free(table);
    *table = bigger;
    return 0;
}

/* ---------------------------------------------------------------- fixed-width dictionary */

/* Values are keyed by their bits (so -0.0 and 0.0, or two NaNs, are different entries, as the
 * plain values they stand for are). Integer keys whose range is small (codes, categories)
 * index an array directly; others go through the hash table. */
static inline uint64_t fixed_key(const uint8_t *raw, int width, Py_ssize_t i) {
    return width == 4 ? load32(raw + i * 4) : load64(raw + i * 8);
}

static inline int64_t signed_key(uint64_t key, int width) {
    return width == 4 ? (int64_t)(int32_t)(uint32_t)key : (int64_t)key;
}

static inline const uint8_t *values_of(const Part *part, int width) {
    return (const uint8_t *)part->data.view.buf + part->offset * width;
}

/* Whether the non-null values, read as signed integers, span fewer than ``limit`` values;
 * their minimum goes to *low and the span to *span. */
static int small_range(const Parts *parts, int width, uint64_t limit, int64_t *low,
                       uint64_t *span) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (Py_ssize_t p = 0; p < parts->count; p++) {
        const Part *part = &parts->items[p];
        const uint8_t *raw = values_of(part, width), *bitmap = bitmap_of(part);
        if (bitmap == NULL && width == 4) { /* the common cases, in loops that vectorize */
            const int32_t *values = (const int32_t *)raw;
            for (Py_ssize_t i = 0; i < part->length; i++) {
                lo = values[i] < lo ? values[i] : lo;
                hi = values[i] > hi ? values[i] : hi;
            }
            continue;
        }
        if (bitmap == NULL) {
            const int64_t *values = (const int64_t *)raw;
            for (Py_ssize_t i = 0; i < part->length; i++) {
                lo = values[i] < lo ? values[i] : lo;
                hi = values[i] > hi ? values[i] : hi;
            }
            continue;
        }
        for (Py_ssize_t i = 0; i < part->length; i++) {
            if (!is_valid(bitmap, part->offset + i)) continue;
            int64_t value = signed_key(fixed_key(raw, width, i), width);
            lo = value < lo ? value : lo;
            hi = value > hi ? value : hi;
        }
    }
    *low = lo;
    *span = lo <= hi ? (uint64_t)hi - (uint64_t)lo + 1 : 0;
    return lo <= hi && *span - 1 < limit;
}

static PyObject *dictionary_fixed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parts_object;
    int width, integers;
    Py_ssize_t max_entries;
    if (!PyArg_ParseTuple(args, "Oinp", &parts_object, &width, &max_entries, &integers))
        return NULL;
    if (width != 4 && width != 8) {
        PyErr_SetString(PyExc_ValueError, "width must be 4 or 8");
        return NULL;
    }
    if (max_entries < 1 || max_entries >= (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_entries is out of range");
        return NULL;
    }
    Parts parts;
    if (parse_parts(parts_object, width, &parts) < 0) return NULL;
    PyObject *result = NULL, *indices = NULL, *dictionary = NULL;
    uint64_t *values = NULL;
    uint32_t *direct = NULL;
    Table table = {0};
    int64_t low = 0;
    uint64_t span = 0;
    /* A direct array as long as four dictionaries' worth of entries at most. */
    int use_direct = integers && small_range(&parts, width, 4 * (uint64_t)max_entries, &low, &span);
    indices = PyBytes_FromStringAndSize(NULL, parts.rows * 4);
    values = malloc(((size_t)max_entries + 1) * sizeof(uint64_t));
    if (indices == NULL || values == NULL) goto nomemory;
    if (use_direct) {
        direct = calloc(span, sizeof(uint32_t));
        if (direct == NULL) goto nomemory;
    } else if (table_init(&table, 12) < 0) {
        goto nomemory;
    }
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(indices);
    Py_ssize_t written = 0, entries = 0;
    int status = 0; /* 1: too many entries, -1: out of memory */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t p = 0; p < parts.count && status == 0; p++) {
        const Part *part = &parts.items[p];
        const uint8_t *raw = values_of(part, width), *bitmap = bitmap_of(part);
        for (Py_ssize_t i = 0; i < part->length; i++) {
            if (!is_valid(bitmap, part->offset + i)) continue;
            uint64_t key = fixed_key(raw, width, i);
            uint32_t *slot;
            if (use_direct) {
                slot = &direct[(uint64_t)signed_key(key, width) - (uint64_t)low];
            } else {
                size_t at = table_home(&table, key);
                while (table.slots[at] != 0 && table.keys[at] != key) at = (at + 1) & table.mask;
                table.keys[at] = key;
                slot = &table.slots[at];
            }
            if (*slot != 0) {
                out[written++] = *slot - 1;
                continue;
            }
            if (entries >= max_entries) {
                status = 1;
                break;
            }
            values[entries] = key;
            *slot = (uint32_t)++entries;
            out[written++] = (uint32_t)(entries - 1);
            if (!use_direct && table_make_room(&table, (size_t)entries) < 0) {
                status = -1;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (status < 0) goto nomemory;
    if (status > 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    dictionary = PyBytes_FromStringAndSize(NULL, entries * width);
    if (dictionary == NULL) goto done;
    uint8_t *dest = (uint8_t *)PyBytes_AS_STRING(dictionary);
    for (Py_ssize_t e = 0; e < entries; e++) {
        if (width == 4) {
            uint32_t narrow = (uint32_t)values[e];
            memcpy(dest + e * 4, &narrow, 4);
        } else {
            memcpy(dest + e * 8, &values[e], 8);
        }
    }
    if (_PyBytes_Resize(&indices, written * 4) < 0) goto done;
    result = PyTuple_Pack(2, indices, dictionary);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    free(values);
    free(direct);
    table_free(&table);
    Py_XDECREF(indices);
    Py_XDECREF(dictionary);
    release_parts(&parts);
    return result;
}

/* ---------------------------------------------------------------- byte-string dictionary */

/* Where value i of a byte-string part starts in its data; its size goes to *size. */
static inline int64_t value_span(const Part *part, Py_ssize_t i, int64_t *size) {
    const uint8_t *offsets = part->offsets.view.buf;
    int64_t start = offset_at(offsets, part->offset_width, part->offset + i);
    *size = offset_at(offsets, part->offset_width, part->offset + i + 1) - start;
    return start;
}

/* Whether n bytes at a and b are equal; short values (most labels and codes) are compared
 * as two overlapping words, without a call. */
static inline int same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n > 16) return memcmp(a, b, n) == 0;
    if (n >= 8) return load64(a) == load64(b) && load64(a + n - 8) == load64(b + n - 8);
    if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Unsigned byte-wise order; a prefix sorts first. */
static int compare_bytes(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size) {
    size_t common = a_size < b_size ? a_size : b_size;
    int order = common ? memcmp(a, b, common) : 0;
    if (order != 0) return order;
    return (a_size > b_size) - (a_size < b_size);
}

/* The dictionary being built: entries plain-encoded (4-byte length, bytes) one after the
 * other, where each one's bytes start, and its size. */
typedef struct {
    uint8_t *plain;
    size_t used, capacity;
    size_t *starts;
    uint32_t *sizes;
    size_t entries, room;
} Entries;

static int entries_add(Entries *e, const uint8_t *value, size_t size) {
    if (e->used + 4 + size > e->capacity) {
        size_t capacity = e->capacity;
        while (e->used + 4 + size > capacity) capacity *= 2;
        uint8_t *bigger = realloc(e->plain, capacity);
        if (bigger == NULL) return -1;
        e->plain = bigger;
        e->capacity = capacity;
    }
    if (e->entries == e->room) {
        size_t *starts = realloc(e->starts, e->room * 2 * sizeof(size_t));
        if (starts == NULL) return -1;
        e->starts = starts;
        uint32_t *sizes = realloc(e->sizes, e->room * 2 * sizeof(uint32_t));
        if (sizes == NULL) return -1;
        e->sizes = sizes;
        e->room *= 2;
    }
    uint32_t size32 = (uint32_t)size;
    memcpy(e->plain + e->used, &size32, 4);
    if (size) memcpy(e->plain + e->used + 4, value, size);
    e->starts[e->entries] = e->used + 4;
    e->sizes[e->entries] = size32;
    e->used += 4 + size;
    e->entries++;
    return 0;
}

static PyObject *dictionary_bytes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parts_object;
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTuple(args, "On", &parts_object, &max_bytes)) return NULL;
    Parts parts;
    if (parse_parts(parts_object, 0, &parts) < 0) return NULL;
    PyObject *result = NULL, *indices = NULL, *dictionary = NULL, *low = NULL, *high = NULL;
    Table table = {0};
    Entries e = {0};
    e.capacity = 4096;
    e.room = 256;
    e.plain = malloc(e.capacity);
    e.starts = malloc(e.room * sizeof(size_t));
    e.sizes = malloc(e.room * sizeof(uint32_t));
    indices = PyBytes_FromStringAndSize(NULL, parts.rows * 4);
    if (indices == NULL || e.plain == NULL || e.starts == NULL || e.sizes == NULL ||
        table_init(&table, 12) < 0)
        goto nomemory;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(indices);
    Py_ssize_t written = 0;
    size_t min_entry = 0, max_entry = 0;
    int status = 0; /* 1: dictionary too large, -1: out of memory */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t p = 0; p < parts.count && status == 0; p++) {
        const Part *part = &parts.items[p];
        const uint8_t *bitmap = bitmap_of(part), *bytes = part->data.view.buf;
        for (Py_ssize_t i = 0; i < part->length; i++) {
            if (!is_valid(bitmap, part->offset + i)) continue;
            int64_t span;
            const uint8_t *value = bytes + value_span(part, i, &span);
            size_t size = (size_t)span;
            uint64_t hash = hash_bytes(value, size);
            size_t at = table_home(&table, hash);
            uint32_t slot;
            while ((slot = table.slots[at]) != 0) {
                if (table.keys[at] == hash && e.sizes[slot - 1] == size &&
                    same_bytes(e.plain + e.starts[slot - 1], value, size))
                    break;
                at = (at + 1) & table.mask;
            }
            if (slot != 0) {
                out[written++] = slot - 1;
                continue;
            }
            if (size > UINT32_MAX - 4 || e.used + 4 + size > (size_t)max_bytes ||
                e.entries >= UINT32_MAX - 1) {
                status = 1;
                break;
            }
            if (entries_add(&e, value, size) < 0) {
                status = -1;
                break;
            }
            size_t added = e.entries - 1;
            if (added > 0) {
                if (compare_bytes(value, size, e.plain + e.starts[min_entry],
                                  e.sizes[min_entry]) < 0)
                    min_entry = added;
                if (compare_bytes(value, size, e.plain + e.starts[max_entry],
                                  e.sizes[max_entry]) > 0)
                    max_entry = added;
            }
            table.keys[at] = hash;
            table.slots[at] = (uint32_t)e.entries;
            out[written++] = (uint32_t)added;
            if (table_make_room(&table, e.entries) < 0) {
                status = -1;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (status < 0) goto nomemory;
    if (status > 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    dictionary = PyBytes_FromStringAndSize((const char *)e.plain, (Py_ssize_t)e.used);
    if (dictionary == NULL) goto done;
    if (e.entries > 0) {
        low = PyBytes_FromStringAndSize((const char *)e.plain + e.starts[min_entry],
                                        e.sizes[min_entry]);
        high = PyBytes_FromStringAndSize((const char *)e.plain + e.starts[max_entry],
                                         e.sizes[max_entry]);
    } else {
        low = Py_NewRef(Py_None);
        high = Py_NewRef(Py_None);
    }
    if (low == NULL || high == NULL || _PyBytes_Resize(&indices, written * 4) < 0) goto done;
    PyObject *count = PyLong_FromSize_t(e.entries);
    if (count == NULL) goto done;
    result = PyTuple_Pack(5, indices, dictionary, count, low, high);
    Py_DECREF(count);
    goto done;
nomemory:
    PyErr_NoMemory();
done:
    free(e.plain);
    free(e.starts);
    free(e.sizes);
    table_free(&table);
    Py_XDECREF(indices);
    Py_XDECREF(dictionary);
    Py_XDECREF(low);
    Py_XDECREF(high);
    release_parts(&parts);
    return result;
}

/* ---------------------------------------------------------------- plain byte strings */

static PyObject *plain_bytes(PyObject *self, PyObject *args) {
    (void)self;
    Part s;
    PyObject *result = NULL;
    if (parse_part(args, 0, &s) < 0) return NULL;
    const uint8_t *bitmap = bitmap_of(&s), *bytes = s.data.view.buf;
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < s.length; i++) {
        int64_t value_size;
        value_span(&s, i, &value_size);
        if (is_valid(bitmap, s.offset + i)) size += 4 + (Py_ssize_t)value_size;
    }
    result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    int too_long = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < s.length; i++) {
        if (!is_valid(bitmap, s.offset + i)) continue;
        int64_t value_size;
        int64_t start = value_span(&s, i, &value_size);
        if (value_size > (int64_t)UINT32_MAX) {
            too_long = 1;
            break;
        }
        uint32_t size32 = (uint32_t)value_size;
        memcpy(out, &size32, 4);
        memcpy(out + 4, bytes + start, (size_t)value_size);
        out += 4 + value_size;
    }
    Py_END_ALLOW_THREADS
    if (too_long) {
        Py_CLEAR(result);
        PyErr_SetString(PyExc_ValueError, "a value is longer than Parquet allows (4 GiB)");
    }
done:
    release_part(&s);
    return result;
}

static PyObject *bytes_min_max(PyObject *self, PyObject *args) {
    (void)self;
    Part s;
    PyObject *result = NULL;
    if (parse_part(args, 0, &s) < 0) return NULL;
    const uint8_t *bitmap = bitmap_of(&s), *bytes = s.data.view.buf;
    int found = 0;
    int64_t low_start = 0, low_size = 0, high_start = 0, high_size = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < s.length; i++) {
        if (!is_valid(bitmap, s.offset + i)) continue;
        int64_t size;
        int64_t start = value_span(&s, i, &size);
        if (!found) {
            found = 1;
            low_start = high_start = start;
            low_size = high_size = size;
        } else if (compare_bytes(bytes + start, size, bytes + low_start, low_size) < 0) {
            low_start = start, low_size = size;
        } else if (compare_bytes(bytes + start, size, bytes + high_start, high_size) > 0) {
            high_start = start, high_size = size;
        }
    }
    Py_END_ALLOW_THREADS
    if (!found) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = Py_BuildValue("(y#y#)", (const char *)bytes + low_start, (Py_ssize_t)low_size,
                           (const char *)bytes + high_start, (Py_ssize_t)high_size);
done:
    release_part(&s);
    return result;
}

static PyMethodDef methods[] = {
    {"dictionary_fixed", dictionary_fixed, METH_VARARGS,
     "Dictionary-encode fixed-width values: (indices, dictionary), or None when too many."},
    {"dictionary_bytes", dictionary_bytes, METH_VARARGS,
     "Dictionary-encode byte strings: (indices, plain dictionary, entries, min, max), or None."},
    {"plain_bytes", plain_bytes, METH_VARARGS,
     "PLAIN-encode the non-null byte strings (4-byte length, bytes)."},
    {"bytes_min_max", bytes_min_max, METH_VARARGS,
     "The smallest and largest non-null byte strings, or None when all are null."},
    {"rle_hybrid", rle_hybrid, METH_VARARGS,
     "Encode uint32 values with Parquet's RLE / bit-packing hybrid (no length prefix)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_parquet_encode",
    "Per-value encoders of shardflow's Parquet writer of flat columns.", -1, methods,
};

PyMODINIT_FUNC PyInit__parquet_encode(void) { return PyModule_Create(&module); }
