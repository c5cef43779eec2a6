// aligned, throttled, linear and striped files, and the sub-filesystem.
#include <fcntl.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "fs_fixture.h"
#include "gluon/fs/decorators.h"
#include "gluon/fs/path.h"
#include "gluon/fs/sub_filesystem.h"

namespace gluon::test {
namespace {

class decorators_test : public fs_test {};

std::string pattern(size_t n, unsigned seed) {
    std::string s(n, '\0');
    std::mt19937 rng(seed);
    for (auto& c : s) c = static_cast<char>('a' + rng() % 26);
    return s;
}

TEST_P(decorators_test, aligned_file_makes_unaligned_io_work_on_o_direct) {
    in_fiber([&] {
        auto raw = fs_->open("al", O_RDWR | O_CREAT | O_DIRECT);
        if (!raw && raw.error() == std::errc::invalid_argument) GTEST_SKIP() << "no O_DIRECT here";
        ASSERT_TRUE(raw.has_value());
        auto f = fs::make_aligned(std::move(*raw), 4096);
        ASSERT_TRUE(f.has_value());
        std::string model;
        // Random unaligned writes and reads, checked against an in-memory model.
        std::mt19937 rng(7);
        for (int i = 0; i < 60; ++i) {
            size_t off = rng() % 20000, n = 1 + rng() % 9000;
            std::string d = pattern(n, static_cast<unsigned>(i));
            auto w = (*f)->pwrite(d.data(), n, static_cast<int64_t>(off));
            ASSERT_TRUE(w.has_value()) << w.error().message();
            ASSERT_EQ(*w, n);
            if (model.size() < off + n) model.resize(off + n, '\0');
            model.replace(off, n, d);
            ASSERT_EQ((*f)->fstat()->st_size, static_cast<off_t>(model.size()));  // exact length
            size_t roff = rng() % (model.size() + 100), rn = 1 + rng() % 7000;
            std::string back(rn, '?');
            auto r = (*f)->pread(back.data(), rn, static_cast<int64_t>(roff));
            ASSERT_TRUE(r.has_value());
            size_t expect = roff >= model.size() ? 0 : std::min(rn, model.size() - roff);
            ASSERT_EQ(*r, expect);
            EXPECT_EQ(back.substr(0, expect), model.substr(std::min(roff, model.size()), expect));
        }
        EXPECT_FALSE(fs::make_aligned(nullptr, 4096).has_value());
    });
}

// A file in memory whose writes never park; in_write runs inside the next pwrite, before it
// writes: there another fiber's call can land in the middle of an aligned file's merge.
class memory_file : public fs::file {
public:
    std::string data;
    std::function<void()> in_write;

