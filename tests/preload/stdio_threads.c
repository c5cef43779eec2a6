/* A thread-per-connection line echo server in plain C (no gluon) written with stdio: each
 * connection's thread wraps its socket in two FILEs, as C programs do (fdopen of the socket to
 * read, of a dup of it to write), and echoes every line with fgets, fputs and fflush, answering
 * "fileno bad" if fileno() does not give each FILE's fd back. Listens on
 * 127.0.0.1, a free port; prints "port N" and serves until killed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void* serve(void* arg) {
    int fd = (int)(intptr_t)arg, wfd = dup(fd);
    FILE* in = fdopen(fd, "r");
    FILE* out = wfd >= 0 ? fdopen(wfd, "w") : NULL;
    if (!in || !out) {
        perror("stdio_threads: fdopen");
        if (in) fclose(in);
        else close(fd);
        if (wfd >= 0 && !out) close(wfd);
        return NULL;
    }
    char line[512];
    while (fgets(line, sizeof line, in)) {
        if (fileno(in) != fd || fileno(out) != wfd) fputs("fileno bad\n", out);
        else fputs(line, out);
        if (fflush(out) != 0) break;
    }
    fclose(in);
    fclose(out);
    return NULL;
}

int main(void) {
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr*)&a, sizeof a) != 0 || listen(ls, 128) != 0 ||
        getsockname(ls, (struct sockaddr*)&a, &len) != 0) {
        perror("stdio_threads: listen");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void*)(intptr_t)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}
