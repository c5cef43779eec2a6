/* A thread-per-connection HTTP/1.0 file server in plain C (no gluon). Serves the files under
 * argv[1] on 127.0.0.1 (any free port, printed as "port N"); GET only, one request per
 * connection; counts requests under a mutex and answers /count with the count. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char* root;
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;
static long served;

static void reply(int fd, const char* status, const char* body) {
    char head[256];
    int n = snprintf(head, sizeof head, "HTTP/1.0 %s\r\nContent-Length: %zu\r\n\r\n%s", status, strlen(body), body);
    send(fd, head, (size_t)n, 0);
}

static void* serve(void* arg) {
    int fd = (int)(intptr_t)arg;
    char req[8192];
    size_t got = 0;
    while (got < sizeof req - 1) {
        ssize_t n = recv(fd, req + got, sizeof req - 1 - got, 0);
        if (n <= 0) goto done;
        got += (size_t)n;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n")) break;
    }
    pthread_mutex_lock(&count_mu);
    long count = ++served;
    pthread_mutex_unlock(&count_mu);
    char path[4096];
    if (sscanf(req, "GET %4000s HTTP/1.", path) != 1) {
        reply(fd, "400 Bad Request", "bad request\n");
    } else if (strcmp(path, "/count") == 0) {
        char body[32];
        snprintf(body, sizeof body, "%ld\n", count);
        reply(fd, "200 OK", body);
    } else if (strstr(path, "..")) {
        reply(fd, "403 Forbidden", "forbidden\n");
    } else {
        char file[8192];
        snprintf(file, sizeof file, "%s%s", root, path);
        int f = open(file, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (f < 0 || fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
            reply(fd, "404 Not Found", "not found\n");
        } else {
            char head[128];
            int n = snprintf(head, sizeof head, "HTTP/1.0 200 OK\r\nContent-Length: %lld\r\n\r\n", (long long)st.st_size);
            if (write(fd, head, (size_t)n) == n) {
                off_t off = 0;
                while (off < st.st_size && sendfile(fd, f, &off, (size_t)(st.st_size - off)) > 0) {
                }
            }
        }
        if (f >= 0) close(f);
    }
done:
    close(fd);
    return NULL;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: http_threads ROOT\n");
        return 2;
    }
    root = argv[1];
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(ls, (struct sockaddr*)&a, len) != 0 || listen(ls, 1024) != 0 ||
        getsockname(ls, (struct sockaddr*)&a, &len) != 0) {
        perror("listen");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) continue;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void*)(intptr_t)fd) != 0) close(fd);
        else pthread_detach(t);
    }
}
