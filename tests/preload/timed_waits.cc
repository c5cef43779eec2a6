// Plain C++ threads (the standard library and pthreads, no gluon) waiting with timeouts the way
// libstdc++ does: std::condition_variable::wait_for (pthread_cond_clockwait on the monotonic
// clock), std::timed_mutex::try_lock_for (pthread_mutex_clocklock), and glibc's joins with a
// timeout (pthread_timedjoin_np, pthread_clockjoin_np, pthread_tryjoin_np); then what a thread
// may ask about itself (pthread_getattr_np, the affinity calls), and a timed semaphore wait.
// Prints "ok" and exits 0 if every check held; otherwise names the first that failed and exits 1.
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

namespace {

using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

int failed(const char* what) {
    std::printf("failed: %s\n", what);
    return 1;
}

timespec in(clockid_t c, std::chrono::milliseconds ms) {
    timespec t;
    clock_gettime(c, &t);
    long long ns = t.tv_nsec + ms.count() * 1'000'000LL;
    t.tv_sec += static_cast<time_t>(ns / 1'000'000'000LL);
    t.tv_nsec = static_cast<long>(ns % 1'000'000'000LL);
    return t;
}

int condition_variables() {
    std::mutex m;
    std::condition_variable cv;
    bool flag = false;
    {
        std::unique_lock lk(m);
        auto t0 = clk::now();
        if (cv.wait_for(lk, 30ms) != std::cv_status::timeout) return failed("cv.wait_for without a notify");
        if (clk::now() - t0 < 30ms) return failed("cv.wait_for ended early");
    }
    std::thread t([&] {
        std::this_thread::sleep_for(10ms);
        std::lock_guard g(m);
        flag = true;
        cv.notify_one();
    });
    {
        std::unique_lock lk(m);
        if (!cv.wait_for(lk, 10s, [&] { return flag; })) return failed("cv.wait_for with a notify");
    }
    t.join();
    // The mutex still excludes after timed waits: two threads count under it.
    long count = 0;
    auto add = [&] {
        for (int i = 0; i < 10000; ++i) {
            std::unique_lock lk(m);
            if (i % 1000 == 0) (void)cv.wait_for(lk, 1us);
            ++count;
        }
    };
    std::thread a(add), b(add);
    a.join();
    b.join();
    return count == 20000 ? 0 : failed("a mutex used with timed waits lost updates");
}

int timed_mutexes() {
    std::timed_mutex tm;
    std::atomic<int> stage{0};
    std::thread holder([&] {
        tm.lock();
        stage = 1;
        while (stage != 2) std::this_thread::sleep_for(1ms);
        tm.unlock();
    });
    while (stage != 1) std::this_thread::sleep_for(1ms);
    auto t0 = clk::now();
    if (tm.try_lock_for(30ms)) return failed("try_lock_for took a held mutex");
    if (clk::now() - t0 < 30ms) return failed("try_lock_for ended early");
    pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&pm);
    std::thread other([&] {
        timespec t = in(CLOCK_MONOTONIC, 20ms);
        if (pthread_mutex_clocklock(&pm, CLOCK_MONOTONIC, &t) != ETIMEDOUT) stage = -1;
    });
    other.join();
    pthread_mutex_unlock(&pm);
    if (stage == -1) return failed("pthread_mutex_clocklock on a held mutex");
    stage = 2;
    if (!tm.try_lock_for(10s)) return failed("try_lock_for after the release");
    tm.unlock();
    holder.join();
    return 0;
}

std::atomic<bool> g_release{false};
void* wait_for_release(void*) {
    while (!g_release) std::this_thread::sleep_for(1ms);
    return reinterpret_cast<void*>(intptr_t{42});
}

int joins() {
    pthread_t t;
    if (pthread_create(&t, nullptr, wait_for_release, nullptr) != 0) return failed("pthread_create");
    void* ret = nullptr;
    if (pthread_tryjoin_np(t, &ret) != EBUSY) return failed("pthread_tryjoin_np on a running thread");
    timespec rt = in(CLOCK_REALTIME, 20ms);
    if (pthread_timedjoin_np(t, &ret, &rt) != ETIMEDOUT) return failed("pthread_timedjoin_np on a running thread");
    timespec mt = in(CLOCK_MONOTONIC, 20ms);
    if (pthread_clockjoin_np(t, &ret, CLOCK_MONOTONIC, &mt) != ETIMEDOUT)
        return failed("pthread_clockjoin_np on a running thread");
    g_release = true;
    mt = in(CLOCK_MONOTONIC, 10'000ms);
    if (pthread_clockjoin_np(t, &ret, CLOCK_MONOTONIC, &mt) != 0 || ret != reinterpret_cast<void*>(intptr_t{42}))
        return failed("pthread_clockjoin_np on a thread that ends");
    return 0;
}

int about_itself() {
    int result = 0;
    std::thread t([&] {
        pthread_attr_t a;
        if (pthread_getattr_np(pthread_self(), &a) != 0) {
            result = failed("pthread_getattr_np of itself");
            return;
        }
        void* stack = nullptr;
        size_t size = 0;
        pthread_attr_getstack(&a, &stack, &size);
        pthread_attr_destroy(&a);
        int here = 0;
        auto p = reinterpret_cast<uintptr_t>(&here), lo = reinterpret_cast<uintptr_t>(stack);
        if (p < lo || p >= lo + size) {
            result = failed("pthread_getattr_np: the stack does not hold the thread's locals");
            return;
        }
        cpu_set_t set;
        CPU_ZERO(&set);
        if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0 || CPU_COUNT(&set) == 0) {
            result = failed("pthread_getaffinity_np of itself");
            return;
        }
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
            result = failed("pthread_setaffinity_np of itself");
            return;
        }
        sem_t sem;
        sem_init(&sem, 0, 1);
        timespec t = in(CLOCK_MONOTONIC, 1000ms);
        if (sem_clockwait(&sem, CLOCK_MONOTONIC, &t) != 0) result = failed("sem_clockwait on a posted semaphore");
        sem_destroy(&sem);
    });
    t.join();
    return result;
}

}  // namespace

int main() {
    if (int r = condition_variables()) return r;
    if (int r = timed_mutexes()) return r;
    if (int r = joins()) return r;
    if (int r = about_itself()) return r;
    std::printf("ok\n");
    return 0;
}
