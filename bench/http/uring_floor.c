/*
 * The io_uring floor of bench/run http: bench/peers/http-c's canned responder (one response for
 * every request, no parsing beyond each request's blank line and "Connection: close") on raw
 * liburing, with no runtime. One multishot accept; a connection's first receive is single-shot
 * (a connection that asks to close after one request never arms more), later ones come from one
 * multishot receive on a provided-buffer ring; the responses to a batch of requests leave in one
 * send; a closing connection's receive is cancelled and its fd closed by linked requests. One
 * io_uring_enter submits what the last batch of completions queued and waits for the next. The
 * ring has the flags gluon's engine prefers and its fd registered.
 *
 *   http_floor --port N [--body BYTES]      (N = 0 picks a free port; body defaults to 13)
 *
 * Prints "listening <port>" once ready; exits on SIGTERM / SIGINT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor.h"

enum { k_bufs = 1024, k_buf_size = 16384, k_in = 16384 };
enum { op_accept, op_recv, op_send, op_close, op_ignore };

struct conn {
    int fd;
    int receiving;   /* a receive is in flight (single-shot or armed multishot) */
    int sending;     /* a send is in flight */
    int closing;     /* 1: close once the in-flight send completes; 2: closing; 3: closed */
    int served;      /* requests answered */
    size_t len;      /* bytes of an incomplete request kept in `in` */
    size_t out_len;  /* bytes queued in `out` (sent from the start) */
    size_t out_cap;
    char* out;
    char in[k_in];
};

static struct io_uring ring;
static struct io_uring_buf_ring* br;
static char* bufs;
static char* response;
static size_t response_len;

static void die(const char* what) {
    fprintf(stderr, "http_floor: %s\n", what);
    exit(1);
}

static struct io_uring_sqe* sqe(void) {
    struct io_uring_sqe* s = io_uring_get_sqe(&ring);
    if (!s) {
        io_uring_submit(&ring);
        s = io_uring_get_sqe(&ring);
        if (!s) die("submission queue full");
    }
    return s;
}

static void tag(struct io_uring_sqe* s, int op, struct conn* c) {
    io_uring_sqe_set_data64(s, (unsigned long long)(uintptr_t)c | (unsigned long long)op);
}

static void give_back(unsigned bid) {
    io_uring_buf_ring_add(br, bufs + (size_t)bid * k_buf_size, k_buf_size, (unsigned short)bid,
                          io_uring_buf_ring_mask(k_bufs), 0);
    io_uring_buf_ring_advance(br, 1);
}

static void queue_recv(struct conn* c) {
    struct io_uring_sqe* s = sqe();
    if (c->served > 0) {
        io_uring_prep_recv_multishot(s, c->fd, NULL, 0, 0);
    } else {
        io_uring_prep_recv(s, c->fd, NULL, 0, 0);
    }
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = 0;
    tag(s, op_recv, c);
    c->receiving = 1;
}

