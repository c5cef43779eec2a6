// A small std::thread producer/consumer program, moved onto fibers by changing one namespace
// alias: `namespace conc = std;` became `namespace conc = gluon::std_compat;` and main() calls
// gluon::init(). Every "thread" below is a fiber; blocking parks only the fiber.
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <vector>

#include "gluon/std.h"

namespace conc = gluon::std_compat;  // was: namespace conc = std;

namespace {

class bounded_queue {
public:
    explicit bounded_queue(size_t cap) : cap_(cap) {}
    void push(int v) {
        std::unique_lock lk(mu_);
        not_full_.wait(lk, [&] { return q_.size() < cap_; });
        q_.push_back(v);
        not_empty_.notify_one();
    }
    int pop() {
        std::unique_lock lk(mu_);
        not_empty_.wait(lk, [&] { return !q_.empty(); });
        int v = q_.front();
        q_.pop_front();
        not_full_.notify_one();
        return v;
    }

private:
    conc::mutex mu_;
    conc::condition_variable not_full_, not_empty_;
    std::deque<int> q_;
    size_t cap_;
};

}  // namespace

int main() {
    if (!gluon::init({.log_engine = false})) return 1;  // the one added line
    constexpr int producers = 4, per_producer = 10000;
    bounded_queue q(64);
    long total = 0;
    {
        std::vector<conc::thread> threads;
        for (int p = 0; p < producers; ++p)
            threads.emplace_back([&q] {
                for (int i = 1; i <= per_producer; ++i) q.push(i);
            });
        threads.emplace_back([&] {
            for (int i = 0; i < producers * per_producer; ++i) total += q.pop();
            conc::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        for (auto& t : threads) t.join();
    }
    const long expect = long{producers} * per_producer * (per_producer + 1) / 2;
    std::printf("consumed sum %ld (expected %ld)\n", total, expect);
    (void)gluon::fini();
    return total == expect ? 0 : 1;
}
