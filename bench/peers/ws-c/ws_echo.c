/*
 * The floor of the WebSocket benchmark: a single-threaded, edge-triggered epoll server that
 * answers the opening handshake and echoes every data frame, with nothing else: no UTF-8
 * checks, no limits, no fragmentation or close handshake beyond echoing a close frame, no
 * timeouts. What a WebSocket echo costs when it does nothing but the system calls and the
 * unmasking.
 *
 *   ws_echo --port N      (N = 0 picks a free port)
 *
 * Prints "listening <port>" once ready; exits on SIGTERM / SIGINT. The answers to the frames
 * of one read leave in one write.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct conn {
    int fd;
    int upgraded;
    size_t len;
    unsigned char in[16384];
};

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static int send_all(int fd, const unsigned char *p, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(fd, p + done, n - done, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN) continue; /* a floor: spin rather than buffer */
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}

/* Answers the upgrade request at the start of c->in; 0 if incomplete, -1 on error. */
static int handshake(struct conn *c) {
    unsigned char *end = memmem(c->in, c->len, "\r\n\r\n", 4);
    if (!end) return c->len == sizeof c->in ? -1 : 0;
    *end = 0;
    char *k = strcasestr((char *)c->in, "\r\nSec-WebSocket-Key:");
    if (!k) return -1;
    k += 20;
    while (*k == ' ') ++k;
    size_t kl = strcspn(k, "\r ");
    char buf[128];
    if (kl > 64) return -1;
    memcpy(buf, k, kl);
    memcpy(buf + kl, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
    unsigned char d[SHA_DIGEST_LENGTH], acc[64];
    SHA1((unsigned char *)buf, kl + 36, d);
    EVP_EncodeBlock(acc, d, SHA_DIGEST_LENGTH);
    char resp[256];
    int n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n\r\n", acc);
    size_t used = (size_t)(end - c->in) + 4;
    memmove(c->in, c->in + used, c->len - used);
    c->len -= used;
    c->upgraded = 1;
    return send_all(c->fd, (unsigned char *)resp, (size_t)n) < 0 ? -1 : 1;
}

/* Echoes every whole frame in c->in with one write; -1 if the connection must close. */
static int echo(struct conn *c, unsigned char **out, size_t *cap) {
    size_t pos = 0, n = 0;
    int closing = 0;
    while (c->len - pos >= 2) {
        unsigned char *p = c->in + pos;
        uint64_t len = p[1] & 0x7f;
        size_t h = 2;
        if (len == 126) { if (c->len - pos < 4) break; len = (uint64_t)p[2] << 8 | p[3]; h = 4; }
        else if (len == 127) return -1; /* a floor for small messages */
        if (!(p[1] & 0x80)) return -1;
        if (c->len - pos < h + 4 + len) break;
        const unsigned char *key = p + h;
        if (n + len + 4 > *cap) { *cap = (n + len + 4) * 2; *out = realloc(*out, *cap); }
        unsigned char *o = *out + n;
        unsigned op = p[0] & 0x0f;
        o[0] = (unsigned char)(0x80 | (op == 9 ? 10 : op));
        size_t oh = 2;
        if (len < 126) o[1] = (unsigned char)len;
        else { o[1] = 126; o[2] = (unsigned char)(len >> 8); o[3] = (unsigned char)len; oh = 4; }
        for (uint64_t i = 0; i < len; ++i) o[oh + i] = p[h + 4 + i] ^ key[i & 3];
        n += oh + len;
        pos += h + 4 + len;
        if (op == 8) { closing = 1; break; }
    }
    memmove(c->in, c->in + pos, c->len - pos);
    c->len -= pos;
    if (n && send_all(c->fd, *out, n) < 0) return -1;
    return closing ? -1 : 0;
}

int main(int argc, char **argv) {
    int port = -1, one = 1;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) port = atoi(argv[++i]);
        else port = -2;
    }
    if (port < 0) { fprintf(stderr, "usage: ws_echo --port N\n"); return 2; }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096)) { perror("listen"); return 1; }
    socklen_t al = sizeof a;
    getsockname(l, (struct sockaddr *)&a, &al);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);
    size_t cap = 65536;
    unsigned char *out = malloc(cap);
    struct epoll_event evs[256];
    while (!stop) {
        int k = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < k; ++i) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            int dead = 0;
            for (;;) {
                ssize_t r = recv(c->fd, c->in + c->len, sizeof c->in - c->len, 0);
                if (r == 0 || (r < 0 && errno != EAGAIN)) { dead = 1; break; }
                if (r < 0) break;
                c->len += (size_t)r;
                if (!c->upgraded) {
                    int h = handshake(c);
                    if (h < 0) { dead = 1; break; }
                    if (h == 0) continue;
                }
                if (echo(c, &out, &cap) < 0) { dead = 1; break; }
                if ((size_t)r < (sizeof c->in) / 2) break; /* short read: drained */
            }
            if (dead) {
                close(c->fd);
                free(c);
            }
        }
    }
    return 0;
}
