/* A thread-per-connection TCP echo server in plain C (no gluon): the kind of program
 * libgluon_preload.so's fiber mode runs unmodified. Listens on 127.0.0.1, port argv[1] or any
 * free one, prints "port N" and serves until killed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void* serve(void* arg) {
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w <= 0) {
                perror("echo_threads: write");
                goto done;
            }
            off += w;
        }
    }
    if (n < 0) perror("echo_threads: read");
done:
    close(fd);
    return NULL;
}

int main(int argc, char** argv) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(argc > 1 ? (uint16_t)atoi(argv[1]) : 0);
    socklen_t len = sizeof a;
    if (bind(ls, (struct sockaddr*)&a, len) != 0 || listen(ls, 4096) != 0 ||
        getsockname(ls, (struct sockaddr*)&a, &len) != 0) {
        perror("listen");
        return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, &attr, serve, (void*)(intptr_t)fd) != 0) close(fd);
    }
}
