/* The floor of bench/run ipc's ping-pong rows: the same echo with no runtime and no protocol.
 *
 *   ipc_floor server --addr PATH [--uds]
 *   ipc_floor client --addr PATH [--uds] [--size N] [--duration SECONDS]
 *
 * Shared memory (default): the client makes a memfd with a request area and a reply area and
 * passes it over the Unix socket at PATH; then neither side makes a system call: the client
 * copies the payload into the request area and bumps a sequence word, the server (spinning on
 * it) copies the request into the reply area and bumps its own, the client (spinning) compares
 * the reply with what it sent. --uds: the same echo as blocking read/write of a u32 length and
 * the payload on the Unix socket. Server and client run on different cores.
 *
 * Prints "listening" (server) and "ok rtts=N ns=TOTAL p50=NS p99=NS" (client) like ipc_bench,
 * and exits 1 if a reply differs. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct hdr {
    _Alignas(64) _Atomic uint64_t req;   /* requests posted by the client */
    _Alignas(64) _Atomic uint64_t resp;  /* replies posted by the server */
};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char* what) {
    perror(what);
    exit(2);
}

static void io_all(int fd, void* p, size_t n, int writing) {
    char* c = p;
    while (n > 0) {
        ssize_t k = writing ? write(fd, c, n) : read(fd, c, n);
        if (k <= 0) die(writing ? "write" : "read");
        c += k;
        n -= (size_t)k;
    }
}

static int unix_socket(const char* path, int server) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (server) {
        unlink(path);
        if (bind(s, (struct sockaddr*)&a, sizeof a) || listen(s, 1)) die("bind");
        printf("listening\n");
        fflush(stdout);
        int c = accept(s, NULL, NULL);
        if (c < 0) die("accept");
        close(s);
        return c;
    }
    if (connect(s, (struct sockaddr*)&a, sizeof a)) die("connect");
    return s;
}

static void cpu_relax(void) { __builtin_ia32_pause(); }

static int cmp_i64(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    int server = !strcmp(argv[1], "server"), uds = 0;
    const char* addr = NULL;
    size_t size = 64;
    double duration = 1;
    for (int i = 2; i < argc; ++i) {
        if (!strcmp(argv[i], "--addr") && i + 1 < argc) addr = argv[++i];
        else if (!strcmp(argv[i], "--uds")) uds = 1;
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--duration") && i + 1 < argc) duration = atof(argv[++i]);
        else if (!strcmp(argv[i], "--streams") && i + 1 < argc && atoi(argv[++i]) != 1) {
            fprintf(stderr, "ipc_floor: one stream only\n");
            return 2;
        }
    }
    if (!addr) return 2;
    int s = unix_socket(addr, server);
    char* buf = malloc(size + 4);
    if (server) {
        if (uds) {
            for (;;) {
                uint32_t n;
                if (read(s, &n, 4) != 4) return 0;
                if (n > size) buf = realloc(buf, size = n);
                io_all(s, buf, n, 0);
                io_all(s, &n, 4, 1);
                io_all(s, buf, n, 1);
            }
        }
        /* Receive the memfd, then echo until the client clears the size. */
        char c;
        char ctl[CMSG_SPACE(sizeof(int))];
        struct iovec v = {&c, 1};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
        if (recvmsg(s, &m, 0) != 1) die("recvmsg");
        int fd;
        memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
        struct stat st;
        if (fstat(fd, &st)) die("fstat");
        size = ((size_t)st.st_size - sizeof(struct hdr)) / 2;
        struct hdr* h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (h == MAP_FAILED) die("mmap");
        char* req = (char*)(h + 1);
        char* rep = req + size;
        for (uint64_t seen = 0;;) {
            uint64_t r;
            while ((r = atomic_load_explicit(&h->req, memory_order_acquire)) == seen) cpu_relax();
            if (r == UINT64_MAX) return 0;
            seen = r;
            memcpy(rep, req, size);
            atomic_store_explicit(&h->resp, seen, memory_order_release);
        }
    }
    char* want = malloc(size);
    for (size_t i = 0; i < size; ++i) want[i] = (char)(i * 7 + 3);
    size_t cap = 1 << 20, n = 0;
    int64_t* lat = malloc(cap * sizeof *lat);
    struct hdr* h = NULL;
    char *req = NULL, *rep = NULL;
    if (!uds) {
        int fd = memfd_create("ipc-floor", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)(sizeof *h + 2 * size))) die("memfd");
        h = mmap(NULL, sizeof *h + 2 * size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (h == MAP_FAILED) die("mmap");
        req = (char*)(h + 1);
        rep = req + size;
        char c = 0, ctl[CMSG_SPACE(sizeof(int))];
        struct iovec v = {&c, 1};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
        struct cmsghdr* cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
        if (sendmsg(s, &m, 0) != 1) die("sendmsg");
    }
    int64_t start = now_ns(), end = start + (int64_t)(duration * 1e9), t;
    for (uint64_t seq = 1; (t = now_ns()) < end; ++seq) {
        memcpy(want, &seq, size < 8 ? size : 8); /* every message its own bytes */
        if (uds) {
            uint32_t len = (uint32_t)size;
            io_all(s, &len, 4, 1);
            io_all(s, want, size, 1);
            io_all(s, &len, 4, 0);
            if (len != size) return 1;
            io_all(s, buf, size, 0);
            if (memcmp(buf, want, size)) return 1;
        } else {
            memcpy(req, want, size);
            atomic_store_explicit(&h->req, seq, memory_order_release);
            while (atomic_load_explicit(&h->resp, memory_order_acquire) != seq) cpu_relax();
            if (memcmp(rep, want, size)) return 1;
        }
        if (n == cap) lat = realloc(lat, (cap *= 2) * sizeof *lat);
        lat[n++] = now_ns() - t;
    }
    int64_t total = now_ns() - start;
    if (!uds) atomic_store_explicit(&h->req, UINT64_MAX, memory_order_release);
    qsort(lat, n, sizeof *lat, cmp_i64);
    printf("ok rtts=%zu ns=%lld p50=%lld p99=%lld\n", n, (long long)total, (long long)lat[(n - 1) / 2],
           (long long)lat[(size_t)((double)(n - 1) * 0.99)]);
    return 0;
}
