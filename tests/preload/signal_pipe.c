/* Plain C threads (no gluon) with the self-pipe trick: signal handlers (one installed with
 * sigaction, one with signal) write a byte to a pipe that a thread reads. The main thread
 * blocks the signals once its threads exist, so the kernel runs the handlers on another thread:
 * under fiber mode, a vCPU's, while a fiber waits in read or sleeps. Each signal is sent once the
 * previous byte has been read (so none merge). Also checks that sigaction reports the handlers
 * as the program installed them, and that a thread whose handler left by siglongjmp parks
 * again in its next read, and that pause and sigsuspend park a thread's fiber until a handler
 * has run (and not at once after a handler that raised a second signal; in two threads of one
 * vCPU, each thread's mask restored). Then the same with handlers installed by sigset, bsd_signal and sysv_signal. Prints
 * "ok" and exits 0 if every check held. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* (Still in glibc, no longer declared under _GNU_SOURCE.) */
sighandler_t bsd_signal(int sig, sighandler_t handler);
/* sigset is deprecated in the header, and tested here because programs still call it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define ROUNDS 300
#define OTHER_ROUNDS 60 /* with handlers installed by sigset, bsd_signal and sysv_signal */
static int sp[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int bytes, stop;

static void on_signal(int sig) {
    const int saved = errno;
    char c = (char)sig;
    if (write(sp[1], &c, 1) != 1) _exit(3);
    errno = saved;
}

static void* reader(void* arg) {
    (void)arg;
    char c;
    for (;;) {
        /* (sigset's and sysv_signal's handlers interrupt the read instead of restarting it) */
        const ssize_t r = read(sp[0], &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r != 1) break;
        if (c != SIGUSR1 && c != SIGUSR2) _exit(4);
        pthread_mutex_lock(&mu);
        ++bytes;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        if (bytes == ROUNDS + OTHER_ROUNDS) break;
    }
    return NULL;
}

/* A handler that leaves by siglongjmp (back into the thread that raised the signal): after the
 * jump the thread is no longer in a handler, and its next read must park it again (on one vCPU,
 * the writer below runs only then). */
static int jp[2];
static sigjmp_buf jenv;
static volatile sig_atomic_t jumped;
static void jump_out(int sig) {
    (void)sig;
    siglongjmp(jenv, 1);
}
static void* jumper(void* arg) {
    (void)arg;
    if (sigsetjmp(jenv, 1) == 0) {
        raise(SIGWINCH);
        return (void*)1; /* the handler came back instead of jumping */
    }
    jumped = 1;
    char c;
    if (read(jp[0], &c, 1) != 1 || c != 'j') return (void*)2;
    return NULL;
}
static void* jump_writer(void* arg) {
    (void)arg;
    while (!jumped) sched_yield();
    if (write(jp[1], "j", 1) != 1) return (void*)3;
    return NULL;
}

/* pause() and sigsuspend() in a thread while another thread of the same vCPU must run before
 * the signal is sent: the waiting fiber parks instead of holding its vCPU. */
static volatile sig_atomic_t rt_caught;
static int stage;
static void on_rt(int sig) {
    (void)sig;
    rt_caught++;
}
static void set_stage(int s) {
    pthread_mutex_lock(&mu);
    stage = s;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static void wait_stage(int s) {
    pthread_mutex_lock(&mu);
    while (stage < s) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}
static void* pauser(void* arg) {
    (void)arg;
    set_stage(1);
    while (rt_caught < 1)
        if (pause() != -1 || errno != EINTR) return (void*)1;
    /* sigsuspend with the signal blocked in this thread around the check, as programs do. */
    sigset_t rt, old;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &rt, &old);
    set_stage(3);
    while (rt_caught < 2)
        if (sigsuspend(&old) != -1 || errno != EINTR) return (void*)2;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return NULL;
}
static void* bystander(void* arg) {
    const int at = (int)(long)arg; /* 1: while the pauser is in pause; 3: in sigsuspend */
    wait_stage(at);
    set_stage(at + 1); /* runs only if the pauser's fiber parked */
    return NULL;
}

/* A handler that raises a second signal: two handlers run for one pause(). The next pause()
 * must still wait for a handler that runs after it began (a spare wake-up from the first pair
 * ended it at once). */
static volatile sig_atomic_t late_sent;
static void on_chain(int sig) {
    (void)sig;
    kill(getpid(), SIGRTMIN); /* its handler runs too, before the waiter resumes */
}
static void* chain_pauser(void* arg) {
    (void)arg;
    sigset_t both; /* (blocked in main, which made this thread) */
    sigemptyset(&both);
    sigaddset(&both, SIGRTMIN);
    sigaddset(&both, SIGRTMIN + 1);
    pthread_sigmask(SIG_UNBLOCK, &both, NULL);
    const int before = rt_caught;
    set_stage(5);
    while (rt_caught == before)
        if (pause() != -1 || errno != EINTR) return (void*)1;
    set_stage(6);
    if (pause() != -1 || errno != EINTR) return (void*)2;
    if (!late_sent) return (void*)3; /* returned before the one handler that ran after it began */
    return NULL;
}

/* Two threads of one vCPU in sigsuspend with SIGRTMIN unblocked, SIGRTMIN blocked around it:
 * after both return, each finds SIGRTMIN blocked again (the second restored the first's
 * sigsuspend mask, which it found, and left it unblocked). */
static int suspenders_in;
static int suspenders_checked;
static void* suspender(void* arg) {
    (void)arg;
    sigset_t rt, old;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &rt, &old);
    sigdelset(&old, SIGRTMIN);
    const int before = rt_caught;
    pthread_mutex_lock(&mu);
    ++suspenders_in;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    while (rt_caught == before)
        if (sigsuspend(&old) != -1 || errno != EINTR) return (void*)1;
    pthread_mutex_lock(&mu);
    --suspenders_in;
    pthread_cond_broadcast(&cv);
    while (suspenders_in > 0) pthread_cond_wait(&cv, &mu); /* both have left sigsuspend */
    pthread_mutex_unlock(&mu);
    sigset_t now;
    pthread_sigmask(SIG_SETMASK, NULL, &now);
    const int blocked = sigismember(&now, SIGRTMIN);
    /* Both look before either unblocks: under the preload the two share the vCPU thread's mask. */
    pthread_mutex_lock(&mu);
    ++suspenders_checked;
    pthread_cond_broadcast(&cv);
    while (suspenders_checked < 2) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    if (!blocked) return (void*)2;
    pthread_sigmask(SIG_UNBLOCK, &rt, NULL);
    return NULL;
}

