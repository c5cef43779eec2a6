/* B9's floor: the io_uring nop round trip with no runtime at all (liburing, the ring set up with
 * the flags gluon's engine prefers and its fd registered, as gluon's engine does). Prints
 * "workload liburing ns_per_op". --quick runs 1/5. */
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void setup(struct io_uring* ring) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(1024, ring, &p) < 0) {
        memset(&p, 0, sizeof p);
        if (io_uring_queue_init_params(1024, ring, &p) < 0) {
            fprintf(stderr, "uring_floor: io_uring unavailable\n");
            exit(1);
        }
    }
    (void)io_uring_register_ring_fd(ring); /* no fd lookup per io_uring_enter */
}

/* n nops, `batch` in flight per submission; returns ops done. Fails on any bad completion. */
static long run(struct io_uring* ring, long n, int batch) {
    long done = 0;
    while (done < n) {
        for (int i = 0; i < batch; ++i) io_uring_prep_nop(io_uring_get_sqe(ring));
        if (io_uring_submit_and_wait(ring, (unsigned)batch) < 0) exit(1);
        struct io_uring_cqe* cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(ring, head, cqe) {
            if (cqe->res != 0) {
                fprintf(stderr, "uring_floor: nop failed: %d\n", cqe->res);
                exit(1);
            }
            ++seen;
        }
        io_uring_cq_advance(ring, seen);
        while (seen < (unsigned)batch) { /* DEFER_TASKRUN: all arrive with submit_and_wait */
            struct io_uring_cqe* c;
            if (io_uring_wait_cqe(ring, &c) < 0 || c->res != 0) exit(1);
            io_uring_cqe_seen(ring, c);
            ++seen;
        }
        done += batch;
    }
    return done;
}

int main(int argc, char** argv) {
    long scale = (argc > 1 && strcmp(argv[1], "--quick") == 0) ? 1 : 5;
    struct io_uring ring;
    setup(&ring);
    const int batches[2] = {1, 32};
    const char* names[2] = {"nop_b1", "nop_b32"};
    const long counts[2] = {5000000, 20000000};
    for (int k = 0; k < 2; ++k) {
        long n = counts[k] * scale / 5;
        run(&ring, n / 10, batches[k]);
        long t0 = now_ns();
        long ops = run(&ring, n, batches[k]);
        printf("%s liburing %.2f ns_per_op\n", names[k], (double)(now_ns() - t0) / (double)ops);
        fflush(stdout);
    }
    io_uring_queue_exit(&ring);
    return 0;
}
