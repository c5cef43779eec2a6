/* The floor of bench/run redis on io_uring: the same load as redis_load.cc (N connections, one
 * GET or SET of a SIZE-byte value in flight on each, every reply checked byte for byte) with no
 * runtime and no client library. Each reply's arrival queues the connection's next send and
 * receive; one io_uring_enter submits what the last batch of completions queued and waits for
 * the next. The ring has the flags gluon's engine prefers and its fd registered. With
 * --multishot, each connection keeps one multishot receive armed that takes its buffers from a
 * provided-buffer ring, so a reply costs no new receive request.
 *
 *   uring_floor --port P [--conns 50] [--op get|set] [--size 64] [--seconds 5] [--warmup 1]
 *               [--multishot]
 *
 * Prints {"calls": N, "errors": E, "wall_s": S, "cpu_s": C, "calls_per_s": R} like the other
 * generators: C is this process's CPU time over the measured window. */
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    char cmd[256];
    size_t cmd_len;
    char rbuf[512];
    size_t rlen;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void die(const char* what) {
    fprintf(stderr, "uring_floor: %s\n", what);
    exit(1);
}

static size_t resp_set(char* out, size_t cap, const char* key, const char* value, size_t size) {
    int n = snprintf(out, cap, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(key), key, size);
    if (n < 0 || (size_t)n + size + 2 > cap) die("command too long");
    memcpy(out + n, value, size);
    memcpy(out + n + size, "\r\n", 2);
    return (size_t)n + size + 2;
}

static size_t resp_get(char* out, size_t cap, const char* key) {
    int n = snprintf(out, cap, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
    if (n < 0 || (size_t)n >= cap) die("command too long");
    return (size_t)n;
}

static void write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) die("write failed");
        p += w;
        n -= (size_t)w;
    }
}

static void read_exact(int fd, char* p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) die("read failed");
        p += r;
        n -= (size_t)r;
    }
}

static struct io_uring ring;
static int multishot;

/* --multishot: the provided buffers, group 0. */
enum { k_bufs = 1024, k_buf_size = 512 };
static struct io_uring_buf_ring* br;
static char* bufs;

static void give_back(unsigned bid) {
    io_uring_buf_ring_add(br, bufs + (size_t)bid * k_buf_size, k_buf_size, (unsigned short)bid,
                          io_uring_buf_ring_mask(k_bufs), 0);
    io_uring_buf_ring_advance(br, 1);
}

static void queue_send(struct conn* k, unsigned long i) {
    struct io_uring_sqe* s = io_uring_get_sqe(&ring);
    if (!s) die("submission queue full");
    io_uring_prep_send(s, k->fd, k->cmd, k->cmd_len, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, i << 1);
}

static void queue_recv(struct conn* k, unsigned long i) {
    struct io_uring_sqe* s = io_uring_get_sqe(&ring);
    if (!s) die("submission queue full");
    if (multishot) {
        io_uring_prep_recv_multishot(s, k->fd, NULL, 0, 0);
        s->flags |= IOSQE_BUFFER_SELECT;
        s->buf_group = 0;
    } else {
        io_uring_prep_recv(s, k->fd, k->rbuf + k->rlen, sizeof k->rbuf - k->rlen, 0);
    }
    io_uring_sqe_set_data64(s, (i << 1) | 1);
}

