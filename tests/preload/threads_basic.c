/* Plain C threads (no gluon) exercising what fiber mode must keep: create and join, exit
 * values, mutexes, condition variables, sleeps, pthread_self, errno per thread across a sleep
 * while other threads fail with other errors, thread-specific data (a value per thread across
 * a sleep, destructors at each thread's exit, the main thread's own value), and a stack of the
 * size asked for. Prints
 * "threads N" (the OS threads of the process while 100 of its threads are alive) and exits 0
 * if every check held. With argument
 * "fork", also reports what fork() does once threads exist; with "kill", what pthread_kill and
 * pthread_cancel of a thread return ("kill R cancel R"); with "overflow", a thread with a 64 KiB
 * stack recurses until it overflows. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 100
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int arrived, released, counter, failures;
static pthread_t selves[N];
static pthread_key_t key;
static int destroyed;

static void destroy_value(void* v) {
    __atomic_add_fetch(&destroyed, 1, __ATOMIC_RELAXED);
    free(v);
}

static int os_threads(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

/* Keys made and deleted in a loop: each new key reads NULL in a thread that set the old one
   (POSIX), however the preload reuses what a deleted key held. */
static void* key_churn(void* arg) {
    (void)arg;
    static int v;
    for (int i = 0; i < 5000; ++i) {
        pthread_key_t k;
        if (pthread_key_create(&k, NULL) != 0) return (void*)1;
        if (pthread_getspecific(k) != NULL) return (void*)2;
        if (pthread_setspecific(k, &v) != 0 || pthread_getspecific(k) != &v) return (void*)3;
        if (pthread_key_delete(k) != 0) return (void*)4;
    }
    return NULL;
}

static void* worker(void* arg) {
    int i = (int)(intptr_t)arg;
    selves[i] = pthread_self();
    /* My own errno: EBADF or ENOTSOCK, which must survive a sleep while others set theirs. */
    char b;
    if (i % 2) read(-1, &b, 1);
    else recv(STDIN_FILENO, &b, 1, MSG_DONTWAIT);
    int mine = errno;
    int* value = malloc(sizeof *value);
    *value = i;
    if (pthread_getspecific(key) != NULL) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    pthread_setspecific(key, value);
    usleep(1000);
    if (errno != mine) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    if (pthread_getspecific(key) != value || *value != i) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&mu);
    ++counter;
    ++arrived;
    pthread_cond_broadcast(&cv);
    while (!released) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    if (i == 7) pthread_exit((void*)(intptr_t)(1000 + i));
    return (void*)(intptr_t)(1000 + i);
}

/* Recurses until its stack runs out (argument "overflow"): under fiber mode the guard page
 * stops it with a message naming the fiber. */
static int recurse(volatile char* up) {
    volatile char frame[1024];
    frame[0] = up ? up[0] : 1;
    return recurse(frame) + frame[1023];
}
static void* overflow(void* arg) {
    (void)arg;
    return (void*)(intptr_t)recurse(NULL);
}

/* Alive for a while (long enough to be signalled or cancelled). */
static void* nap(void* arg) {
    usleep(100 * 1000);
    return arg;
}

/* Uses 1 MiB of its stack: it needs the 2 MiB it asks for (fibers' default is smaller). */
static void* deep(void* arg) {
    volatile char big[1 << 20];
    memset((char*)big, 1, sizeof big);
    return (void*)(intptr_t)(big[12345] + (int)(intptr_t)arg);
}

int main(int argc, char** argv) {
    pthread_t t[N];
    if (argc > 1 && strcmp(argv[1], "overflow") == 0) {
        pthread_attr_t small;
        pthread_attr_init(&small);
        pthread_attr_setstacksize(&small, 64u << 10);
        pthread_t o;
        if (pthread_create(&o, &small, overflow, NULL) != 0) return 19;
        pthread_join(o, NULL);
        return 0; /* not reached: the overflow ends the process */
    }
    if (argc > 1 && strcmp(argv[1], "kill") == 0) {
        /* pthread_kill and pthread_cancel of a thread that is a fiber: refused, by name. */
        pthread_t k;
        if (pthread_create(&k, NULL, nap, NULL) != 0) return 20;
        int killed = pthread_kill(k, 0);
        printf("kill %d cancel %d\n", killed, pthread_cancel(k));
        pthread_join(k, NULL);
        return 0;
    }
    static int main_value;
    if (pthread_key_create(&key, destroy_value) != 0 || pthread_setspecific(key, &main_value) != 0) return 16;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 2u << 20);
    pthread_t d;
    void* dret = NULL;
    if (pthread_create(&d, &attr, deep, (void*)(intptr_t)1) != 0 || pthread_join(d, &dret) != 0 ||
        (intptr_t)dret != 2)
        return 15;
    pthread_attr_destroy(&attr);
    for (int i = 0; i < N; ++i)
        if (pthread_create(&t[i], NULL, worker, (void*)(intptr_t)i) != 0) return 10;
    pthread_mutex_lock(&mu);
    while (arrived < N) pthread_cond_wait(&cv, &mu);
    printf("threads %d\n", os_threads());
    released = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < N; ++i) {
        void* ret = NULL;
        if (pthread_join(t[i], &ret) != 0 || (intptr_t)ret != 1000 + i) return 11;
        for (int j = 0; j < i; ++j)
            if (pthread_equal(selves[i], selves[j])) return 12;
    }
    if (counter != N) return 13;
    if (failures) {
        fprintf(stderr, "errno or a thread-specific value changed across a sleep in %d threads\n", failures);
        return 14;
    }
    if (destroyed != N) {
        fprintf(stderr, "%d thread-specific values destroyed, not %d\n", destroyed, N);
        return 17;
    }
    if (pthread_getspecific(key) != &main_value) return 18;
    pthread_t churn;
    void* churned = (void*)-1;
    if (pthread_create(&churn, NULL, key_churn, NULL) != 0 || pthread_join(churn, &churned) != 0 || churned)
        return 21;
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (p > 0) waitpid(p, NULL, 0);
        printf("fork %s\n", p < 0 ? strerror(errno) : "ok");
    }
    printf("ok\n");
    return 0;
}