static void* sleeper(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) usleep(50);
    return NULL;
}

int main(void) {
    alarm(30);
    if (pipe2(sp, O_CLOEXEC) != 0) return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) != 0 || signal(SIGUSR2, on_signal) == SIG_ERR) return 1;
    struct sigaction got;
    if (sigaction(SIGUSR1, NULL, &got) != 0 || got.sa_handler != on_signal || (got.sa_flags & SA_SIGINFO)) {
        printf("sigaction does not report the handler installed\n");
        return 1;
    }
    if (signal(SIGUSR2, on_signal) != on_signal) {
        printf("signal does not report the handler installed\n");
        return 1;
    }
    struct sigaction ja;
    memset(&ja, 0, sizeof ja);
    ja.sa_handler = jump_out;
    if (pipe2(jp, O_CLOEXEC) != 0 || sigaction(SIGWINCH, &ja, NULL) != 0) return 1;
    pthread_t j, w;
    void *jr, *wr;
    pthread_create(&j, NULL, jumper, NULL);
    pthread_create(&w, NULL, jump_writer, NULL);
    pthread_join(j, &jr);
    pthread_join(w, &wr);
    if (jr || wr) {
        printf("after the handler's siglongjmp: %p %p\n", jr, wr);
        return 1;
    }
    struct sigaction rta;
    memset(&rta, 0, sizeof rta);
    rta.sa_handler = on_rt;
    if (sigaction(SIGRTMIN, &rta, NULL) != 0) return 1;
    pthread_t pz, by;
    void* pr;
    pthread_create(&pz, NULL, pauser, NULL);
    pthread_create(&by, NULL, bystander, (void*)1L);
    sigset_t rtset;
    sigemptyset(&rtset);
    sigaddset(&rtset, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &rtset, NULL); /* the signal goes to the threads */
    wait_stage(2);
    pthread_join(by, NULL); /* (gone: the pauser's is the one thread left to take the signal) */
    kill(getpid(), SIGRTMIN);
    pthread_create(&by, NULL, bystander, (void*)3L);
    wait_stage(4);
    pthread_join(by, NULL);
    kill(getpid(), SIGRTMIN);
    pthread_join(pz, &pr);
    if (pr) {
        printf("pause or sigsuspend failed: %p\n", pr);
        return 1;
    }
    struct sigaction ca;
    memset(&ca, 0, sizeof ca);
    ca.sa_handler = on_chain;
    sigaddset(&rtset, SIGRTMIN + 1);
    if (sigaction(SIGRTMIN + 1, &ca, NULL) != 0) return 1;
    pthread_sigmask(SIG_BLOCK, &rtset, NULL);
    pthread_create(&pz, NULL, chain_pauser, NULL);
    wait_stage(5);
    usleep(20000);
    kill(getpid(), SIGRTMIN + 1);
    wait_stage(6);
    usleep(100000); /* the second pause has had time to return, if it was going to */
    late_sent = 1;
    kill(getpid(), SIGRTMIN);
    pthread_join(pz, &pr);
    if (pr) {
        printf("pause after a handler that raised another: %p\n", pr);
        return 1;
    }
    pthread_t su[2];
    void* sr[2];
    for (int i = 0; i < 2; ++i) pthread_create(&su[i], NULL, suspender, NULL);
    pthread_mutex_lock(&mu);
    while (suspenders_in < 2) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    /* Sent before or after they are in sigsuspend: SIGRTMIN is blocked until then, and pends. */
    kill(getpid(), SIGRTMIN); /* one signal: both return (a fiber cannot tell whose thread took it) */
    kill(getpid(), SIGRTMIN); /* (without the preload, the other thread's) */
    for (int i = 0; i < 2; ++i) pthread_join(su[i], &sr[i]);
    if (sr[0] || sr[1]) {
        printf("sigsuspend in two threads: %p %p\n", sr[0], sr[1]);
        return 1;
    }
    pthread_t r, s;
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&s, NULL, sleeper, NULL);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &block, NULL);
    for (int i = 0; i < ROUNDS; ++i) {
        kill(getpid(), i % 2 ? SIGUSR1 : SIGUSR2);
        pthread_mutex_lock(&mu);
        while (bytes <= i) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    /* The other ways to install a handler (glibc's make it with an internal sigaction): each
     * must put it behind the trampoline too, with its own semantics. */
    for (int i = 0; i < OTHER_ROUNDS; ++i) {
        int sig = SIGUSR1;
        if (i % 3 == 0) {
            /* sigset unblocks the signal in the calling thread: main blocks it again. */
            if (sigset(SIGUSR1, on_signal) != SIG_HOLD) {
                printf("sigset does not report the signal as held\n");
                return 1;
            }
            pthread_sigmask(SIG_BLOCK, &block, NULL);
        } else if (i % 3 == 1) {
            if (bsd_signal(SIGUSR1, on_signal) != on_signal) {
                printf("bsd_signal does not report the handler installed\n");
                return 1;
            }
        } else {
            /* System V: the disposition was reset to the default when the last handler ran. */
            sig = SIGUSR2;
            sighandler_t prev = sysv_signal(SIGUSR2, on_signal);
            if (i > 2 && prev != SIG_DFL) {
                printf("sysv_signal's handler was not reset when it ran\n");
                return 1;
            }
        }
        kill(getpid(), sig);
        pthread_mutex_lock(&mu);
        while (bytes <= ROUNDS + i) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(r, NULL);
    pthread_join(s, NULL);
    printf("ok\n");
    return 0;
}
