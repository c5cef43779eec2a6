/* B9's floor for waking a sleeping vCPU: two threads pinned to CPUs 0 and 1 take turns, each
 * sleeping in the kernel until the other wakes it, with no runtime at all. Prints
 * "workload liburing ns_per_op" (a round trip: two wake-ups) for
 *   cross_vcpu_asleep  each thread waits in io_uring_enter on its own ring (the flags gluon's
 *                      engine prefers) for a read of its eventfd, and the other wakes it by
 *                      writing to that eventfd: how gluon's io_uring engine is woken;
 *   wake_msg_ring      the same rings, woken by an IORING_OP_MSG_RING from the other's ring
 *                      instead (no eventfd): what that opcode would save;
 *   wake_futex         the same rings, each waiting in an IORING_OP_FUTEX_WAIT (kernel 6.7) on
 *                      a word of its own, and the other sets the word and wakes it with the
 *                      futex system call: what a plain thread would do instead of the eventfd;
 *   wake_futex_sqe     the same wait, woken by an IORING_OP_FUTEX_WAKE from the other's ring.
 * (Debian 12's liburing has no futex helpers: the SQEs are filled by hand.)
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
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { k_eventfd_tag = 1, k_msg_tag = 2, k_futex_tag = 3 };
enum mode { by_eventfd, by_msg_ring, by_futex, by_futex_sqe };

/* Not in Debian 12's headers (kernel 6.7's io_uring futex opcodes and futex2 flags). */
enum { k_op_futex_wait = 51, k_op_futex_wake = 52, k_futex2_u32 = 0x02, k_futex2_private = 128 };

struct side {
    struct io_uring ring;
    int efd;
    uint64_t buf;
    uint32_t word; /* futex modes: 1 once woken */
};

static struct side g_side[2];
static enum mode g_mode;
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

/* A futex SQE on word: wait while it holds val, or wake one waiter (val: how many). */
static void prep_futex(struct io_uring_sqe* sqe, int op, uint32_t* word, uint64_t val) {
    io_uring_prep_rw(op, sqe, k_futex2_u32 | k_futex2_private, word, 0, 0);
    sqe->addr2 = val;
    sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
}

/* Queues a futex wait on s->word for as long as it holds 0. */
static void arm_futex_wait(struct side* s) {
    struct io_uring_sqe* sqe = io_uring_get_sqe(&s->ring);
    prep_futex(sqe, k_op_futex_wait, &s->word, 0);
    io_uring_sqe_set_data64(sqe, k_futex_tag);
}

/* Queues what the next wake-up completes. */
static void arm(struct side* s) {
    if (g_mode == by_msg_ring) return; /* the message is a completion of its own */
    if (g_mode != by_eventfd) {
        __atomic_store_n(&s->word, 0, __ATOMIC_RELAXED);
        arm_futex_wait(s);
        return;
    }
    struct io_uring_sqe* sqe = io_uring_get_sqe(&s->ring);
    io_uring_prep_read(sqe, s->efd, &s->buf, sizeof s->buf, 0);
    io_uring_sqe_set_data64(sqe, k_eventfd_tag);
}

/* Whether the kernel has io_uring's futex opcodes (6.7 and later). */
static int futex_ops_work(void) {
    struct io_uring_probe* p = io_uring_get_probe();
    if (!p) return 0;
    const int ok = io_uring_opcode_supported(p, k_op_futex_wait) && io_uring_opcode_supported(p, k_op_futex_wake);
    io_uring_free_probe(p);
    return ok;
}

static void setup(struct side* s) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(64, &s->ring, &p) < 0) fail("io_uring unavailable");
    (void)io_uring_register_ring_fd(&s->ring);
    s->efd = eventfd(0, EFD_CLOEXEC);
    if (s->efd < 0) fail("eventfd");
    arm(s);
}

/* Sleeps until the other side's wake-up arrives. */
static void sleep_until_woken(struct side* s) {
    const uint64_t want = g_mode == by_eventfd ? k_eventfd_tag : g_mode == by_msg_ring ? k_msg_tag : k_futex_tag;
    for (;;) {
        struct io_uring_cqe* cqe;
        int r;
        while ((r = io_uring_submit_and_wait(&s->ring, 1)) < 0 || io_uring_peek_cqe(&s->ring, &cqe) != 0)
            if (r < 0 && r != -EINTR) fail("io_uring_enter");
        /* A futex wait finds the word set already (the wake-up came first): -EAGAIN, woken all the same. */
        if (cqe->user_data != want || (cqe->res < 0 && !(want == k_futex_tag && cqe->res == -EAGAIN)))
            fail("unexpected completion");
        io_uring_cqe_seen(&s->ring, cqe);
        /* A futex wake-up the other side made late, after this side had found the word set
         * (-EAGAIN) and waited again, wakes that next wait with the word still 0: wait on. The
         * word is not reset here, or a wake-up landing in between would be lost. */
        if (want == k_futex_tag && !__atomic_load_n(&s->word, __ATOMIC_ACQUIRE)) {
            arm_futex_wait(s);
            continue;
        }
        break;
    }
    arm(s);
}

static void wake(struct side* from, struct side* to) {
    if (g_mode == by_eventfd) {
        uint64_t one = 1;
        if (write(to->efd, &one, sizeof one) != sizeof one) fail("eventfd write");
        return;
    }
    if (g_mode == by_futex) {
        __atomic_store_n(&to->word, 1, __ATOMIC_RELEASE);
        if (syscall(SYS_futex, &to->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0) fail("futex wake");
        return;
    }
    struct io_uring_sqe* sqe = io_uring_get_sqe(&from->ring);
    if (g_mode == by_msg_ring) {
        io_uring_prep_msg_ring(sqe, to->ring.ring_fd, 0, k_msg_tag, 0);
    } else {
        __atomic_store_n(&to->word, 1, __ATOMIC_RELEASE);
        prep_futex(sqe, k_op_futex_wake, &to->word, 1);
    }
    io_uring_sqe_set_data64(sqe, 0); /* a failure would come back on this ring: not a wake-up */
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS; /* no completion on the sender's ring */
    if (io_uring_submit(&from->ring) < 1) fail("wake submit");
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

static double round_trip_ns(enum mode m, long n) {
    g_mode = m;
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
    printf("cross_vcpu_asleep liburing %.2f ns_per_op\n", round_trip_ns(by_eventfd, n));
    printf("wake_msg_ring liburing %.2f ns_per_op\n", round_trip_ns(by_msg_ring, n));
    if (futex_ops_work()) {
        printf("wake_futex liburing %.2f ns_per_op\n", round_trip_ns(by_futex, n));
        printf("wake_futex_sqe liburing %.2f ns_per_op\n", round_trip_ns(by_futex_sqe, n));
    }
    return 0;
}