static void queue_send(struct conn* c) {
    struct io_uring_sqe* s = sqe();
    io_uring_prep_send(s, c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    tag(s, op_send, c);
    c->sending = 1;
}

/* Cancels the receive in flight (if any) and closes the fd; the conn is freed once both are done. */
static void queue_close(struct conn* c) {
    struct io_uring_sqe* s = sqe();
    io_uring_prep_cancel_fd(s, c->fd, 0);
    s->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
    tag(s, op_ignore, NULL);
    s = sqe();
    io_uring_prep_close(s, c->fd);
    tag(s, op_close, c);
    c->closing = 2;
}

/* Answers every complete request in p[0..n); keeps an incomplete tail. */
static void serve(struct conn* c, const char* p, size_t n) {
    if (c->len) {
        if (c->len + n > k_in) { c->closing = 1; return; }
        memcpy(c->in + c->len, p, n);
        p = c->in;
        n += c->len;
    }
    size_t pos = 0;
    int close_after = 0;
    for (;;) {
        const char* end = memmem(p + pos, n - pos, "\r\n\r\n", 4);
        if (!end) break;
        size_t req_end = (size_t)(end - p) + 4;
        if (memmem(p + pos, req_end - pos, "Connection: close", 17)) close_after = 1;
        if (c->out_len + response_len > c->out_cap) {
            c->out_cap = (c->out_len + response_len) * 2;
            c->out = realloc(c->out, c->out_cap);
        }
        memcpy(c->out + c->out_len, response, response_len);
        c->out_len += response_len;
        ++c->served;
        pos = req_end;
        if (close_after) break;
    }
    if (pos < n && !close_after) {
        if (n - pos > k_in) { c->closing = 1; return; }
        memmove(c->in, p + pos, n - pos);
    }
    c->len = close_after ? 0 : n - pos;
    if (close_after) c->closing = 1;
}

static void release(struct conn* c) {
    if (c->closing == 3 && !c->receiving) {
        free(c->out);
        free(c);
    }
}

static void after_io(struct conn* c) {
    if (c->closing >= 2) return;
    if (c->out_len && !c->sending) {
        queue_send(c);
        return;
    }
    if (c->sending) return;
    if (c->closing) queue_close(c);
}

static void on_recv(struct conn* c, struct io_uring_cqe* cqe) {
    if (!(cqe->flags & IORING_CQE_F_MORE)) c->receiving = 0;
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (cqe->res > 0 && c->closing < 2) serve(c, bufs + (size_t)bid * k_buf_size, (size_t)cqe->res);
        give_back(bid);
    }
    if (c->closing == 3) { release(c); return; }
    if (cqe->res <= 0 && !(cqe->res == -ENOBUFS && !c->closing) && c->closing < 2) c->closing = 1;
    if (!c->closing && !c->receiving) queue_recv(c);
    after_io(c);
}

static void on_send(struct conn* c, int res) {
    c->sending = 0;
    if (res <= 0) {
        if (c->closing < 2) c->closing = 1;
        c->out_len = 0;
    } else if ((size_t)res < c->out_len) {
        memmove(c->out, c->out + res, c->out_len - (size_t)res);
        c->out_len -= (size_t)res;
    } else {
        c->out_len = 0;
    }
    after_io(c);
}

static void queue_accept(int l) {
    struct io_uring_sqe* s = sqe();
    io_uring_prep_multishot_accept(s, l, NULL, NULL, 0);
    tag(s, op_accept, NULL);
}

int main(int argc, char** argv) {
    int port = 0;
    size_t body = 13;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--body") && i + 1 < argc) body = (size_t)atol(argv[++i]);
        else { fprintf(stderr, "usage: http_floor --port N [--body BYTES]\n"); return 2; }
    }
    response = floor_response(body, &response_len);
    floor_signals();

    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(4096, &ring, &p) < 0) die("io_uring unavailable");
    (void)io_uring_register_ring_fd(&ring);
    if (posix_memalign((void**)&br, 4096, k_bufs * sizeof(struct io_uring_buf)) != 0) die("out of memory");
    bufs = malloc((size_t)k_bufs * k_buf_size);
    io_uring_buf_ring_init(br);
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = k_bufs, .bgid = 0};
    if (io_uring_register_buf_ring(&ring, &reg, 0) != 0) die("cannot register a buffer ring");
    for (unsigned b = 0; b < k_bufs; ++b) give_back(b);

    int l = floor_listen(port, 0), one = 1;
    queue_accept(l);

    struct __kernel_timespec tick = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
    while (!floor_stop) {
        struct io_uring_cqe* cqe;
        int r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &tick, NULL);
        if (r < 0 && r != -ETIME && r != -EINTR) die("io_uring_enter failed");
        unsigned head_i, seen = 0;
        io_uring_for_each_cqe(&ring, head_i, cqe) {
            ++seen;
            unsigned long long u = cqe->user_data;
            struct conn* c = (struct conn*)(uintptr_t)(u & ~7ull);
            switch ((int)(u & 7)) {
            case op_accept:
                if (!(cqe->flags & IORING_CQE_F_MORE)) queue_accept(l);
                if (cqe->res < 0) break;
                c = calloc(1, sizeof *c);
                c->fd = cqe->res;
                setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                queue_recv(c);
                break;
            case op_recv: on_recv(c, cqe); break;
            case op_send: on_send(c, cqe->res); break;
            case op_close:
                c->closing = 3;
                release(c);
                break;
            case op_ignore: break;
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
    return 0;
}
