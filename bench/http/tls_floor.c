/*
 * The HTTPS floor of bench/run http: bench/peers/http-c's canned responder (one response for every
 * request, no parsing beyond each request's blank line and "Connection: close") over OpenSSL, as
 * an event-driven C server drives it: edge-triggered epoll, non-blocking sockets handed to OpenSSL
 * with SSL_set_fd, the responses to a batch of requests passed to one SSL_write. No runtime, no
 * timeouts, no files. OpenSSL's defaults, as every server in the row has them.
 *
 *   https_floor --port N --cert FILE --key FILE [--body BYTES]   (N = 0 picks a free port)
 *
 * Prints "listening <port>" once ready; exits on SIGTERM / SIGINT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor.h"

enum { k_in = 16384 };

struct conn {
    int fd;
    SSL* ssl;
    size_t len;      /* bytes of requests kept in `in` */
    size_t out_len;  /* response bytes not yet taken by SSL_write */
    size_t out_cap;
    char* out;
    char in[k_in];
};

static char* response;
static size_t response_len;

/* Queues a response for every complete request in c->in; returns 1 if the last asked to close. */
static int answer(struct conn* c) {
    size_t pos = 0;
    int close_after = 0;
    for (;;) {
        char* end = memmem(c->in + pos, c->len - pos, "\r\n\r\n", 4);
        if (!end) break;
        size_t req_end = (size_t)(end - c->in) + 4;
        if (memmem(c->in + pos, req_end - pos, "Connection: close", 17)) close_after = 1;
        if (c->out_len + response_len > c->out_cap) {
            c->out_cap = (c->out_len + response_len) * 2;
            c->out = realloc(c->out, c->out_cap);
        }
        memcpy(c->out + c->out_len, response, response_len);
        c->out_len += response_len;
        pos = req_end;
        if (close_after) break;
    }
    memmove(c->in, c->in + pos, c->len - pos);
    c->len -= pos;
    return close_after;
}

/* Writes what is queued; 1 when all of it went, 0 when the socket is full, -1 on failure. */
static int flush(struct conn* c) {
    while (c->out_len) {
        int w = SSL_write(c->ssl, c->out, (int)c->out_len);
        if (w <= 0) return SSL_get_error(c->ssl, w) == SSL_ERROR_WANT_WRITE ? 0 : -1;
        memmove(c->out, c->out + w, c->out_len - (size_t)w);
        c->out_len -= (size_t)w;
    }
    return 1;
}

/* Reads and answers until the socket is drained; returns -1 if the connection must close. */
static int serve(struct conn* c) {
    if (flush(c) < 0) return -1;
    for (;;) {
        if (c->len == k_in) return -1; /* a request larger than the buffer */
        int r = SSL_read(c->ssl, c->in + c->len, (int)(k_in - c->len));
        if (r <= 0) {
            int e = SSL_get_error(c->ssl, r);
            ERR_clear_error();
            return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
        }
        c->len += (size_t)r;
        int close_after = answer(c);
        int f = flush(c);
        if (f < 0 || (close_after && f == 1)) return -1;
    }
}

static void drop(struct conn* c) {
    SSL_free(c->ssl);
    close(c->fd);
    free(c->out);
    free(c);
}

int main(int argc, char** argv) {
    int port = 0;
    size_t body = 13;
    const char *cert = NULL, *key = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--body") && i + 1 < argc) body = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--cert") && i + 1 < argc) cert = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc) key = argv[++i];
        else { cert = NULL; break; }
    }
    if (!cert || !key) {
        fprintf(stderr, "usage: https_floor --port N --cert FILE --key FILE [--body BYTES]\n");
        return 2;
    }
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    response = floor_response(body, &response_len);
    floor_signals();
    int l = floor_listen(port, SOCK_NONBLOCK), one = 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    struct epoll_event evs[256];
    while (!floor_stop) {
        int k = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < k; ++i) {
            struct conn* c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn* nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    nc->ssl = SSL_new(ctx);
                    SSL_set_fd(nc->ssl, fd);
                    SSL_set_accept_state(nc->ssl);
                    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            if (serve(c) < 0) drop(c);
        }
    }
    return 0;
}
