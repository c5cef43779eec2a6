/*
 * What the HTTP floors share (bench/peers/http-c/http_responder.c, bench/http/uring_floor.c,
 * bench/http/tls_floor.c): the canned response, the loopback listener, and the stop signal.
 * Header-only, for programs that are otherwise each one file.
 */
#ifndef GLUON_BENCH_HTTP_FLOOR_H
#define GLUON_BENCH_HTTP_FLOOR_H

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static volatile sig_atomic_t floor_stop;

static void floor_on_signal(int s) {
    (void)s;
    floor_stop = 1;
}

/* SIGTERM and SIGINT set floor_stop; SIGPIPE is ignored. */
static void floor_signals(void) {
    signal(SIGTERM, floor_on_signal);
    signal(SIGINT, floor_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

/* The one response: a 200 with `body` bytes ("Hello, World!" for 13, else 'x's). */
static char* floor_response(size_t body, size_t* len) {
    char head[256];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nServer: floor\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
                     body);
    *len = (size_t)h + body;
    char* r = malloc(*len);
    memcpy(r, head, (size_t)h);
    memset(r + h, 'x', body);
    if (body == 13) memcpy(r + h, "Hello, World!", 13);
    return r;
}

/* A listener on 127.0.0.1:port (0: a free one), with `flags` (SOCK_NONBLOCK or 0); prints
 * "listening <port>" once it listens. Exits on failure. */
static int floor_listen(int port, int flags) {
    int l = socket(AF_INET, SOCK_STREAM | flags, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 4096)) {
        perror("listen");
        exit(1);
    }
    socklen_t al = sizeof a;
    getsockname(l, (struct sockaddr*)&a, &al);
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);
    return l;
}

#endif
