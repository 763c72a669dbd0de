// dequant_ref: writes pseudo-random blocks of every ggml type dspark reads, dequantized by
// ggml's own dequantize_row_* (ggml-quants.c of the llama.cpp tree it is built against), so
// dspark's dequantization can be compared with the reference implementation's bytes.
// Built and run by scripts/quant-fixtures.sh; never in CI.
//
// With "--dequant ID" it instead decodes the blocks of ggml type ID read from standard input
// and writes their float32 values (LE) to standard output (the fixtures' tensors).
//
// Output, one file per type in the directory given as argv[1], named after the type:
//   u32 ggml type id, u32 block count, the blocks' bytes, then the float32 values (all LE).
// Most blocks have finite fp16 scales (a random sign, exponent and mantissa); every eighth
// keeps the random bytes (Inf and NaN scales included).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-quants.h"

// The few ggml.c symbols ggml-quants.c refers to in code dequantization never reaches.
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "abort %s:%d %s\n", file, line, fmt); abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void)type; return "?"; }

static uint64_t rng;
static uint64_t next(void) { // splitmix64
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef void (*dequant_fn)(const void *, float *, int64_t);

struct qtype {
    const char * name; int id; int qk; int size; dequant_fn fn; int nblocks; int f16[2];
};

#define FN(f) ((dequant_fn)(f))
static const struct qtype types[] = {
    {"Q4_0", 2, 32, 18, FN(dequantize_row_q4_0), 64, {0, -1}},
    {"Q4_1", 3, 32, 20, FN(dequantize_row_q4_1), 64, {0, 2}},
    {"Q5_0", 6, 32, 22, FN(dequantize_row_q5_0), 64, {0, -1}},
    {"Q5_1", 7, 32, 24, FN(dequantize_row_q5_1), 64, {0, 2}},
    {"Q8_0", 8, 32, 34, FN(dequantize_row_q8_0), 64, {0, -1}},
    {"Q2_K", 10, 256, 84, FN(dequantize_row_q2_K), 16, {80, 82}},
    {"Q3_K", 11, 256, 110, FN(dequantize_row_q3_K), 16, {108, -1}},
    {"Q4_K", 12, 256, 144, FN(dequantize_row_q4_K), 16, {0, 2}},
    {"Q5_K", 13, 256, 176, FN(dequantize_row_q5_K), 16, {0, 2}},
    {"Q6_K", 14, 256, 210, FN(dequantize_row_q6_K), 16, {208, -1}},
    {"IQ4_NL", 20, 32, 18, FN(dequantize_row_iq4_nl), 64, {0, -1}},
    {"IQ4_XS", 23, 256, 136, FN(dequantize_row_iq4_xs), 16, {0, -1}},
    {"MXFP4", 39, 32, 17, FN(dequantize_row_mxfp4), 64, {-1, -1}},
};

static void put32(FILE * f, uint32_t v) { uint8_t b[4] = {v, v >> 8, v >> 16, v >> 24}; fwrite(b, 1, 4, f); }

static int dequant_stream(int id) {
    const struct qtype * q = NULL;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) if (types[t].id == id) q = &types[t];
    if (!q) { fprintf(stderr, "dequant_ref: type %d is not one dspark reads\n", id); return 2; }
    size_t cap = 1 << 20, n = 0, r;
    uint8_t * buf = malloc(cap);
    while ((r = fread(buf + n, 1, cap - n, stdin)) > 0) { n += r; if (n == cap) buf = realloc(buf, cap *= 2); }
    if (n % q->size != 0) { fprintf(stderr, "dequant_ref: %zu bytes is not a whole number of %s blocks\n", n, q->name); return 1; }
    size_t nvals = n / q->size * q->qk;
    float * vals = malloc(nvals * sizeof(float));
    q->fn(buf, vals, (int64_t)nvals);
    for (size_t i = 0; i < nvals; i++) { uint32_t u; memcpy(&u, &vals[i], 4); put32(stdout, u); }
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char ** argv) {
    if (argc == 3 && strcmp(argv[1], "--dequant") == 0) return dequant_stream(atoi(argv[2]));
    if (argc != 2) { fprintf(stderr, "usage: dequant_ref OUTDIR | dequant_ref --dequant ID\n"); return 2; }
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        const struct qtype * q = &types[t];
        rng = 0x5eed0000u + (uint64_t)q->id;
        size_t nbytes = (size_t)q->nblocks * q->size, nvals = (size_t)q->nblocks * q->qk;
        uint8_t * blocks = malloc(nbytes);
        float * vals = malloc(nvals * sizeof(float));
        for (size_t i = 0; i < nbytes; i++) blocks[i] = (uint8_t)next();
        for (int b = 0; b < q->nblocks; b++) {
            if (b % 8 == 7) continue; // random scales, Inf and NaN included
            for (int k = 0; k < 2; k++) {
                if (q->f16[k] < 0) continue;
                uint16_t h = (uint16_t)next();
                if ((h & 0x7c00) == 0x7c00) h &= ~0x4000; // a finite exponent
                memcpy(blocks + (size_t)b * q->size + q->f16[k], &h, 2);
            }
        }
        q->fn(blocks, vals, (int64_t)nvals);
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.bin", argv[1], q->name);
        FILE * f = fopen(path, "wb");
        if (!f) { perror(path); return 1; }
        put32(f, (uint32_t)q->id);
        put32(f, (uint32_t)q->nblocks);
        fwrite(blocks, 1, nbytes, f);
        for (size_t i = 0; i < nvals; i++) { uint32_t u; memcpy(&u, &vals[i], 4); put32(f, u); }
        if (fclose(f) != 0) { perror(path); return 1; }
        free(blocks); free(vals);
    }
    return 0;
}
