/*
 * Parquet's RLE / bit-packing hybrid for connectors/parquet/_parquet_encode.c: runs of one value as
 * RLE runs, the rest bit-packed in groups of eight.
 */
#ifndef SHARDFLOW_PARQUET_RLE_H
#define SHARDFLOW_PARQUET_RLE_H

#include "_parquet_inputs.h"


static inline uint8_t *put_varint(uint8_t *out, uint64_t value) {
    while (value >= 0x80) {
        *out++ = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

/* How many values from ``at`` equal values[at], counting at most ``cap``. */
static inline Py_ssize_t repeats(const uint32_t *values, Py_ssize_t at, Py_ssize_t end,
                                 Py_ssize_t cap) {
    Py_ssize_t n = 1;
    while (at + n < end && n < cap && values[at + n] == values[at]) n++;
    return n;
}

/* Eight values of ``bit_width`` bits, packed from the lowest bit up into bit_width bytes.
 * Up to 16 bytes are stored (a fixed-size store is much faster than one of bit_width
 * bytes); the caller's buffer has that much room past the packed bytes. */
static inline __attribute__((always_inline)) uint8_t *pack_narrow(uint8_t *out,
                                                                   const uint32_t *values,
                                                                   const int bit_width,
                                                                   uint64_t mask) {
    __uint128_t acc = 0;
    for (int k = 0; k < 8; k++) acc |= (__uint128_t)(values[k] & mask) << (k * bit_width);
    memcpy(out, &acc, 16);
    return out + bit_width;
}

static inline uint8_t *pack_group(uint8_t *out, const uint32_t *values, int bit_width,
                                  uint64_t mask) {
    switch (bit_width) { /* constant widths: the shifts become immediates */
#define NARROW(w) \
    case w: \
        return pack_narrow(out, values, w, mask);
        NARROW(1) NARROW(2) NARROW(3) NARROW(4) NARROW(5) NARROW(6) NARROW(7) NARROW(8)
        NARROW(9) NARROW(10) NARROW(11) NARROW(12) NARROW(13) NARROW(14) NARROW(15) NARROW(16)
#undef NARROW
    default:
        break;
    }
    uint64_t acc = 0;
    int bits = 0;
    for (int k = 0; k < 8; k++) {
        acc |= (values[k] & mask) << bits;
        bits += bit_width;
        while (bits >= 8) {
            *out++ = (uint8_t)acc;
            acc >>= 8;
            bits -= 8;
        }
    }
    return out;
}

static PyObject *rle_hybrid(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values_object;
    Py_ssize_t start, count;
    int bit_width;
    if (!PyArg_ParseTuple(args, "Onni", &values_object, &start, &count, &bit_width)) return NULL;
    if (bit_width < 1 || bit_width > 32) {
        PyErr_SetString(PyExc_ValueError, "bit_width must be between 1 and 32");
        return NULL;
    }
    if (check_span(start, count) < 0) return NULL;
    Input values;
    PyObject *result = NULL;
    if (take(values_object, &values) < 0) return NULL;
    if (check_size(&values, (start + count) * 4, "values") < 0) goto done;
    /* Every unit (a literal run of 8-value groups, or a repeated run of at least 8 values)
     * takes at most a 10-byte header and max(bit_width, 4) bytes per 8 values. */
    size_t bound = (size_t)(count / 8 + 2) * (size_t)(bit_width + 14);
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bound);
    if (result == NULL) goto done;
    const uint32_t *v = (const uint32_t *)values.view.buf + start;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    uint8_t *const begin = out;
    const Py_ssize_t n = count;
    const int value_bytes = (bit_width + 7) / 8;
    const uint64_t mask = bit_width == 32 ? 0xffffffffULL : ((1ULL << bit_width) - 1);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t run = repeats(v, i, n, n);
        if (run >= 8) {
            out = put_varint(out, (uint64_t)run << 1);
            uint32_t value = v[i];
            for (int b = 0; b < value_bytes; b++) *out++ = (uint8_t)(value >> (8 * b));
            i += run;
            continue;
        }
        /* A literal run: groups of 8 until a group would start a repeated run. */
        Py_ssize_t end = i;
        do {
            end += 8;
        } while (end < n && repeats(v, end, n, 8) < 8);
        Py_ssize_t groups = (end - i) / 8;
        out = put_varint(out, ((uint64_t)groups << 1) | 1);
        for (Py_ssize_t g = i; g < end; g += 8) {
            uint32_t group[8] = {0};
            const uint32_t *source = v + g;
            if (g + 8 > n) { /* the last values, padded with zeros */
                memcpy(group, v + g, (size_t)(n - g) * 4);
                source = group;
            }
            out = pack_group(out, source, bit_width, mask);
        }
        i = end < n ? end : n;
    }
    Py_END_ALLOW_THREADS
    _PyBytes_Resize(&result, out - begin);
done:
    release(&values);
    return result;
}

#endif
