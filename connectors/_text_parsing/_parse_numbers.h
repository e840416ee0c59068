/*
 * Numbers for the text parsers (_jsonl.c, _csv.c): number literals to int64, or to correctly
 * rounded doubles by the Eisel-Lemire algorithm over a table of 128-bit powers of ten
 * (set_powers(), from Python), falling back to strtod_l in the C locale where it cannot
 * decide.
 */
#ifndef SHARDFLOW_PARSE_NUMBERS_H
#define SHARDFLOW_PARSE_NUMBERS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__) || defined(__APPLE__)
#include <locale.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif
#define HAVE_STRTOD_L 1
#endif

#include "_parse_text.h"

#define MAX_SLOW_NUMBER 800
#define POW_MIN (-348)
#define POW_MAX 347
#define POW_COUNT (POW_MAX - POW_MIN + 1)

static const double exact_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
static uint64_t pow10_hi[POW_COUNT];
static uint64_t pow10_lo[POW_COUNT];
static int powers_ready = 0;
#ifdef HAVE_STRTOD_L
static locale_t c_locale = (locale_t)0;
#endif


static inline uint64_t mul64(uint64_t a, uint64_t b, uint64_t *lo) {
    __uint128_t r = (__uint128_t)a * b;
    *lo = (uint64_t)r;
    return (uint64_t)(r >> 64);
}

static inline int clz64(uint64_t x) { return __builtin_clzll(x); }

/* Eisel-Lemire: man * 10^exp10 correctly rounded, or 0 when it cannot decide. */
static int eisel_lemire(uint64_t man, int64_t exp10, int neg, double *out) {
    if (exp10 < POW_MIN || exp10 > POW_MAX) return 0;
    int clz = clz64(man);
    man <<= clz;
    uint64_t ret_exp2 = (uint64_t)(((217706 * exp10) >> 16) + 64 + 1023) - (uint64_t)clz;
    int idx = (int)(exp10 - POW_MIN);
    uint64_t x_lo, x_hi = mul64(man, pow10_hi[idx], &x_lo);
    if ((x_hi & 0x1FF) == 0x1FF && x_lo + man < man) {
        uint64_t y_lo, y_hi = mul64(man, pow10_lo[idx], &y_lo);
        uint64_t merged_hi = x_hi, merged_lo = x_lo + y_hi;
        if (merged_lo < x_lo) merged_hi++;
        if ((merged_hi & 0x1FF) == 0x1FF && merged_lo + 1 == 0 && y_lo + man < man) return 0;
        x_hi = merged_hi;
        x_lo = merged_lo;
    }
    uint64_t msb = x_hi >> 63;
    uint64_t mant = x_hi >> (msb + 9);
    ret_exp2 -= 1 ^ msb;
    if (x_lo == 0 && (x_hi & 0x1FF) == 0 && (mant & 3) == 1) return 0;
    mant += mant & 1;
    mant >>= 1;
    if (mant >> 53) {
        mant >>= 1;
        ret_exp2 += 1;
    }
    if (ret_exp2 - 1 >= 0x7FF - 1) return 0;
    uint64_t bits = (ret_exp2 << 52) | (mant & 0x000FFFFFFFFFFFFFULL);
    if (neg) bits |= 0x8000000000000000ULL;
    memcpy(out, &bits, sizeof(bits));
    return 1;
}

static int slow_double(const char *start, const char *stop, double *out) {
#ifdef HAVE_STRTOD_L
    char text[MAX_SLOW_NUMBER + 1];
    size_t n = (size_t)(stop - start);
    if (n > MAX_SLOW_NUMBER || c_locale == (locale_t)0) return 0;
    memcpy(text, start, n);
    text[n] = '\0';
    char *end = NULL;
    double v = strtod_l(text, &end, c_locale);
    if (end != text + n) return 0;
    if (v == HUGE_VAL || v == -HUGE_VAL) return 0; /* Arrow: "Number too big" */
    *out = v;
    return 1;
#else
    (void)start;
    (void)stop;
    (void)out;
    return 0;
#endif
}

static const uint64_t digit_scale[9] = {1,      10,      100,      1000,     10000,
                                        100000, 1000000, 10000000, 100000000};

/*
 * The run of decimal digits (at most 8) starting at p, which may be read 8 bytes ahead: their
 * count, and their value in *value. The 8 bytes are taken as one little-endian word: a byte
 * is a digit when (byte ^ '0') <= 9, the first that is not ends the run; the run is moved to
 * the word's top bytes (so it reads as an 8-digit number with leading zeros) and folded
 * pairwise: digit pairs, then groups of four, then eight, each step one multiply.
 */
