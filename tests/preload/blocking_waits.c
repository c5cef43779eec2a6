#define _GNU_SOURCE
/* Plain C threads (no gluon) making the blocking calls that have no asynchronous form: a
 * semaphore wait, a reader-writer lock (and writer-preferring ones, where a waiting writer
 * holds off the readers that come after it), a barrier, waitpid, flock, fcntl's F_OFD_SETLKW,
 * sigwait, ppoll and pselect
 * without a signal mask, select (which gives back the time left), poll with one socket in two
 * entries, receives on numbers made by dup2, dup and F_DUPFD, pthread_once whose routine
 * sleeps (and one whose routine ends its thread: another caller then runs its own), a spin
 * lock held across a sleep,
 * a flag awaited with sched_yield, a receive bounded by SO_RCVTIMEO, a socket made
 * non-blocking with ioctl(FIONBIO), numbers closed by close_range, closefrom and fclose and
 * given to a new file, name lookups (and
 * their h_errno) and system(); and sleeps (and ppoll, epoll_pwait2) with timeouts too far to
 * count in nanoseconds or milliseconds, which must not end at once. In each, one thread waits until another
 * does something, and that other thread only gets to it after the first has started waiting:
 * on one vCPU, a wait that blocked the vCPU instead of parking its fiber would never end (an
 * alarm then kills the process). Prints "ok" and exits 0 if every check held; a failed check
 * is named on stderr. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static int failures;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);            \
        }                                                                  \
    } while (0)

/* A stage counter: a thread announces that it is about to wait, another awaits that stage. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage;
static void announce(int s) {
    pthread_mutex_lock(&mu);
    stage = s;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static void await_stage(int s) {
    pthread_mutex_lock(&mu);
    while (stage < s) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* Runs a and b as two threads and joins them. */
static void pair(void* (*a)(void*), void* (*b)(void*), void* arg) {
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, a, arg) == 0);
    CHECK(pthread_create(&tb, NULL, b, arg) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
}