int main(int argc, char** argv) {
    int port = 0, conns = 50, set_op = 0;
    size_t size = 64;
    double secs = 5, warmup = 1;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--multishot")) {
            multishot = 1;
            --i;
        } else if (i + 1 >= argc) return 2;
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns")) conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--op")) set_op = !strcmp(argv[i + 1], "set");
        else if (!strcmp(argv[i], "--size")) size = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seconds")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(argv[i + 1]);
        else return 2;
    }
    if (!port || conns < 1 || size < 1 || size > 128) {
        fprintf(stderr, "usage: uring_floor --port P [--conns N] [--op get|set] [--size 1..128] [--seconds S] [--warmup S]\n");
        return 2;
    }
    char value[128];
    memset(value, 'v', size);
    /* The expected reply: +OK for SET, the value as a bulk string for GET. */
    char want[256];
    size_t want_len;
    if (set_op) {
        memcpy(want, "+OK\r\n", 5);
        want_len = 5;
    } else {
        int n = snprintf(want, sizeof want, "$%zu\r\n", size);
        memcpy(want + n, value, size);
        memcpy(want + n + size, "\r\n", 2);
        want_len = (size_t)n + size + 2;
    }

    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(4096, &ring, &p) < 0) die("io_uring unavailable");
    (void)io_uring_register_ring_fd(&ring);
    if (multishot) {
        if (posix_memalign((void**)&br, 4096, k_bufs * sizeof(struct io_uring_buf)) != 0) die("out of memory");
        bufs = malloc((size_t)k_bufs * k_buf_size);
        io_uring_buf_ring_init(br);
        struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = k_bufs, .bgid = 0};
        if (io_uring_register_buf_ring(&ring, &reg, 0) != 0) die("cannot register a buffer ring");
        for (unsigned b = 0; b < k_bufs; ++b) give_back(b);
    }

    struct conn* ks = calloc((size_t)conns, sizeof *ks);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < conns; ++i) {
        struct conn* k = &ks[i];
        k->fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(k->fd, (struct sockaddr*)&a, sizeof a) != 0) die("connect failed");
        char key[32];
        snprintf(key, sizeof key, "bench:floor:%d", i);
        /* The key's value, set before the clock starts (blocking I/O for the setup). */
        char setup[256], ok[5];
        write_all(k->fd, setup, resp_set(setup, sizeof setup, key, value, size));
        read_exact(k->fd, ok, 5);
        if (memcmp(ok, "+OK\r\n", 5) != 0) die("setup SET failed");
        k->cmd_len = set_op ? resp_set(k->cmd, sizeof k->cmd, key, value, size) : resp_get(k->cmd, sizeof k->cmd, key);
        queue_send(k, (unsigned long)i);
        queue_recv(k, (unsigned long)i);
    }

    double start = now_s(), measure = start + warmup, end = measure + secs, cpu0 = -1;
    unsigned long calls = 0, errors = 0;
    for (;;) {
        if (io_uring_submit_and_wait(&ring, 1) < 0) die("io_uring_enter failed");
        double t = now_s();
        if (t >= end) break;
        int counting = t >= measure;
        if (counting && cpu0 < 0) cpu0 = cpu_s();
        struct io_uring_cqe* cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            unsigned long i = cqe->user_data >> 1;
            struct conn* k = &ks[i];
            if (!(cqe->user_data & 1)) { /* a send: loopback takes a whole command at once */
                if (cqe->res != (int)k->cmd_len) die("short or failed send");
                continue;
            }
            if (cqe->res <= 0) die("receive failed or connection closed");
            if (multishot) {
                if (!(cqe->flags & IORING_CQE_F_BUFFER)) die("a receive without a buffer");
                unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
                if (k->rlen + (size_t)cqe->res > sizeof k->rbuf) die("reply too long");
                memcpy(k->rbuf + k->rlen, bufs + (size_t)bid * k_buf_size, (size_t)cqe->res);
                give_back(bid);
            }
            k->rlen += (size_t)cqe->res;
            const int rearm = !multishot || !(cqe->flags & IORING_CQE_F_MORE);
            if (k->rlen < want_len) { /* a partial reply: take the rest */
                if (rearm) queue_recv(k, i);
                continue;
            }
            if (k->rlen != want_len || memcmp(k->rbuf, want, want_len) != 0) ++errors;
            k->rlen = 0;
            if (counting) ++calls;
            queue_send(k, i);
            if (rearm) queue_recv(k, i);
        }
        io_uring_cq_advance(&ring, seen);
    }
    double wall = now_s() - measure, cpu = cpu_s() - cpu0;
    printf("{\"calls\": %lu, \"errors\": %lu, \"wall_s\": %.3f, \"cpu_s\": %.3f, \"calls_per_s\": %.1f}\n", calls,
           errors, wall, cpu, (double)calls / wall);
    return errors ? 1 : 0;
}