static inline int digit_run8(const char *p, uint64_t *value) {
    uint64_t word;
    memcpy(&word, p, 8);
    uint64_t x = word ^ 0x3030303030303030ULL;
    uint64_t not_digit =
        (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
    int count = not_digit ? __builtin_ctzll(not_digit) >> 3 : 8;
    *value = 0;
    if (count == 0) return 0;
    x <<= 8 * (8 - count);
    x = (x * 10 + (x >> 8)) & 0x00FF00FF00FF00FFULL;
    x = (x * 100 + (x >> 16)) & 0x0000FFFF0000FFFFULL;
    x = (x * 10000 + (x >> 32)) & 0xFFFFFFFFULL;
    *value = x;
    return count;
}

/*
 * Parses a number at *pp: -?digits(.digits)?([eE][+-]?digits)?, with leading zeros only when
 * zeros_ok (JSON forbids them). Returns 1 with *iv for an integer literal (no fraction or
 * exponent) that fits in int64, unless want_double; 2 with *dv for a double; 0 to decline.
 * *pp ends after the number.
 */
static int parse_number_ex(const char **pp, const char *end, int want_double, int zeros_ok,
                           int64_t *iv, double *dv) {
    const char *start = *pp, *p = start;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        if (++p >= end) return 0;
    }
    if (!is_digit(*p)) return 0;
    uint64_t man = 0;
    int sig = 0;         /* significant digits in man: none before the first non-zero one */
    int truncated = 0;   /* a non-zero digit was dropped (only 19 significant digits fit) */
    int64_t exp10 = 0;
    int int_digits = 0;  /* digits of the integer part, leading zeros excluded */
    if (!zeros_ok && *p == '0') {
        p++;
        if (p < end && is_digit(*p)) return 0; /* leading zero */
    } else {
        while (p < end && *p == '0') p++; /* leading zeros: not significant */
        while (sig + 8 <= 19 && p + 8 <= end) { /* up to 8 digits a step */
            uint64_t run;
            int count = digit_run8(p, &run);
            man = man * digit_scale[count] + run;
            sig += count;
            int_digits += count;
            p += count;
            if (count < 8) break;
        }
        while (p < end && is_digit(*p)) {
            if (sig < 19) {
                man = man * 10 + (uint64_t)(*p - '0');
                sig++;
            } else {
                exp10++;
                truncated |= *p != '0';
            }
            int_digits++;
            p++;
        }
    }
    int integral = 1;
    if (p < end && *p == '.') {
        integral = 0;
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        if (sig == 0) { /* zeros after the point before the first significant digit */
            while (p < end && *p == '0') {
                exp10--;
                p++;
            }
        }
        while (sig + 8 <= 19 && p + 8 <= end) { /* up to 8 digits a step */
            uint64_t run;
            int count = digit_run8(p, &run);
            man = man * digit_scale[count] + run;
            sig += count;
            exp10 -= count;
            p += count;
            if (count < 8) break;
        }
        while (p < end && is_digit(*p)) {
            if (sig < 19) {
                man = man * 10 + (uint64_t)(*p - '0');
                sig++;
                exp10--;
            } else {
                truncated |= *p != '0';
            }
            p++;
        }
    }
    int64_t e_part = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        int e_neg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            e_neg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p)) return 0;
        while (p < end && is_digit(*p)) {
            if (e_part < 100000) e_part = e_part * 10 + (*p - '0');
            p++;
        }
        if (e_neg) e_part = -e_part;
        if (e_part > 308) return 0; /* Arrow rejects some of these ("0e309") */
        exp10 += e_part;
    }
    *pp = p;
    if (integral && !want_double) {
        if (int_digits > 19) return 0; /* Arrow makes it a double: let it */
        if (neg) {
            if (man == 0) return 0; /* "-0": -0.0 if the column becomes double */
            if (man > (uint64_t)INT64_MAX + 1) return 0;
            *iv = (int64_t)(0 - man);
        } else {
            if (man > (uint64_t)INT64_MAX) return 0;
            *iv = (int64_t)man;
        }
        return 1;
    }
    if (man == 0) { /* every digit was a zero (a non-zero one is never dropped first) */
        *dv = neg ? -0.0 : 0.0;
        return 2;
    }
    if (!truncated && man <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        /* Clinger's fast path: both operands are exact doubles, so one correctly rounded
           multiplication or division gives the correctly rounded result */
        double d = (double)man;
        d = exp10 < 0 ? d / exact_pow10[-exp10] : d * exact_pow10[exp10];
        *dv = neg ? -d : d;
        return 2;
    }
    if (!truncated && powers_ready && eisel_lemire(man, exp10, neg, dv)) return 2;
    return slow_double(start, p, dv) ? 2 : 0;
}

/* A JSON number (no leading zeros). */
static inline int parse_number(const char **pp, const char *end, int want_double, int64_t *iv,
                               double *dv) {
    return parse_number_ex(pp, end, want_double, 0, iv, dv);
}

/* Reads the table of set_powers(): POW_COUNT (low, high) pairs of little-endian words. */
static void load_powers(const uint8_t *b) {
    for (int i = 0; i < POW_COUNT; i++) {
        uint64_t lo = 0, hi = 0;
        for (int k = 7; k >= 0; k--) {
            lo = (lo << 8) | b[16 * i + k];
            hi = (hi << 8) | b[16 * i + 8 + k];
        }
        pow10_lo[i] = lo;
        pow10_hi[i] = hi;
    }
    powers_ready = 1;
}

static void init_numbers(void) {
#ifdef HAVE_STRTOD_L
    if (c_locale == (locale_t)0) c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
#endif
}

#endif
