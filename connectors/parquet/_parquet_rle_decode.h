/*
 * Parquet's RLE / bit-packing hybrid, read side, for connectors/parquet/_parquet_decode.c:
 * runs decoded into 32-bit values, with the checks Arrow makes (runs inside their buffer,
 * no empty run, a run header of at most 32 bits, RLE values within the bit width).
 */
#ifndef SHARDFLOW_PARQUET_RLE_DECODE_H
#define SHARDFLOW_PARQUET_RLE_DECODE_H

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * The RLE / bit-packing hybrid. */

typedef struct {
    const uint8_t *at, *end;
    int width;          /* bits a value */
    uint64_t mask;
    /* the current run: ``left`` values, either ``repeated`` (RLE) or bit-packed from bit
     * ``bit`` of ``packed`` */
    int64_t left;
    int is_packed;
    uint32_t repeated;
    const uint8_t *packed;
    int64_t bit;
    int64_t packed_bits; /* bits of the run present in the buffer */
} Hybrid;

static int next_run(Hybrid *h) {
    Reader r = {h->at, h->end, 1};
    uint64_t head = read_varint(&r);
    /* Arrow reads a run's header as a 32-bit varint and refuses empty runs: so does this */
    if (!r.ok || head > UINT32_MAX || (head >> 1) == 0) return 0;
    h->at = r.at;
    if (head & 1) {
        uint64_t groups = head >> 1;
        if (groups > (uint64_t)INT32_MAX) return 0;
        h->is_packed = 1;
        h->left = (int64_t)groups * 8;
        h->packed = h->at;
        h->bit = 0;
        int64_t bytes = (int64_t)groups * h->width;
        if (bytes > h->end - h->at) return 0; /* a run past the buffer: Arrow rejects it too */
        h->packed_bits = bytes * 8;
        h->at += bytes;
    } else {
        int bytes = (h->width + 7) / 8;
        if (h->end - h->at < bytes) return 0;
        uint32_t value = 0;
        for (int i = 0; i < bytes; i++) value |= (uint32_t)h->at[i] << (8 * i);
        h->at += bytes;
        if ((uint64_t)value > h->mask) return 0;
        h->is_packed = 0;
        h->left = (int64_t)(head >> 1);
        h->repeated = value;
    }
    return 1;
}

static inline uint32_t packed_value(const Hybrid *h, int64_t bit) {
    const uint8_t *p = h->packed + (bit >> 3);
    uint64_t word;
    if (p + 8 <= h->end) {
        memcpy(&word, p, 8);
    } else {
        word = 0;
        memcpy(&word, p, (size_t)(h->end - p));
    }
    return (uint32_t)((word >> (bit & 7)) & h->mask);
}

/* Decodes ``count`` values into ``out`` (or, with ``out`` NULL, calls nothing and only
 * checks). Returns 0 where the runs end early. */
static int hybrid_decode(Hybrid *h, uint32_t *out, int64_t count) {
    int64_t done = 0;
    while (done < count) {
        if (h->left == 0 && !next_run(h)) return 0;
        int64_t n = h->left < count - done ? h->left : count - done;
        if (h->is_packed) {
            if (h->bit + n * h->width > h->packed_bits) return 0;
            for (int64_t i = 0; i < n; i++) out[done + i] = packed_value(h, h->bit + i * h->width);
            h->bit += n * h->width;
        } else {
            for (int64_t i = 0; i < n; i++) out[done + i] = h->repeated;
        }
        h->left -= n;
        done += n;
    }
    return 1;
}

#endif /* SHARDFLOW_PARQUET_RLE_DECODE_H */
