/* Plain C threads (no gluon) that come and go in waves: each round starts N threads that meet
 * at a condition variable and exit together, and the main thread joins them. Under fiber mode
 * with two vCPUs, both vCPUs then create and free fiber stacks at the same moment, which is
 * when gluon's own process-wide locks are taken on program fibers (docs/preload.md: the locks
 * inside the library must stay libc's). Prints "ok" and exits 0 when every round completed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N 400
#define ROUNDS 30
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int arrived, round_no;

static void* body(void* arg) {
    int r = (int)(long)arg;
    pthread_mutex_lock(&mu);
    if (++arrived == N) {
        arrived = 0;
        ++round_no;
        pthread_cond_broadcast(&cv);
    }
    while (round_no == r) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return arg;
}

int main(void) {
    static pthread_t t[N];
    for (int r = 0; r < ROUNDS; ++r) {
        for (int i = 0; i < N; ++i)
            if (pthread_create(&t[i], NULL, body, (void*)(long)r) != 0) {
                fprintf(stderr, "thread_churn: pthread_create failed\n");
                return 1;
            }
        for (int i = 0; i < N; ++i) {
            void* ret = NULL;
            if (pthread_join(t[i], &ret) != 0 || ret != (void*)(long)r) {
                fprintf(stderr, "thread_churn: join of round %d thread %d failed\n", r, i);
                return 1;
            }
        }
    }
    printf("ok\n");
    return 0;
}
