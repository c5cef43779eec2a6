// 8 vCPUs' worth of fibers hammer the sync primitives at once. Run under the tsan preset
// (`ctest --preset tsan`) this must produce no report; in the other presets it checks the counts.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

TEST(sync_stress, eight_vcpus_hammer_every_primitive) {
    auto rt = runtime::start(test::test_runtime(8));
    ASSERT_TRUE(rt);
    mutex m;
    shared_mutex sm;
    condition_variable cv;
    counting_semaphore sem(3);
    channel<int> ch(16);
    long counter = 0, shared_reads = 0;
    std::atomic<long> received{0}, sem_inside{0}, sem_max{0};
    constexpr int fibers_per_vcpu = 4, iters = 300;
    wait_group wg;
    wg.add(8 * fibers_per_vcpu);
    for (unsigned v = 0; v < 8; ++v)
        for (int k = 0; k < fibers_per_vcpu; ++k)
            ASSERT_TRUE((*rt)->post(v, [&, k] {
                for (int i = 0; i < iters; ++i) {
                    {
                        std::lock_guard g(m);
                        ++counter;
                        if (i % 32 == 0) cv.notify_all();
                    }
                    if (k == 0) {
                        std::unique_lock g(sm);
                        ++shared_reads;
                    } else {
                        std::shared_lock g(sm);
                        (void)shared_reads;
                    }
                    if (sem.acquire()) {
                        long in = ++sem_inside;
                        long prev = sem_max.load();
                        while (in > prev && !sem_max.compare_exchange_weak(prev, in)) {
                        }
                        if (i % 8 == 0) this_fiber::yield();
                        --sem_inside;
                        sem.release();
                    }
                    if (k % 2 == 0) {
                        (void)ch.send(i);
                    } else if (auto r = ch.recv(); r) {
                        ++received;
                    }
                }
                wg.done();
            }));
    ASSERT_TRUE(wg.wait(300s));
    EXPECT_EQ(counter, 8L * fibers_per_vcpu * iters);
    EXPECT_EQ(shared_reads, 8L * iters);
    EXPECT_LE(sem_max.load(), 3);
    EXPECT_EQ(received.load(), 8L * (fibers_per_vcpu / 2) * iters);
}

}  // namespace
}  // namespace gluon
