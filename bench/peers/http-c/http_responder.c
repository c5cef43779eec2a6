/*
 * The floor of the HTTP benchmark: a single-threaded, edge-triggered epoll server that answers
 * every request with one canned response and does no parsing beyond finding each request's
 * blank line (and "Connection: close"). No runtime, no timeouts, no routing, no files: what an
 * HTTP server costs when it does nothing but the system calls.
 *
 *   http_responder --port N [--body BYTES]      (N = 0 picks a free port; body defaults to 13)
 *
 * Prints "listening <port>" once ready; exits on SIGTERM / SIGINT. Pipelined requests are
 * answered in order with one write per batch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../http/floor.h"

struct conn {
    int fd;
    size_t len;
    char in[16384];
};

static char *response;
static size_t response_len;

/* Answers every complete request in c->in; returns -1 if the connection must close. */
static int serve(struct conn *c, char **out, size_t *out_cap) {
    size_t pos = 0, n = 0;
    int close_after = 0;
    for (;;) {
        char *end = memmem(c->in + pos, c->len - pos, "\r\n\r\n", 4);
        if (!end) break;
        size_t req_end = (size_t)(end - c->in) + 4;
        if (memmem(c->in + pos, req_end - pos, "Connection: close", 17)) close_after = 1;
        if ((n + 1) * response_len > *out_cap) {
            *out_cap = (n + 1) * response_len * 2;
            *out = realloc(*out, *out_cap);
        }
        memcpy(*out + n * response_len, response, response_len);
        ++n;
        pos = req_end;
        if (close_after) break;
    }
    memmove(c->in, c->in + pos, c->len - pos);
    c->len -= pos;
    size_t total = n * response_len, done = 0;
    while (done < total) {
        ssize_t w = send(c->fd, *out + done, total - done, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN) continue; /* a floor: spin rather than buffer */
            return -1;
        }
        done += (size_t)w;
    }
    return close_after ? -1 : 0;
}

int main(int argc, char **argv) {
    int port = 0;
    size_t body = 13;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--body") && i + 1 < argc) body = (size_t)atol(argv[++i]);
        else { fprintf(stderr, "usage: http_responder --port N [--body BYTES]\n"); return 2; }
    }
    response = floor_response(body, &response_len);
    floor_signals();
    int l = floor_listen(port, SOCK_NONBLOCK), one = 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    size_t out_cap = response_len * 16;
    char *out = malloc(out_cap);
    struct epoll_event evs[256];
    while (!floor_stop) {
        int k = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < k; ++i) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = malloc(sizeof *nc);
                    nc->fd = fd;
                    nc->len = 0;
                    struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            int dead = 0;
            for (;;) {
                ssize_t r = recv(c->fd, c->in + c->len, sizeof c->in - c->len, 0);
                if (r == 0 || (r < 0 && errno != EAGAIN) || (r < 0 && c->len == sizeof c->in)) { dead = 1; break; }
                if (r < 0) break;
                c->len += (size_t)r;
                if (serve(c, &out, &out_cap) < 0) { dead = 1; break; }
                if (c->len + (size_t)r < sizeof c->in && (size_t)r < sizeof c->in / 2) break; /* short read: drained */
            }
            if (dead) {
                close(c->fd);
                free(c);
            }
        }
    }
    return 0;
}