    result<struct stat> fstat() noexcept override {
        struct stat st {};
        st.st_mode = S_IFREG | 0644;
        st.st_size = static_cast<off_t>(data.size());
        return st;
    }
    result<void> fsync() noexcept override { return {}; }
    result<void> ftruncate(int64_t len) noexcept override {
        data.resize(static_cast<size_t>(len));
        return {};
    }
    result<void> close() noexcept override { return {}; }

protected:
    result<size_t> do_pread(void* b, size_t n, int64_t off, deadline_t) noexcept override {
        const auto o = static_cast<size_t>(off);
        if (o >= data.size()) return size_t{0};
        n = std::min(n, data.size() - o);
        std::memcpy(b, data.data() + o, n);
        return n;
    }
    result<size_t> do_pwrite(const void* b, size_t n, int64_t off, deadline_t) noexcept override {
        if (auto hook = std::exchange(in_write, nullptr)) hook();
        const auto o = static_cast<size_t>(off);
        if (data.size() < o + n) data.resize(o + n);
        std::memcpy(data.data() + o, b, n);
        return n;
    }
};

TEST_P(decorators_test, an_aligned_write_waits_for_a_merge_in_progress) {
    in_fiber([&] {
        auto mem = std::make_unique<memory_file>();
        memory_file& m = *mem;
        m.data.assign(4096 + 20, 'o');  // the last block is partial
        auto f = fs::make_aligned(std::move(mem), 4096);
        ASSERT_TRUE(f.has_value());
        std::unique_ptr<char, decltype(&std::free)> block(static_cast<char*>(std::aligned_alloc(4096, 4096)), &std::free);
        ASSERT_TRUE(block);
        std::memset(block.get(), 'B', 4096);
        // While an unaligned write in the partial block writes its merged block back (and is
        // yet to cut the file to the length it saw), another fiber appends an aligned block.
        fiber other;
        bool appended = false;
        m.in_write = [&] {
            auto r = spawn([&] { appended = (*f)->pwrite(block.get(), 4096, 8192).has_value(); });
            ASSERT_TRUE(r.has_value());
            other = std::move(*r);
            for (int i = 0; i < 100 && !appended; ++i) this_fiber::yield();  // unlocked, it is done at once
        };
        auto w = (*f)->pwrite("UUUUUUUUUU", 10, 4096 + 5);
        ASSERT_TRUE(w.has_value()) << w.error().message();
        EXPECT_EQ(*w, 10u);
        ASSERT_TRUE(other.join().has_value());
        EXPECT_TRUE(appended);
        ASSERT_EQ(m.data.size(), 3 * 4096u);  // the appended block was not cut off
        EXPECT_EQ(m.data.substr(4096, 20), "oooooUUUUUUUUUUooooo");
        EXPECT_EQ(m.data.substr(8192), std::string(4096, 'B'));
    });
}

// A write that waits for a merge in progress gives up at its timeout: the lock's wait ignored
// the deadline, so the call waited as long as the merge took (here, until the test gave up).
TEST_P(decorators_test, a_write_waiting_for_a_merge_ends_at_its_timeout) {
    using namespace std::chrono_literals;
    in_fiber([&] {
        auto mem = std::make_unique<memory_file>();
        memory_file& m = *mem;
        m.data.assign(4096 + 20, 'o');
        auto f = fs::make_aligned(std::move(mem), 4096);
        ASSERT_TRUE(f.has_value());
        std::unique_ptr<char, decltype(&std::free)> block(static_cast<char*>(std::aligned_alloc(4096, 4096)), &std::free);
        ASSERT_TRUE(block);
        std::memset(block.get(), 'B', 4096);
        // While an unaligned write holds the lock (writing its merged block back), another fiber
        // writes an aligned block, then an unaligned piece, each with a 20 ms timeout.
        result<size_t> aligned_w = size_t{0}, unaligned_w = size_t{0};
        bool in_time = false;
        fiber other;
        m.in_write = [&] {
            auto r = spawn([&] {
                aligned_w = (*f)->pwrite(block.get(), 4096, 8192, 20ms);
                unaligned_w = (*f)->pwrite("xy", 2, 8192 + 3, 20ms);
            });
            ASSERT_TRUE(r.has_value());
            other = std::move(*r);
            in_time = other.join_for(10s).has_value();  // the merge waits for it: a real bound
        };
        auto w = (*f)->pwrite("UUUUUUUUUU", 10, 4096 + 5);
        if (other.joinable()) (void)other.join();  // it ends once the merge is done
        ASSERT_TRUE(w.has_value()) << w.error().message();
        ASSERT_TRUE(in_time) << "the writes waited for the merge past their timeout";
        ASSERT_FALSE(aligned_w.has_value());
        EXPECT_EQ(aligned_w.error(), std::errc::timed_out);
        ASSERT_FALSE(unaligned_w.has_value());
        EXPECT_EQ(unaligned_w.error(), std::errc::timed_out);
        EXPECT_EQ(m.data.size(), 4096 + 20u);  // neither write happened
        EXPECT_EQ(m.data.substr(4096, 20), "oooooUUUUUUUUUUooooo");
    });
}

TEST_P(decorators_test, throttled_file_holds_its_rate) {
    in_fiber([&] {
        auto f = make("t", std::string(64 * 1024, 'x'));
        auto t = fs::make_throttled(std::move(f), {.iops = 200, .bytes_per_s = 0});
        char buf[16];
        const int64_t t0 = mono_now_ns();
        for (int i = 0; i < 21; ++i) ASSERT_TRUE(t->pread(buf, sizeof buf, i).has_value());
        const double ms = static_cast<double>(mono_now_ns() - t0) / 1e6;
        EXPECT_GE(ms, 95.0);  // 20 intervals of 5 ms after the first, unthrottled, read
        auto b = fs::make_throttled(make("u", std::string(64 * 1024, 'y')), {.iops = 0, .bytes_per_s = 1 << 20});
        std::string big(64 * 1024, '\0');
        const int64_t t1 = mono_now_ns();
        for (int i = 0; i < 5; ++i) ASSERT_TRUE(b->pread(big.data(), big.size(), 0).has_value());
        EXPECT_GE(static_cast<double>(mono_now_ns() - t1) / 1e6, 4 * 62.0);  // 64 KiB at 1 MiB/s
    });
}

TEST_P(decorators_test, a_throttled_read_past_its_timeout_fails_with_etimedout) {
    using namespace std::chrono_literals;
    in_fiber([&] {
        auto t = fs::make_throttled(make("t", std::string(4096, 'x')), {.iops = 2, .bytes_per_s = 0});
        char buf[16];
        ASSERT_TRUE(t->pread(buf, sizeof buf, 0, 20ms));  // the first slot is now
        const int64_t t0 = mono_now_ns();
        EXPECT_EQ(t->pread(buf, sizeof buf, 0, 20ms).error(), std::errc::timed_out);
        const double waited_ms = static_cast<double>(mono_now_ns() - t0) / 1e6;
        EXPECT_GE(waited_ms, 19.0);  // the timeout is waited out, then the call gives up
        EXPECT_EQ(t->pread_exactly(buf, sizeof buf, 0, 10ms).error(), std::errc::timed_out);
    });
}

TEST_P(decorators_test, linear_and_striped_files) {
    in_fiber([&] {
        std::vector<std::unique_ptr<fs::file>> parts;
        parts.push_back(make("p0", std::string(1000, 'a')));
        parts.push_back(make("p1", std::string(500, 'b')));
        parts.push_back(make("p2", ""));
        auto lin = fs::make_linear(std::move(parts));
        ASSERT_TRUE(lin.has_value());
        std::string buf(1600, '\0');
        ASSERT_TRUE((*lin)->pwrite_all("XYZ", 3, 1499).has_value());  // spans p1 and p2
        ASSERT_EQ(*(*lin)->pread(buf.data(), buf.size(), 0), 1502u);
        EXPECT_EQ(buf.substr(995, 10), "aaaaabbbbb");
        EXPECT_EQ(buf.substr(1498, 4), "bXYZ");
        EXPECT_EQ((*lin)->fstat()->st_size, 1502);
        EXPECT_EQ(slurp("p2"), "YZ");
        EXPECT_EQ((*lin)->ftruncate(0).error(), std::errc::operation_not_supported);

        std::vector<std::unique_ptr<fs::file>> sp;
        for (const char* n : {"s0", "s1", "s2"}) sp.push_back(make(n, ""));
        auto st = fs::make_striped(std::move(sp), 4);
        ASSERT_TRUE(st.has_value());
        std::string d = "AAAABBBBCCCCDDDDEE";
        ASSERT_TRUE((*st)->pwrite_all(d.data(), d.size(), 0).has_value());
        EXPECT_EQ(slurp("s0"), "AAAADDDD");
        EXPECT_EQ(slurp("s1"), "BBBBEE");
        EXPECT_EQ(slurp("s2"), "CCCC");
        EXPECT_EQ((*st)->fstat()->st_size, 18);
        std::string back(30, '\0');
        ASSERT_EQ(*(*st)->pread(back.data(), back.size(), 2), 16u);
        EXPECT_EQ(back.substr(0, 16), d.substr(2));
        EXPECT_FALSE(fs::make_striped({}, 4).has_value());
    });
}

// A striped file written out of order: stripe 2 (in part 0) never written, stripe 3 (in part 1)
// written. Its size runs to the end of stripe 3, and stripe 2 reads as a hole; the read stopped
// where part 0 ends, short before the end of the file (pread_exactly then failed with ENODATA).
TEST_P(decorators_test, a_striped_file_reads_a_stripe_never_written_as_zeros) {
    in_fiber([&] {
        std::vector<std::unique_ptr<fs::file>> sp;
        for (const char* n : {"h0", "h1"}) sp.push_back(make(n, ""));
        auto st = fs::make_striped(std::move(sp), 4);
        ASSERT_TRUE(st.has_value());
        ASSERT_TRUE((*st)->pwrite_all("AAAABBBB", 8, 0).has_value());
        ASSERT_TRUE((*st)->pwrite_all("DDDD", 4, 12).has_value());
        EXPECT_EQ((*st)->fstat()->st_size, 16);
        std::string back(20, '?');
        auto r = (*st)->pread(back.data(), back.size(), 0);
        ASSERT_TRUE(r.has_value()) << r.error().message();
        EXPECT_EQ(*r, 16u);
        EXPECT_EQ(back.substr(0, 16), std::string("AAAABBBB\0\0\0\0DDDD", 16));
        std::string mid(6, '?');
        ASSERT_TRUE((*st)->pread_exactly(mid.data(), mid.size(), 6).has_value());
        EXPECT_EQ(mid, std::string("BB\0\0\0\0", 6));
        // At and past the end: 0.
        EXPECT_EQ(*(*st)->pread(back.data(), 4, 16), 0u);
    });
}

TEST_P(decorators_test, sub_filesystem_rejects_escapes) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->mkdir("jail").has_value());
        ASSERT_TRUE(make("secret", "s3cr3t"));
        ASSERT_TRUE(make("jail/inside", "ok"));
        std::shared_ptr<fs::filesystem> base(std::move(fs_));
        auto sub = fs::make_sub_filesystem(base, "jail");
        ASSERT_TRUE(sub.has_value());
        auto& s = **sub;
        EXPECT_TRUE(s.stat("/inside").has_value());
        EXPECT_TRUE(s.stat("x/../inside").has_value());
        EXPECT_EQ(s.open("../secret", O_RDONLY).error(), std::errc::permission_denied);
        EXPECT_EQ(s.stat("/../secret").error(), std::errc::permission_denied);
        EXPECT_EQ(s.rename("inside", "../out").error(), std::errc::permission_denied);
        EXPECT_EQ(s.stat("a/../../secret").error(), std::errc::permission_denied);
        // A NUL ends the path in the base filesystem: "..\0" would be the jail's parent there.
        EXPECT_EQ(s.opendir(std::string_view("..\0", 3)).error(), std::errc::invalid_argument);
        EXPECT_EQ(s.stat(std::string_view("..\0/secret", 10)).error(), std::errc::invalid_argument);
        EXPECT_EQ(s.open(std::string_view("inside\0x", 8), O_RDONLY).error(), std::errc::invalid_argument);
        ASSERT_TRUE(s.mkdir("d").has_value());
        EXPECT_TRUE(base->stat("jail/d").has_value());
        EXPECT_EQ(fs::make_sub_filesystem(base, "secret").error(), std::errc::not_a_directory);

        // A directory held open from it (copy_tree's walk) is confined the same way, and stays
        // the directory it was when renamed.
        ASSERT_TRUE(s.mkdir("d/e").has_value());
        ASSERT_TRUE(s.open("d/e/f", O_WRONLY | O_CREAT).has_value());
        auto held = s.open_root("d");
        ASSERT_TRUE(held.has_value()) << held.error().message();
        EXPECT_EQ((*held)->stat("../../secret").error(), std::errc::permission_denied);
        EXPECT_EQ((*held)->stat("../inside").error(), std::errc::permission_denied);
        EXPECT_EQ(s.open_root("../").error(), std::errc::permission_denied);
        ASSERT_TRUE(s.rename("d", "moved").has_value());
        EXPECT_TRUE((*held)->stat("e/f").has_value());
        EXPECT_EQ(s.open_root("inside", O_NOFOLLOW).error(), std::errc::not_a_directory);
        held->reset();
        fs_.reset();
    });
}

GLUON_FS_TEST_SUITE(decorators_test);

}  // namespace
}  // namespace gluon::test
