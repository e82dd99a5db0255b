/* Helpers for the tests written as ggml programs in C (test-ggml-*.c): computing a graph
 * with a chosen thread count and scheduler, and a failure counter. */
#pragma once

#include "ggml.h"
#include "ggml-cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int g_failures = 0;
static int g_checks = 0;

#define EXPECT(cond, ...)                                         \
    do {                                                          \
        ++g_checks;                                               \
        if (!(cond)) {                                            \
            ++g_failures;                                         \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                  \
            printf("\n");                                         \
        }                                                         \
    } while (0)

/* The ways every test runs its graphs: 1, 2 and 4 threads on the DAG scheduler, 2 and 4
 * on the barrier one. */
enum { N_RUNS = 5 };
static const int RUN_THREADS[N_RUNS] = {1, 2, 4, 2, 4};
static const enum ggml_sched_mode RUN_MODE[N_RUNS] = {GGML_SCHED_DAG, GGML_SCHED_DAG, GGML_SCHED_DAG, GGML_SCHED_BARRIER,
                                                      GGML_SCHED_BARRIER};

/* ggml_graph_compute with a work buffer of its own, so the context arena does not grow. */
static enum ggml_status compute_graph(struct ggml_cgraph * gf, int run) {
    struct ggml_cplan plan;
    enum ggml_status st;
    ggml_cpu_set_sched_mode(RUN_MODE[run]);
    plan = ggml_graph_plan(gf, RUN_THREADS[run], NULL);
    plan.work_data = plan.work_size ? (uint8_t *) malloc(plan.work_size) : NULL;
    st = ggml_graph_compute(gf, &plan);
    free(plan.work_data);
    ggml_cpu_set_sched_mode(GGML_SCHED_DAG);
    return st;
}

static struct ggml_context * new_context(size_t mem_size, bool no_alloc) {
    struct ggml_init_params p;
    p.mem_size = mem_size;
    p.mem_buffer = NULL;
    p.no_alloc = no_alloc;
    return ggml_init(p);
}

/* A deterministic value in [-1, 1). */
static float value_at(int seed, int i) { return (float) (((seed * 131 + i * 37) % 64) - 32) / 32.0f; }

static void fill_f32(struct ggml_tensor * t, int seed) {
    int i;
    for (i = 0; i < (int) ggml_nelements(t); ++i) ggml_set_f32_1d(t, i, value_at(seed, i));
}

static int close_enough(float got, float want) { return fabsf(got - want) <= 1e-4f * (1.0f + fabsf(want)); }

static int report(const char * name) {
    printf("%s: %d checks, %d failed\n", name, g_checks, g_failures);
    return g_failures == 0 ? 0 : 1;
}
