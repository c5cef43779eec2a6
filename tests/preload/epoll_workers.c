/* An event-loop server in plain C (no gluon) with a worker thread per CPU, none of them pinned:
 * each worker has its own epoll set watching the one listening socket, accepts without
 * blocking and answers every connection with the CPU it runs on ("cpu N\n"), then closes it.
 * Listens on 127.0.0.1, port argv[1] or any free one, with argv[2] workers (default 2); prints
 * "port N" and serves until killed. Under GLUON_PRELOAD=listen each worker gets its own
 * listener and a CPU of its own. With argv[3] "fork-listen" the socket is bound, then shared
 * with a child by fork(), and the child calls listen() and serves (the parent waits; the child
 * dies with it). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int ls;

static void* worker(void* arg) {
    (void)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) != 0) {
        perror("epoll_workers: epoll");
        exit(1);
    }
    for (;;) {
        struct epoll_event got[16];
        int n = epoll_wait(ep, got, 16, -1);
        for (int i = 0; i < n; ++i) {
            int fd = accept4(got[i].data.fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) continue; /* another worker took it, or the fallback was empty */
            char line[32];
            int len = snprintf(line, sizeof line, "cpu %d\n", sched_getcpu());
            if (write(fd, line, (size_t)len) != len) perror("epoll_workers: write");
            close(fd);
        }
    }
    return NULL;
}

int main(int argc, char** argv) {
    ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(argc > 1 ? (uint16_t)atoi(argv[1]) : 0);
    socklen_t len = sizeof a;
    if (bind(ls, (struct sockaddr*)&a, len) != 0) {
        perror("bind");
        return 1;
    }
    if (argc > 3 && strcmp(argv[3], "fork-listen") == 0) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid > 0) {
            int status;
            waitpid(pid, &status, 0);
            return 1; /* the child serves until killed */
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    }
    if (listen(ls, 1024) != 0 || getsockname(ls, (struct sockaddr*)&a, &len) != 0) {
        perror("listen");
        return 1;
    }
    int workers = argc > 2 ? atoi(argv[2]) : 2;
    for (int i = 0; i < workers; ++i) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) pause();
}