static struct timespec in_ms(clockid_t c, long ms) {
    struct timespec t;
    clock_gettime(c, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* ---- semaphore: one waits, the other posts ------------------------------------------------- */
static sem_t sem;
static int sem_taken;
static void* sem_waiter(void* arg) {
    (void)arg;
    announce(1);
    errno = 1234;
    CHECK(sem_wait(&sem) == 0);
    CHECK(errno == 1234); /* a call that succeeds leaves errno alone */
    sem_taken = 1;
    /* A timed wait that nobody posts ends with ETIMEDOUT. */
    struct timespec t = in_ms(CLOCK_REALTIME, 20);
    CHECK(sem_timedwait(&sem, &t) == -1 && errno == ETIMEDOUT);
    return NULL;
}
static void* sem_poster(void* arg) {
    (void)arg;
    await_stage(1);
    CHECK(sem_post(&sem) == 0);
    return NULL;
}

/* ---- reader-writer lock: a writer holds it while a reader waits ---------------------------- */
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int rw_value;
static void* rw_writer(void* arg) {
    (void)arg;
    CHECK(pthread_rwlock_wrlock(&rw) == 0);
    CHECK(pthread_rwlock_wrlock(&rw) == EDEADLK); /* glibc's answer to a writer asking again */
    announce(2);
    await_stage(3); /* the reader is about to wait for the lock */
    rw_value = 42;
    CHECK(pthread_rwlock_unlock(&rw) == 0);
    return NULL;
}
static void* rw_reader(void* arg) {
    (void)arg;
    await_stage(2);
    CHECK(pthread_rwlock_tryrdlock(&rw) == EBUSY);
    struct timespec t = in_ms(CLOCK_REALTIME, 10);
    CHECK(pthread_rwlock_timedrdlock(&rw, &t) == ETIMEDOUT);
    announce(3);
    CHECK(pthread_rwlock_rdlock(&rw) == 0);
    CHECK(rw_value == 42);
    CHECK(pthread_rwlock_rdlock(&rw) == 0); /* read locks nest */
    CHECK(pthread_rwlock_trywrlock(&rw) == EBUSY);
    CHECK(pthread_rwlock_unlock(&rw) == 0);
    CHECK(pthread_rwlock_unlock(&rw) == 0);
    CHECK(pthread_rwlock_trywrlock(&rw) == 0);
    CHECK(pthread_rwlock_unlock(&rw) == 0);
    return NULL;
}

/* ---- barrier: three threads, two rounds ------------------------------------------------------ */
static pthread_barrier_t bar;
static int serials, passed;
static void* at_barrier(void* arg) {
    (void)arg;
    for (int round = 0; round < 2; ++round) {
        int r = pthread_barrier_wait(&bar);
        CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD) __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&passed, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* ---- waitpid: a child that ends when another thread closes its input ---------------------- */
static pid_t cat_pid;
static int cat_input; /* the write end of cat's stdin */
static void* reaper(void* arg) {
    (void)arg;
    announce(4);
    int st = -1;
    CHECK(waitpid(cat_pid, &st, 0) == cat_pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return NULL;
}
static void* closer(void* arg) {
    (void)arg;
    await_stage(4);
    close(cat_input);
    return NULL;
}

/* ---- flock: two opens of one file, the second waits for the first to unlock --------------- */
static int lock_a, lock_b, lock_value;
static void* lock_holder(void* arg) {
    (void)arg;
    CHECK(flock(lock_a, LOCK_EX) == 0);
    announce(5);
    await_stage(6);
    lock_value = 7;
    CHECK(flock(lock_a, LOCK_UN) == 0);
    return NULL;
}
static void* lock_waiter(void* arg) {
    (void)arg;
    await_stage(5);
    CHECK(flock(lock_b, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK);
    announce(6);
    CHECK(flock(lock_b, LOCK_EX) == 0);
    CHECK(lock_value == 7);
    CHECK(flock(lock_b, LOCK_UN) == 0);
    return NULL;
}

/* ---- fcntl F_OFD_SETLKW: a record lock on one open file, waited for through another ------- */
static void* ofd_holder(void* arg) {
    (void)arg;
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(lock_a, F_OFD_SETLK, &l) == 0);
    announce(17);
    await_stage(18);
    lock_value = 9;
    l.l_type = F_UNLCK;
    CHECK(fcntl(lock_a, F_OFD_SETLK, &l) == 0);
    return NULL;
}
static void* ofd_waiter(void* arg) {
    (void)arg;
    await_stage(17);
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(lock_b, F_OFD_SETLK, &l) == -1 && (errno == EAGAIN || errno == EACCES));
    announce(18);
    CHECK(fcntl(lock_b, F_OFD_SETLKW, &l) == 0);
    CHECK(lock_value == 9);
    l.l_type = F_UNLCK;
    CHECK(fcntl(lock_b, F_OFD_SETLK, &l) == 0);
    return NULL;
}

/* ---- sigwait: a signal thread, as servers have, and one that sends the signal ------------- */
static void* signal_thread(void* arg) {
    sigset_t* set = arg;
    announce(7);
    int sig = 0;
    CHECK(sigwait(set, &sig) == 0);
    CHECK(sig == SIGUSR1);
    return NULL;
}
static void* signal_sender(void* arg) {
    (void)arg;
    await_stage(7);
    CHECK(kill(getpid(), SIGUSR1) == 0);
    return NULL;
}

/* ---- ppoll and pselect without a mask: wait for a pipe another thread writes --------------- */
static int pp[2];
static void* poller(void* arg) {
    (void)arg;
    struct pollfd f = {.fd = pp[0], .events = POLLIN};
    struct timespec tiny = {0, 1000000};
    CHECK(ppoll(&f, 1, &tiny, NULL) == 0); /* nothing yet: times out */
    announce(8);
    struct timespec ten = {10, 0};
    CHECK(ppoll(&f, 1, &ten, NULL) == 1 && (f.revents & POLLIN));
    char c;
    CHECK(read(pp[0], &c, 1) == 1);
    announce(9);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(pp[0], &r);
    CHECK(pselect(pp[0] + 1, &r, NULL, NULL, &ten, NULL) == 1 && FD_ISSET(pp[0], &r));
    return NULL;
}
static void* writer(void* arg) {
    (void)arg;
    await_stage(8);
    CHECK(write(pp[1], "x", 1) == 1);
    await_stage(9);
    CHECK(write(pp[1], "y", 1) == 1);
    return NULL;
}

/* ---- select writes the time left back into its timeout, as Linux's does --------------------- */
static int sp[2];
static void* select_waiter(void* arg) {
    (void)arg;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(sp[0], &r);
    struct timeval tv = {10, 0};
    announce(12);
    CHECK(select(sp[0] + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(sp[0], &r));
    CHECK(tv.tv_sec >= 5 && tv.tv_sec < 10); /* some time went, most is left */
    char c;
    CHECK(read(sp[0], &c, 1) == 1);
    FD_ZERO(&r);
    FD_SET(sp[0], &r);
    tv.tv_sec = 0;
    tv.tv_usec = 20000;
    CHECK(select(sp[0] + 1, &r, NULL, NULL, &tv) == 0);
    CHECK(tv.tv_sec == 0 && tv.tv_usec == 0); /* ran out */
    return NULL;
}
static void* select_writer(void* arg) {
    (void)arg;
    await_stage(12);
    usleep(10000); /* some of the timeout goes */
    CHECK(write(sp[1], "s", 1) == 1);
    return NULL;
}

/* ---- poll with one socket in two entries (POLLIN in one, POLLOUT in the other) ---------------- */
static int dup_sv[2];
static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static void* dup_poller(void* arg) {
    (void)arg;
    char b[4096] = {0};
    while (send(dup_sv[0], b, sizeof b, MSG_DONTWAIT) > 0) {
    } /* full: not writable until the peer reads */
    struct pollfd p[2] = {{dup_sv[0], POLLIN, 0}, {dup_sv[0], POLLOUT, 0}};
    announce(13);
    const double t0 = seconds_now();
    CHECK(poll(p, 2, 5000) == 1);
    CHECK(seconds_now() - t0 < 4); /* woken by the second entry's event, not the timeout */
    CHECK(p[0].revents == 0 && (p[1].revents & POLLOUT));
    return NULL;
}
static void* dup_drainer(void* arg) {
    (void)arg;
    await_stage(13);
    char b[65536];
    while (recv(dup_sv[1], b, sizeof b, MSG_DONTWAIT) > 0) {
    }
    return NULL;
}

/* ---- a new number for a file (dup2, F_DUPFD, dup) waits as the file's own does -------------- */
static int dsv[2]; /* blocking */
static void* dup_receiver(void* arg) {
    (void)arg;
    char b[4];
    int nb = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(nb >= 0 && recv(nb, b, sizeof b, 0) == -1); /* (at once: nb's number is seen non-blocking) */
    /* A receive that blocked the vCPU instead of parking gives up after 3 s (and fails). */
    struct timeval tv = {3, 0};
    CHECK(setsockopt(dsv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    CHECK(dup2(dsv[0], nb) == nb); /* nb now names the blocking socket */
    announce(14);
    CHECK(recv(nb, b, 1, 0) == 1 && b[0] == 'a');
    /* dsv[0] has waited: the epoll engine has made its file O_NONBLOCK in the kernel, which a
     * new number must not take for the program's wish. */
    int d = fcntl(dsv[0], F_DUPFD_CLOEXEC, 0);
    CHECK(d >= 0);
    announce(15);
    CHECK(recv(d, b, 1, 0) == 1 && b[0] == 'b');
    int e = dup(dsv[0]);
    CHECK(e >= 0);
    announce(16);
    CHECK(recv(e, b, 1, 0) == 1 && b[0] == 'c');
    close(nb);
    close(d);
    close(e);
    return NULL;
}
static void* dup_sender(void* arg) {
    (void)arg;
    await_stage(14);
    CHECK(send(dsv[1], "a", 1, 0) == 1);
    await_stage(15);
    CHECK(send(dsv[1], "b", 1, 0) == 1);
    await_stage(16);
    CHECK(send(dsv[1], "c", 1, 0) == 1);
    return NULL;
}

/* ---- pthread_once whose routine parks: the others wait for it, it runs once --------------- */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_runs, once_seen;
static void once_routine(void) {
    usleep(20000); /* parks the fiber: the other threads arrive meanwhile */
    __atomic_add_fetch(&once_runs, 1, __ATOMIC_RELAXED);
}
static void* once_caller(void* arg) {
    (void)arg;
    CHECK(pthread_once(&once, once_routine) == 0);
    if (__atomic_load_n(&once_runs, __ATOMIC_RELAXED) == 1) __atomic_add_fetch(&once_seen, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* ---- a spin lock held across a sleep, and a flag awaited with sched_yield ------------------ */
static pthread_spinlock_t spin;
static int spin_value, yield_flag;
static void* spin_holder(void* arg) {
    (void)arg;
    CHECK(pthread_spin_lock(&spin) == 0);
    announce(10);
    usleep(20000); /* parks the fiber holding the lock */
    spin_value = 5;
    CHECK(pthread_spin_unlock(&spin) == 0);
    return NULL;
}
static void* spin_waiter(void* arg) {
    (void)arg;
    await_stage(10);
    CHECK(pthread_spin_lock(&spin) == 0);
    CHECK(spin_value == 5);
    CHECK(pthread_spin_unlock(&spin) == 0);
    return NULL;
}
static void* yielder(void* arg) {
    (void)arg;
    announce(11);
    while (!__atomic_load_n(&yield_flag, __ATOMIC_ACQUIRE)) sched_yield();
    return NULL;
}
static void* flagger(void* arg) {
    (void)arg;
    await_stage(11);
    __atomic_store_n(&yield_flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- a writer-preferring rwlock: a writer that waits holds off the readers after it -------- */
/* The kind PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, set with pthread_rwlockattr_setkind_np
 * (wp_set, made in main) or by its static initializer (wp_static). */
static pthread_rwlock_t wp_set;
static pthread_rwlock_t wp_static = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static int wp_written, wp_gave_up;
/* True once a writer waits for l, which the caller holds for reading: a try for reading then
 * fails, where a reader-preferring lock keeps giving read locks. False if *gave_up is set first
 * (a timed writer that is no longer waiting), or after 5 s. */
static int writer_waits(pthread_rwlock_t* l, const int* gave_up) {
    const double t0 = seconds_now();
    int r;
    while ((r = pthread_rwlock_tryrdlock(l)) == 0) {
        CHECK(pthread_rwlock_unlock(l) == 0);
        if ((gave_up && __atomic_load_n(gave_up, __ATOMIC_ACQUIRE)) || seconds_now() - t0 > 5) return 0;
        sched_yield(); /* lets the writer run and start waiting */
    }
    return r == EBUSY;
}
static void* wp_first_reader(void* arg) {
    pthread_rwlock_t* l = arg;
    CHECK(pthread_rwlock_rdlock(l) == 0);
    announce(19);
    CHECK(writer_waits(l, NULL));
    announce(20);
    await_stage(21); /* the next reader is about to ask */
    CHECK(pthread_rwlock_unlock(l) == 0);
    return NULL;
}
static void* wp_writer(void* arg) {
    pthread_rwlock_t* l = arg;
    await_stage(19);
    CHECK(pthread_rwlock_wrlock(l) == 0);
    wp_written = 1;
    CHECK(pthread_rwlock_unlock(l) == 0);
    return NULL;
}
static void* wp_next_reader(void* arg) {
    pthread_rwlock_t* l = arg;
    await_stage(20);
    announce(21);
    CHECK(pthread_rwlock_rdlock(l) == 0);
    CHECK(wp_written == 1); /* the writer, which came first, had it first */
    CHECK(pthread_rwlock_unlock(l) == 0);
    return NULL;
}
/* A writer that gives up lets in the readers it held off: the holder keeps its read lock until
 * the late reader has one too (a late reader left waiting would hang the program). */
static void* wp_holder(void* arg) {
    pthread_rwlock_t* l = arg;
    CHECK(pthread_rwlock_rdlock(l) == 0);
    announce(22);
    writer_waits(l, &wp_gave_up); /* so that the late reader asks while the writer waits */
    announce(23);
    await_stage(24);
    CHECK(pthread_rwlock_unlock(l) == 0);
    return NULL;
}
static void* wp_timed_writer(void* arg) {
    pthread_rwlock_t* l = arg;
    await_stage(22);
    struct timespec t = in_ms(CLOCK_REALTIME, 500);
    CHECK(pthread_rwlock_timedwrlock(l, &t) == ETIMEDOUT);
    __atomic_store_n(&wp_gave_up, 1, __ATOMIC_RELEASE);
    return NULL;
}
static void* wp_late_reader(void* arg) {
    pthread_rwlock_t* l = arg;
    await_stage(23);
    CHECK(pthread_rwlock_rdlock(l) == 0);
    announce(24);
    CHECK(pthread_rwlock_unlock(l) == 0);
    return NULL;
}
/* Runs a, b and c as three threads on arg and joins them. */
static void trio(void* (*a)(void*), void* (*b)(void*), void* (*c)(void*), void* arg) {
    pthread_t t[3];
    void* (*fn[3])(void*) = {a, b, c};
    for (int i = 0; i < 3; ++i) CHECK(pthread_create(&t[i], NULL, fn[i], arg) == 0);
    for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
}

/* ---- pthread_once whose routine ends its thread: the once is as if never called ----------- */
/* Another thread waiting in pthread_once meanwhile then runs its own routine (a control left
 * locked would hold it, and every later caller, for good). */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_once_runs;
static void exiting_routine(void) {
    __atomic_add_fetch(&exit_once_runs, 1, __ATOMIC_RELAXED);
    announce(25);
    await_stage(26); /* the other thread is about to call pthread_once */
    pthread_exit((void*)7);
}
static void finishing_routine(void) { __atomic_add_fetch(&exit_once_runs, 10, __ATOMIC_RELAXED); }
static void* once_exiter(void* arg) {
    (void)arg;
    pthread_once(&exit_once, exiting_routine);
    CHECK(!"pthread_exit returned");
    return NULL;
}
static void* once_after_exit(void* arg) {
    (void)arg;
    await_stage(25);
    announce(26);
    CHECK(pthread_once(&exit_once, finishing_routine) == 0);
    CHECK(pthread_once(&exit_once, exiting_routine) == 0); /* done now: runs nothing */
    return NULL;
}

/* ---- SO_RCVTIMEO: a receive with nothing to read gives up, as it would in a thread ---------- */
static void* timed_receiver(void* arg) {
    (void)arg;
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    struct timeval tv = {0, 30000};
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    char c;
    errno = 0;
    CHECK(recv(sv[0], &c, 1, 0) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
    CHECK(write(sv[1], "k", 1) == 1);
    CHECK(read(sv[0], &c, 1) == 1 && c == 'k');
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

/* ---- ioctl(FIONBIO): a receive fails with EAGAIN, and once cleared waits again ------------ */
static int nbio_sv[2];
static void* nbio_receiver(void* arg) {
    (void)arg;
    char c;
    CHECK(!(fcntl(nbio_sv[0], F_GETFL) & O_NONBLOCK)); /* (seen, as blocking) */
    int on = 1;
    CHECK(ioctl(nbio_sv[0], FIONBIO, &on) == 0);
    CHECK(fcntl(nbio_sv[0], F_GETFL) & O_NONBLOCK);
    errno = 0;
    CHECK(recv(nbio_sv[0], &c, 1, 0) == -1 && errno == EAGAIN); /* parked for good before */
    on = 0;
    CHECK(ioctl(nbio_sv[0], FIONBIO, &on) == 0);
    CHECK(!(fcntl(nbio_sv[0], F_GETFL) & O_NONBLOCK));
    announce(27);
    CHECK(recv(nbio_sv[0], &c, 1, 0) == 1 && c == 'n');
    return NULL;
}
static void* nbio_sender(void* arg) {
    (void)arg;
    await_stage(27);
    CHECK(send(nbio_sv[1], "n", 1, 0) == 1);
    return NULL;
}

/* ---- a number closed without close() (close_range, closefrom, fclose) starts afresh -------- */
/* Each way closes a non-blocking file seen as such, and a blocking pipe gets its number behind
 * the interposers: a read there waits for the writer. Taken for the old file's, it was a
 * blocking system call that held the vCPU (and the writer) for good. */
static int fresh_pipe[2];
static void* fresh_reader(void* arg) {
    (void)arg;
    for (int way = 0; way < 3; ++way) {
        CHECK(pipe2(fresh_pipe, O_CLOEXEC) == 0); /* (first: it must not take the number freed) */
        int fd;
        if (way == 0) {
            fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            CHECK(fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK));
            CHECK(close_range(fd, fd, 0) == 0);
        } else if (way == 1) {
            const int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            fd = fcntl(s, F_DUPFD_CLOEXEC, 900); /* (closefrom takes the numbers above) */
            CHECK(fd >= 900 && (fcntl(fd, F_GETFL) & O_NONBLOCK));
            close(s);
            closefrom(900);
        } else {
            fd = open("/dev/null", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            CHECK(fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK));
            FILE* f = fdopen(fd, "r");
            CHECK(f && fclose(f) == 0);
        }
        CHECK(syscall(SYS_dup3, fresh_pipe[0], fd, O_CLOEXEC) == fd); /* (no interposer sees it) */
        close(fresh_pipe[0]);
        const int stale = fcntl(fd, F_GETFL) & O_NONBLOCK;
        CHECK(!stale);
        announce(28 + 2 * way);
        char c = 0;
        if (!stale) CHECK(read(fd, &c, 1) == 1 && c == 'f'); /* (stale: it would hold the vCPU) */
        await_stage(29 + 2 * way);
        close(fd);
        close(fresh_pipe[1]);
    }
    return NULL;
}
static void* fresh_writer(void* arg) {
    (void)arg;
    for (int way = 0; way < 3; ++way) {
        await_stage(28 + 2 * way);
        CHECK(write(fresh_pipe[1], "f", 1) == 1);
        announce(29 + 2 * way);
    }
    return NULL;
}

/* ---- lookups and system(): offloaded, each from a thread of its own ------------------------ */
static void* lookups(void* arg) {
    (void)arg;
    struct hostent* h = gethostbyname("127.0.0.1");
    CHECK(h && h->h_addrtype == AF_INET && h->h_addr_list[0] &&
          memcmp(h->h_addr_list[0], "\x7f\x00\x00\x01", 4) == 0);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_flags = AI_NUMERICHOST}, *res = NULL;
    CHECK(getaddrinfo("127.0.0.1", "80", &hints, &res) == 0 && res);
    if (res) freeaddrinfo(res);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char host[64], serv[16];
    CHECK(getnameinfo((struct sockaddr*)&a, sizeof a, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV) == 0);
    CHECK(strcmp(host, "127.0.0.1") == 0 && strcmp(serv, "80") == 0);
    /* Failed lookups say why in h_errno, the calling thread's (these fail without asking DNS:
     * an address of the wrong length, an address family that has no hosts). */
    unsigned char addr[4] = {192, 0, 2, 77};
    h_errno = 0;
    CHECK(gethostbyaddr(addr, 3, AF_INET) == NULL && h_errno != 0);
    h_errno = 0;
    CHECK(gethostbyname2("localhost", 12345) == NULL && h_errno != 0);
    int st = system("exit 3");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    return NULL;
}

/* ---- "sleep for ever": far timeouts must not wrap into short ones -------------------------- */
/* Each sleeper marks when its call returned; none may within the main thread's look. */
static int woke_early[6];
static void* long_sleeper(void* arg) {
    const long which = (long)arg;
    if (which == 0) {
        struct timespec t = {LONG_MAX, 0}; /* seconds as nanoseconds overflowed: no sleep */
        nanosleep(&t, NULL);
    } else if (which == 1) {
        struct timespec t = {20000000000L, 0};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
    } else if (which == 2) {
        struct timespec t = {LONG_MAX, 0};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
    } else if (which == 3) {
        /* 4294967.4 s as an int of milliseconds wrapped to 104 ms */
        struct timeval tv = {4294967, 400000};
        select(0, NULL, NULL, NULL, &tv);
    } else {
        /* 2^61 s as milliseconds wrapped to 0: ppoll and epoll_pwait2 returned at once */
        struct timespec t = {(time_t)1 << 61, 0};
        int p[2];
        CHECK(pipe2(p, O_CLOEXEC) == 0);
        if (which == 4) {
            struct pollfd f = {.fd = p[0], .events = POLLIN};
            ppoll(&f, 1, &t, NULL);
        } else {
            int ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event ev = {.events = EPOLLIN};
            CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
            struct epoll_event out[1];
            epoll_pwait2(ep, out, 1, &t, NULL);
        }
    }
    __atomic_store_n(&woke_early[which], 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(void) {
    alarm(20); /* a wait that blocked its vCPU for good ends the process (SIGALRM) */
    /* Before any thread: the signal thread's signal blocked in every thread, cat started, the
     * files and the pipe made. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0);
    int in[2];
    CHECK(pipe2(in, O_CLOEXEC) == 0);
    cat_input = in[1];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    char* argv[] = {"cat", NULL};
    CHECK(posix_spawn(&cat_pid, "/bin/cat", &fa, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    char path[4096];
    const char* tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/gluon-flock-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    lock_a = mkstemp(path);
    CHECK(lock_a >= 0);
    lock_b = open(path, O_RDWR | O_CLOEXEC);
    CHECK(lock_b >= 0);
    unlink(path);
    CHECK(pipe2(pp, O_CLOEXEC) == 0);
    CHECK(sem_init(&sem, 0, 0) == 0);
    CHECK(pthread_barrier_init(&bar, NULL, 3) == 0);

    pair(sem_waiter, sem_poster, NULL);
    CHECK(sem_taken == 1);
    pair(rw_writer, rw_reader, NULL);
    pthread_t t[3];
    for (int i = 0; i < 3; ++i) CHECK(pthread_create(&t[i], NULL, at_barrier, NULL) == 0);
    for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
    CHECK(serials == 2 && passed == 6);
    CHECK(pthread_barrier_destroy(&bar) == 0);
    pair(reaper, closer, NULL);
    pair(lock_holder, lock_waiter, NULL);
    pair(signal_thread, signal_sender, &set);
    pair(poller, writer, NULL);
    pthread_t ot[8];
    for (int i = 0; i < 8; ++i) CHECK(pthread_create(&ot[i], NULL, once_caller, NULL) == 0);
    for (int i = 0; i < 8; ++i) pthread_join(ot[i], NULL);
    CHECK(once_runs == 1 && once_seen == 8);
    CHECK(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE) == 0);
    pair(spin_holder, spin_waiter, NULL);
    pair(yielder, flagger, NULL);
    /* (The stages go on rising: the pairs from here on use 12 and up.) */
    CHECK(pipe2(sp, O_CLOEXEC) == 0);
    pair(select_waiter, select_writer, NULL);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dup_sv) == 0);
    pair(dup_poller, dup_drainer, NULL);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dsv) == 0);
    pair(dup_receiver, dup_sender, NULL);
    pair(ofd_holder, ofd_waiter, NULL);
    pthread_rwlockattr_t wa;
    CHECK(pthread_rwlockattr_init(&wa) == 0);
    CHECK(pthread_rwlockattr_setkind_np(&wa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP) == 0);
    CHECK(pthread_rwlock_init(&wp_set, &wa) == 0);
    pthread_rwlockattr_destroy(&wa);
    trio(wp_first_reader, wp_writer, wp_next_reader, &wp_set);
    CHECK(pthread_rwlock_destroy(&wp_set) == 0);
    trio(wp_holder, wp_timed_writer, wp_late_reader, &wp_static);
    pthread_t ox, oa;
    void* exit_value = NULL;
    CHECK(pthread_create(&ox, NULL, once_exiter, NULL) == 0);
    CHECK(pthread_create(&oa, NULL, once_after_exit, NULL) == 0);
    CHECK(pthread_join(ox, &exit_value) == 0 && exit_value == (void*)7);
    struct timespec od = in_ms(CLOCK_REALTIME, 5000);
    CHECK(pthread_timedjoin_np(oa, NULL, &od) == 0); /* its pthread_once returned */
    CHECK(exit_once_runs == 11);
    pthread_t tr;
    CHECK(pthread_create(&tr, NULL, timed_receiver, NULL) == 0);
    pthread_join(tr, NULL);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nbio_sv) == 0);
    pair(nbio_receiver, nbio_sender, NULL);
    pair(fresh_reader, fresh_writer, NULL);
    pthread_t lk;
    CHECK(pthread_create(&lk, NULL, lookups, NULL) == 0);
    pthread_join(lk, NULL);
    /* The long sleepers are left asleep: the process ends with them. */
    for (long i = 0; i < 6; ++i) {
        pthread_t ls;
        CHECK(pthread_create(&ls, NULL, long_sleeper, (void*)i) == 0);
        pthread_detach(ls);
    }
    usleep(300000);
    for (int i = 0; i < 6; ++i) {
        if (__atomic_load_n(&woke_early[i], __ATOMIC_ACQUIRE)) fprintf(stderr, "long sleep %d returned at once\n", i);
        CHECK(!__atomic_load_n(&woke_early[i], __ATOMIC_ACQUIRE));
    }
    sem_destroy(&sem);
    if (failures) return 1;
    printf("ok\n");
    return 0;
}
