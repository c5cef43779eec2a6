/* hiredis (Debian's libhiredis) as the peer of bench/run redis: the same load as
 * bench/redis/redis_load.cc, N non-blocking hiredis contexts driven by one epoll loop, one
 * command in flight per connection, every reply checked.
 *
 *   redis_load --port P [--conns 50] [--op get|set] [--size 64] [--seconds 5] [--warmup 1]
 *
 * Prints {"calls": N, "errors": E, "wall_s": S, "cpu_s": C, "calls_per_s": R}: C is this
 * process's CPU time over the measured window. */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

struct conn {
    redisContext* c;
    char key[32];
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

static char* value;
static size_t size = 64;
static int set_op;

static void send_next(struct conn* k) {
    if (set_op) redisAppendCommand(k->c, "SET %s %b", k->key, value, size);
    else redisAppendCommand(k->c, "GET %s", k->key);
}

static int reply_ok(redisReply* r) {
    if (set_op) return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    return r->type == REDIS_REPLY_STRING && (size_t)r->len == size && memcmp(r->str, value, size) == 0;
}

int main(int argc, char** argv) {
    int port = 0, conns = 50;
    double secs = 5, warmup = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns")) conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--op")) set_op = !strcmp(argv[i + 1], "set");
        else if (!strcmp(argv[i], "--size")) size = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seconds")) secs = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(argv[i + 1]);
        else return 2;
    }
    if (!port || conns < 1) return 2;
    value = malloc(size);
    int ep = epoll_create1(0);
    struct conn* ks = calloc((size_t)conns, sizeof *ks);
    memset(value, 'v', size);
    for (int i = 0; i < conns; ++i) {
        struct conn* k = &ks[i];
        k->c = redisConnect("127.0.0.1", port); /* blocking for the setup: the key's value */
        if (!k->c || k->c->err) return fprintf(stderr, "connect failed\n"), 1;
        snprintf(k->key, sizeof k->key, "bench:%d", i);
        redisReply* r = redisCommand(k->c, "SET %s %b", k->key, value, size);
        if (!r) return 1;
        freeReplyObject(r);
        k->c->flags &= ~REDIS_BLOCK; /* non-blocking from here on */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = k};
        epoll_ctl(ep, EPOLL_CTL_ADD, k->c->fd, &ev);
    }
    for (int i = 0; i < conns; ++i) {
        int done = 0;
        send_next(&ks[i]);
        while (!done)
            if (redisBufferWrite(ks[i].c, &done) != REDIS_OK) return 1;
    }
    double start = now_s(), measure = start + warmup, end = measure + secs;
    unsigned long calls = 0, errors = 0;
    double cpu0 = -1;
    struct epoll_event evs[256];
    for (;;) {
        double t = now_s();
        if (t >= end) break;
        int n = epoll_wait(ep, evs, 256, 100);
        int counting = now_s() >= measure;
        if (counting && cpu0 < 0) cpu0 = cpu_s();
        for (int e = 0; e < n; ++e) {
            struct conn* k = evs[e].data.ptr;
            if (redisBufferRead(k->c) != REDIS_OK) return fprintf(stderr, "read failed\n"), 1;
            void* rv;
            while (redisGetReplyFromReader(k->c, &rv) == REDIS_OK && rv) {
                if (!reply_ok(rv)) ++errors;
                freeReplyObject(rv);
                if (counting) ++calls;
                send_next(k);
                int done = 0;
                while (!done)
                    if (redisBufferWrite(k->c, &done) != REDIS_OK) return 1;
            }
        }
    }
    double wall = now_s() - measure, cpu = cpu_s() - cpu0;
    printf("{\"calls\": %lu, \"errors\": %lu, \"wall_s\": %.3f, \"cpu_s\": %.3f, \"calls_per_s\": %.1f}\n", calls,
           errors, wall, cpu, (double)calls / wall);
    return errors ? 1 : 0;
}
