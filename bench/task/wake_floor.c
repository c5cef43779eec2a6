/* B9's floor for waking a sleeping vCPU: two threads pinned to CPUs 0 and 1 take turns, each
 * sleeping in the kernel until the other wakes it, with no runtime at all. Prints
 * "workload liburing ns_per_op" (a round trip: two wake-ups) for
 *   cross_vcpu_asleep  each thread waits in io_uring_enter on its own ring (the flags gluon's
 *                      engine prefers) for a read of its eventfd, and the other wakes it by
 *                      writing to that eventfd: how gluon's io_uring engine is woken;
 *   wake_msg_ring      the same rings, woken by an IORING_OP_MSG_RING from the other's ring
 *                      instead (no eventfd): what that opcode would save.
 * Every wake-up is checked (the completion's user data). --quick runs 1/5. */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum { k_eventfd_tag = 1, k_msg_tag = 2 };

struct side {
    struct io_uring ring;
    int efd;
    uint64_t buf;
};

static struct side g_side[2];
static int g_msg_ring; /* 0: eventfd, 1: MSG_RING */
static long g_n;
static volatile int g_ready;

static void fail(const char* what) {
    fprintf(stderr, "wake_floor: %s\n", what);
    exit(1);
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0) fail("cannot pin to CPUs 0 and 1");
}

static void arm_read(struct side* s) {
    struct io_uring_sqe* sqe = io_uring_get_sqe(&s->ring);
    io_uring_prep_read(sqe, s->efd, &s->buf, sizeof s->buf, 0);
    io_uring_sqe_set_data64(sqe, k_eventfd_tag);
}

static void setup(struct side* s) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(64, &s->ring, &p) < 0) fail("io_uring unavailable");
    (void)io_uring_register_ring_fd(&s->ring);
    s->efd = eventfd(0, EFD_CLOEXEC);
    if (s->efd < 0) fail("eventfd");
    if (!g_msg_ring) arm_read(s);
}

/* Sleeps until the other side's wake-up arrives. */
static void sleep_until_woken(struct side* s) {
    struct io_uring_cqe* cqe;
    int r;
    while ((r = io_uring_submit_and_wait(&s->ring, 1)) < 0 || io_uring_peek_cqe(&s->ring, &cqe) != 0)
        if (r < 0 && r != -EINTR) fail("io_uring_enter");
    const uint64_t want = g_msg_ring ? k_msg_tag : k_eventfd_tag;
    if (cqe->user_data != want || cqe->res < 0) fail("unexpected completion");
    io_uring_cqe_seen(&s->ring, cqe);
    if (!g_msg_ring) arm_read(s);
}

static void wake(struct side* from, struct side* to) {
    if (!g_msg_ring) {
        uint64_t one = 1;
        if (write(to->efd, &one, sizeof one) != sizeof one) fail("eventfd write");
        return;
    }
    struct io_uring_sqe* sqe = io_uring_get_sqe(&from->ring);
    io_uring_prep_msg_ring(sqe, to->ring.ring_fd, 0, k_msg_tag, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS; /* no completion on the sender's ring */
    if (io_uring_submit(&from->ring) != 1) fail("MSG_RING submit");
}

static void* peer(void* arg) {
    (void)arg;
    pin(1);
    setup(&g_side[1]);
    __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
    for (long i = 0; i < g_n; ++i) {
        sleep_until_woken(&g_side[1]);
        wake(&g_side[1], &g_side[0]);
    }
    return NULL;
}

static double round_trip_ns(int msg_ring, long n) {
    g_msg_ring = msg_ring;
    g_n = n;
    g_ready = 0;
    pin(0);
    setup(&g_side[0]);
    pthread_t t;
    if (pthread_create(&t, NULL, peer, NULL) != 0) fail("pthread_create");
    while (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) {}
    const long t0 = now_ns();
    for (long i = 0; i < n; ++i) {
        wake(&g_side[0], &g_side[1]);
        sleep_until_woken(&g_side[0]);
    }
    const long t1 = now_ns();
    pthread_join(t, NULL);
    for (int i = 0; i < 2; ++i) {
        io_uring_queue_exit(&g_side[i].ring);
        close(g_side[i].efd);
    }
    return (double)(t1 - t0) / (double)n;
}

int main(int argc, char** argv) {
    long n = 10000;
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) n /= 5;
    printf("cross_vcpu_asleep liburing %.2f ns_per_op\n", round_trip_ns(0, n));
    printf("wake_msg_ring liburing %.2f ns_per_op\n", round_trip_ns(1, n));
    return 0;
}
