/*
 * Single-threaded epoll TCP echo server: the plain-C reference peer.
 *
 *   echo_server --port N      (N = 0 picks a free port)
 *
 * Prints "listening <port>" on stdout once ready; exits with status 0 on
 * SIGTERM / SIGINT.
 *
 * Triggering: edge-triggered by default; build with -DECHO_EDGE_TRIGGERED=0
 * for the level-triggered variant (same read/write logic).
 *
 * Both variants drain a readable socket per wakeup (64 KiB reads until a
 * short read) instead of doing one read per event: that, not the trigger
 * mode, is what matters.  A level-triggered version doing one read per
 * event managed ~2.3-2.5M msgs/s streaming against ~4.7-6.7M for the
 * draining one, because the server sleeps more often and each wakeup costs
 * the sender a cross-CPU kick.  Edge-triggered is the default because, at
 * equal throughput, it needs no epoll_ctl after registration (each
 * connection is registered once with EPOLLIN|EPOLLOUT|EPOLLET), whereas
 * level-triggered needs two epoll_ctl(MOD) calls per blocked write (switch
 * to EPOLLOUT and back).  The usual extra EAGAIN read per wakeup of edge
 * triggering is avoided: a short read means the receive queue was empty,
 * and any later arrival raises a new edge.
 *
 * Measured on a 2-vCPU VM with notable steal time (server and client each
 * pinned to one CPU), 512-byte messages, 5 s, messages per server CPU
 * second (the steadiest metric there):
 *   streaming, 4 conns:     ET 6.1-7.2M, LT 6.1-7.3M
 *   ping-pong, 1000 conns:  ET 178-197k, LT 168-193k
 * i.e. equal within noise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef ECHO_EDGE_TRIGGERED
#define ECHO_EDGE_TRIGGERED 1
#endif

#define BUF_SIZE (64 * 1024)
#define MAX_EVENTS 256

struct conn {
    int fd;
    uint32_t off; /* unsent output is buf[off, len) */
    uint32_t len;
    char buf[BUF_SIZE];
};

static volatile sig_atomic_t g_stop;
static struct conn **g_conns; /* indexed by fd, for cleanup on exit */
static size_t g_conns_cap;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void conn_close(struct conn *c) {
    g_conns[c->fd] = NULL;
    close(c->fd); /* also removes it from the epoll set */
    free(c);
}

/* Writes out the pending output.  Returns -1 on a fatal error, else 0
 * (c->len != 0 afterwards means the socket buffer is full). */
static int conn_flush(struct conn *c) {
    while (c->off < c->len) {
        ssize_t w = write(c->fd, c->buf + c->off, c->len - c->off);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return 0;
            return -1;
        }
        c->off += (uint32_t)w;
    }
    c->off = c->len = 0;
    return 0;
}

/* Echoes n freshly read bytes; whatever the socket does not take stays in
 * the buffer.  Returns -1 on a fatal error. */
static int conn_echo(struct conn *c, size_t n) {
    c->off = 0;
    c->len = (uint32_t)n;
    return conn_flush(c);
}

#if !ECHO_EDGE_TRIGGERED
static int conn_want(int ep, struct conn *c, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}
#endif

/* Errors and hangups surface through read/write, so the event mask is not
 * needed. */
static void conn_event(int ep, struct conn *c) {
    (void)ep;
    if (c->len != 0) {
        if (conn_flush(c) < 0) goto drop;
        if (c->len != 0) return; /* still full: wait for EPOLLOUT */
#if !ECHO_EDGE_TRIGGERED
        if (conn_want(ep, c, EPOLLIN) < 0) goto drop;
#endif
    }
    for (;;) {
        ssize_t n = read(c->fd, c->buf, BUF_SIZE);
        if (n > 0) {
            if (conn_echo(c, (size_t)n) < 0) goto drop;
            if (c->len != 0) {
                /* Output blocked: stop reading.  Unread input stays queued
                 * in the kernel until EPOLLOUT brings us back here. */
#if !ECHO_EDGE_TRIGGERED
                if (conn_want(ep, c, EPOLLOUT) < 0) goto drop;
#endif
                return;
            }
            if (n < BUF_SIZE) return; /* drained; new data raises an event */
            continue;
        }
        if (n == 0) goto drop;
        if (errno == EAGAIN) return;
        if (errno == EINTR) continue;
        goto drop;
    }
drop:
    conn_close(c);
}

static void accept_all(int ep, int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN) perror("accept4");
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if ((size_t)fd >= g_conns_cap) {
            size_t cap = g_conns_cap ? g_conns_cap : 1024;
            while (cap <= (size_t)fd) cap *= 2;
            struct conn **p = realloc(g_conns, cap * sizeof *p);
            if (!p) {
                close(fd);
                continue;
            }
            memset(p + g_conns_cap, 0, (cap - g_conns_cap) * sizeof *p);
            g_conns = p;
            g_conns_cap = cap;
        }
        struct conn *c = malloc(sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->off = c->len = 0;
#if ECHO_EDGE_TRIGGERED
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET,
                                 .data.ptr = c};
#else
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
#endif
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            perror("epoll_ctl");
            close(fd);
            free(c);
            continue;
        }
        g_conns[fd] = c;
    }
}

int main(int argc, char **argv) {
    long port = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            port = strtol(argv[++i], &end, 10);
            if (*end != '\0' || port < 0 || port > 65535) port = -2;
        } else {
            port = -2;
            break;
        }
    }
    if (port < 0) {
        fprintf(stderr, "usage: %s --port N   (0 = pick a free port)\n",
                argv[0]);
        return 2;
    }

    /* SIGINT/SIGTERM are blocked except inside epoll_pwait, so a signal can
     * never slip in between the g_stop check and the wait. */
    sigset_t block, waitmask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &waitmask);
    sigdelset(&waitmask, SIGINT);
    sigdelset(&waitmask, SIGTERM);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        perror("socket");
        return 1;
    }
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons((uint16_t)port);
    socklen_t alen = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        listen(lfd, SOMAXCONN) < 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen) < 0) {
        perror("bind/listen");
        return 1;
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        perror("epoll_create1");
        return 1;
    }
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0) {
        perror("epoll_ctl");
        return 1;
    }

    printf("listening %u\n", (unsigned)ntohs(addr.sin_port));
    fflush(stdout);

    struct epoll_event events[MAX_EVENTS];
    while (!g_stop) {
        int n = epoll_pwait(ep, events, MAX_EVENTS, -1, &waitmask);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_pwait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL)
                accept_all(ep, lfd);
            else
                conn_event(ep, c);
        }
    }

    for (size_t fd = 0; fd < g_conns_cap; fd++)
        if (g_conns[fd]) conn_close(g_conns[fd]);
    free(g_conns);
    close(ep);
    close(lfd);
    return 0;
}
