/* An event-loop server in plain C (no gluon) with a worker thread per CPU, none of them pinned:
 * each worker has its own epoll set watching the one listening socket, accepts without
 * blocking and answers every connection with the CPU it runs on ("cpu N\n"), then closes it.
 * Listens on 127.0.0.1, port argv[1] or any free one, with argv[2] workers (default 2); prints
 * "port N" and serves until killed. Under GLUON_PRELOAD=listen each worker gets its own
 * listener and a CPU of its own. argv[3] "fork-listen": the socket is bound, shared with a
 * child by fork(), and the child calls listen() and serves; "pass-fd": a child is forked first
 * and is handed the listening socket over a Unix socket (SCM_RIGHTS). The parent waits in both;
 * the child dies with it. "poll" and "select": the workers wait with poll() or select() instead
 * of an epoll set. Before serving, it checks that a select on other fds is Linux's (the time
 * left written back, microseconds beyond a second taken), and exits 1 if not. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int ls;
static const char* how = "";

/* Accepts a connection if one is there and answers it with the CPU this runs on. */
static void answer_one(int from) {
    int fd = accept4(from, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return; /* another worker took it, or the fallback was empty */
    char line[32];
    int len = snprintf(line, sizeof line, "cpu %d\n", sched_getcpu());
    if (write(fd, line, (size_t)len) != len) perror("epoll_workers: write");
    close(fd);
}

static void* worker(void* arg) {
    (void)arg;
    if (strcmp(how, "poll") == 0) {
        for (;;) {
            struct pollfd p = {.fd = ls, .events = POLLIN};
            if (poll(&p, 1, -1) == 1 && (p.revents & POLLIN)) answer_one(ls);
        }
    }
    if (strcmp(how, "select") == 0) {
        for (;;) {
            fd_set r;
            FD_ZERO(&r);
            FD_SET(ls, &r);
            if (select(ls + 1, &r, NULL, NULL, NULL) == 1 && FD_ISSET(ls, &r)) answer_one(ls);
        }
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) != 0) {
        perror("epoll_workers: epoll");
        exit(1);
    }
    for (;;) {
        struct epoll_event got[16];
        int n = epoll_wait(ep, got, 16, -1);
        for (int i = 0; i < n; ++i) answer_one(got[i].data.fd);
    }
    return NULL;
}

/* The parent's part after a fork: waits (the child serves until killed and dies with it). */
static int parent_waits(pid_t pid) {
    int status;
    waitpid(pid, &status, 0);
    return 1;
}

static int listening_socket(int port, int do_listen) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || (do_listen && listen(fd, 1024) != 0)) {
        perror("epoll_workers: bind/listen");
        exit(1);
    }
    return fd;
}

/* pass-fd: the listening socket comes from the parent over a Unix socket (SCM_RIGHTS). */
static int receive_socket(int from) {
    char data, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec v = {&data, 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr* c;
    int fd;
    if (recvmsg(from, &m, 0) != 1 || !(c = CMSG_FIRSTHDR(&m)) || c->cmsg_type != SCM_RIGHTS) {
        fprintf(stderr, "epoll_workers: no socket received\n");
        exit(1);
    }
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static void send_socket(int to, int fd) {
    char data = 's', ctl[CMSG_SPACE(sizeof(int))];
    struct iovec v = {&data, 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(to, &m, 0) != 1) {
        perror("epoll_workers: sendmsg");
        exit(1);
    }
}

/* A select on a pipe, no listening socket in its sets, as Linux's: a timeout that runs out
 * comes back zero, and one with a second and a half in microseconds is taken, what is left of
 * it written back. */
static int select_is_linuxs(void) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return 0;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    struct timeval ran_out = {0, 1000};
    int ok = select(p[0] + 1, &r, NULL, NULL, &ran_out) == 0 && ran_out.tv_sec == 0 && ran_out.tv_usec == 0;
    if (write(p[1], "x", 1) != 1) ok = 0;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    struct timeval carried = {0, 1500000};
    ok = ok && select(p[0] + 1, &r, NULL, NULL, &carried) == 1 && carried.tv_usec < 1000000 &&
         carried.tv_sec * 1000000L + carried.tv_usec <= 1500000L;
    close(p[0]);
    close(p[1]);
    return ok;
}

int main(int argc, char** argv) {
    if (!select_is_linuxs()) {
        fprintf(stderr, "epoll_workers: select on a pipe did not act as Linux's\n");
        return 1;
    }
    const int port = argc > 1 ? atoi(argv[1]) : 0;
    how = argc > 3 ? argv[3] : "";
    if (strcmp(how, "fork-listen") == 0) {
        ls = listening_socket(port, 0);
        pid_t pid = fork();
        if (pid != 0) return pid < 0 ? 1 : parent_waits(pid);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (listen(ls, 1024) != 0) {
            perror("epoll_workers: listen");
            return 1;
        }
    } else if (strcmp(how, "pass-fd") == 0) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return 1;
        pid_t pid = fork();
        if (pid != 0) {
            if (pid < 0) return 1;
            int fd = listening_socket(port, 1);
            send_socket(sp[0], fd);
            close(fd);
            return parent_waits(pid);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        ls = receive_socket(sp[1]);
    } else {
        ls = listening_socket(port, 1);
    }
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(ls, (struct sockaddr*)&a, &len) != 0) return 1;
    int workers = argc > 2 ? atoi(argv[2]) : 2;
    for (int i = 0; i < workers; ++i) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
    }
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) pause();
}
