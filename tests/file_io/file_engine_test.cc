// The file engines, each on each event engine: the same operations, the same answers.
#include "gluon/file_io/file_engine.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gluon/runtime/fiber.h"
#include "high_fd.h"
#include "gluon/runtime/vcpu.h"
#include "file_io/io_fixture.h"

namespace gluon {
namespace {

class file_engine_test : public test::engine_pair_test {
protected:
    void SetUp() override {
        test::engine_pair_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        e_ = *file_io::get(file_engine_kind());
        dfd_ = ::open(dir_.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        ASSERT_GE(dfd_, 0);
    }
    void TearDown() override {
        if (dfd_ >= 0) ::close(dfd_);
        test::engine_pair_test::TearDown();
    }
    int create(const char* name) {
        auto fd = file_io::openat(*e_, dfd_, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        EXPECT_TRUE(fd.has_value()) << fd.error().message();
        return fd.value_or(-1);
    }

    file_io::file_engine* e_ = nullptr;
    int dfd_ = -1;
};

TEST_P(file_engine_test, write_then_read_back) {
    in_fiber([&] {
        int fd = create("a");
        std::string data(100000, 'x');
        for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
        auto w = file_io::pwrite(*e_, fd, data.data(), data.size(), 0);
        ASSERT_TRUE(w.has_value());
        EXPECT_EQ(*w, data.size());
        std::string back(data.size(), '\0');
        auto r = file_io::pread(*e_, fd, back.data(), back.size(), 0);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(*r, data.size());
        EXPECT_EQ(back, data);
        // Short read at end of file, then 0.
        char buf[64];
        auto s = file_io::pread(*e_, fd, buf, sizeof buf, static_cast<int64_t>(data.size()) - 10);
        ASSERT_TRUE(s.has_value());
        EXPECT_EQ(*s, 10u);
        auto eof = file_io::pread(*e_, fd, buf, sizeof buf, static_cast<int64_t>(data.size()));
        ASSERT_TRUE(eof.has_value());
        EXPECT_EQ(*eof, 0u);
        EXPECT_TRUE(file_io::fsync(*e_, fd).has_value());
        EXPECT_TRUE(file_io::fsync(*e_, fd, true).has_value());
        EXPECT_TRUE(file_io::close(*e_, fd).has_value());
    });
}

// A file at an fd above 65,536 is read and written like any other (the io_uring engine's
// per-fd classes cover every fd the process may open).
TEST_P(file_engine_test, fds_above_65536_read_and_write) {
    test::high_fds high;
    if (!high.available()) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit keeps fds below 65,536 here";
    in_fiber([&] {
        const int fd = high.move_high(create("high"));
        ASSERT_GE(fd, test::high_fds::k_first);
        const std::string data(20000, 'h');
        ASSERT_EQ(file_io::pwrite(*e_, fd, data.data(), data.size(), 0).value_or(0), data.size());
        for (int i = 0; i < 2; ++i) {  // the second read goes by the class the first one learned
            std::string back(data.size(), '\0');
            ASSERT_EQ(file_io::pread(*e_, fd, back.data(), back.size(), 0).value_or(0), data.size());
            EXPECT_EQ(back, data);
        }
        EXPECT_TRUE(file_io::close(*e_, fd).has_value());
    });
}

TEST_P(file_engine_test, vectored_io) {
    in_fiber([&] {
        int fd = create("v");
        char a[] = "hello ", b[] = "vectored ", c[] = "world";
        iovec out[] = {{a, 6}, {b, 9}, {c, 5}};
        auto w = file_io::pwritev(*e_, fd, out, 3, 100);
        ASSERT_TRUE(w.has_value());
        EXPECT_EQ(*w, 20u);
        char x[10] = {}, y[10] = {};
        iovec in[] = {{x, 10}, {y, 10}};
        auto r = file_io::preadv(*e_, fd, in, 2, 100);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(*r, 20u);
        EXPECT_EQ(std::string(x, 10) + std::string(y, 10), "hello vectored world");
        (void)file_io::close(*e_, fd);
    });
}

// A vectored read of a file whose first half is in the page cache and the rest on disk: whole,
// as a read is short only at the end of the file (the io_uring engine reads the cached part
// inline, the rest from the ring).
TEST_P(file_engine_test, a_vectored_read_of_a_partly_cached_file_is_whole) {
    constexpr size_t n = 1 << 20;
    int fd = ::openat(dfd_, "half", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    int direct = ::openat(dfd_, "half", O_RDWR | O_DIRECT | O_CLOEXEC);
    if (direct < 0) {
        ::close(fd);
        GTEST_SKIP() << "no O_DIRECT on this filesystem";
    }
    void* p = nullptr;
    ASSERT_EQ(posix_memalign(&p, 4096, n), 0);
    std::unique_ptr<void, decltype(&free)> own(p, &free);
    for (size_t i = 0; i < n; ++i) static_cast<char*>(p)[i] = static_cast<char>('a' + i / 4096 % 26);
    // Written around the page cache, then its first half read into it (no read-ahead).
    ASSERT_EQ(::pwrite(direct, p, n, 0), static_cast<ssize_t>(n));
    ::close(direct);
    ASSERT_EQ(::posix_fadvise(fd, 0, n, POSIX_FADV_RANDOM), 0);
    std::vector<char> warm(n / 2);
    ASSERT_EQ(::pread(fd, warm.data(), warm.size(), 0), static_cast<ssize_t>(warm.size()));
    in_fiber([&] {
        std::vector<char> x(n / 4), y(n - n / 4);
        iovec in[] = {{x.data(), x.size()}, {y.data(), y.size()}};
        auto r = file_io::preadv(*e_, fd, in, 2, 0);
        ASSERT_TRUE(r.has_value()) << r.error().message();
        EXPECT_EQ(*r, n);
        EXPECT_EQ(std::memcmp(x.data(), p, x.size()), 0);
        EXPECT_EQ(std::memcmp(y.data(), static_cast<char*>(p) + x.size(), y.size()), 0);
    });
    ::close(fd);
}

// A plain read or write of 2^32 bytes or more moves what one syscall would (0x7ffff000), not
// its length's low 32 bits: io_uring's SQE has only 32 of them, and the io_uring engine wrote
// 0 bytes of 2^32 (a writer looping to the end would give up, a reader would see a false end of
// file) and 16 of 2^32 + 16. /dev/null takes the write without touching the buffer, which is
// address space only (read-only and unreserved: nothing is committed).
TEST_P(file_engine_test, a_transfer_of_4_gib_or_more_is_not_cut_to_its_low_32_bits) {
    constexpr size_t n = size_t{1} << 32;
    void* m = ::mmap(nullptr, n + 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) GTEST_SKIP() << "no 4 GiB of address space";
    const int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    in_fiber([&] {
        for (size_t len : {n, n + 16}) {
            auto w = file_io::pwrite(*e_, fd, m, len, 0);
            ASSERT_TRUE(w.has_value()) << w.error().message();
            EXPECT_GE(*w, size_t{1} << 30) << len;
            EXPECT_LE(*w, len);
        }
    });
    ::close(fd);
    ::munmap(m, n + 4096);
}

TEST_P(file_engine_test, size_changes_and_metadata) {
    in_fiber([&] {
        int fd = create("m");
        ASSERT_TRUE(file_io::fallocate(*e_, fd, 0, 0, 1 << 20).has_value());
        auto st = file_io::statx(*e_, dfd_, "m", 0);
        ASSERT_TRUE(st.has_value());
        EXPECT_EQ(st->stx_size, 1u << 20);
        ASSERT_TRUE(file_io::ftruncate(*e_, fd, 4096).has_value());
        st = file_io::statx(*e_, fd, "", AT_EMPTY_PATH);
        ASSERT_TRUE(st.has_value());
        EXPECT_EQ(st->stx_size, 4096u);
        (void)file_io::close(*e_, fd);

        ASSERT_TRUE(file_io::mkdirat(*e_, dfd_, "sub").has_value());
        EXPECT_EQ(file_io::mkdirat(*e_, dfd_, "sub").error(), std::errc::file_exists);
        ASSERT_TRUE(file_io::renameat(*e_, dfd_, "m", dfd_, "sub/m2").has_value());
        EXPECT_EQ(file_io::statx(*e_, dfd_, "m", 0).error(), std::errc::no_such_file_or_directory);
        ASSERT_TRUE(file_io::statx(*e_, dfd_, "sub/m2", 0).has_value());
        EXPECT_EQ(file_io::unlinkat(*e_, dfd_, "sub", AT_REMOVEDIR).error(), std::errc::directory_not_empty);
        ASSERT_TRUE(file_io::unlinkat(*e_, dfd_, "sub/m2").has_value());
        ASSERT_TRUE(file_io::unlinkat(*e_, dfd_, "sub", AT_REMOVEDIR).has_value());
    });
}

TEST_P(file_engine_test, honest_errors) {
    in_fiber([&] {
        EXPECT_EQ(file_io::openat(*e_, dfd_, "missing", O_RDONLY).error(), std::errc::no_such_file_or_directory);
        int fd = create("x");
        EXPECT_EQ(file_io::openat(*e_, dfd_, "x", O_RDWR | O_CREAT | O_EXCL).error(), std::errc::file_exists);
        EXPECT_EQ(file_io::openat(*e_, dfd_, ".", O_WRONLY).error(), std::errc::is_a_directory);
        char buf[8];
        EXPECT_EQ(file_io::pread(*e_, 12345, buf, 8, 0).error(), std::errc::bad_file_descriptor);
        EXPECT_EQ(file_io::pread(*e_, dfd_, buf, 8, 0).error(), std::errc::is_a_directory);
        EXPECT_EQ(file_io::ftruncate(*e_, fd, -1).error(), std::errc::invalid_argument);
        // -1 is the current position; below it every engine refuses the offset (all but
        // io_uring read and wrote at the current position instead).
        ASSERT_EQ(::pwrite(fd, "abcdef", 6, 0), 6);
        ASSERT_EQ(::lseek(fd, 2, SEEK_SET), 2);
        char cur[3];
        auto c = file_io::pread(*e_, fd, cur, sizeof cur, -1);
        ASSERT_TRUE(c.has_value()) << c.error().message();
        EXPECT_EQ(std::string(cur, *c), "cde");
        iovec v{buf, sizeof buf};
        for (int64_t off : {int64_t{-2}, std::numeric_limits<int64_t>::min()}) {
            EXPECT_EQ(file_io::pread(*e_, fd, buf, 8, off).error(), std::errc::invalid_argument) << off;
            EXPECT_EQ(file_io::pwrite(*e_, fd, "x", 1, off).error(), std::errc::invalid_argument) << off;
            EXPECT_EQ(file_io::preadv(*e_, fd, &v, 1, off).error(), std::errc::invalid_argument) << off;
            EXPECT_EQ(file_io::pwritev(*e_, fd, &v, 1, off).error(), std::errc::invalid_argument) << off;
        }
        EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 5);  // only the -1 read moved it
        (void)file_io::close(*e_, fd);
        if (geteuid() != 0) {
            ::chmod((dir_ + "/x").c_str(), 0);
            EXPECT_EQ(file_io::openat(*e_, dfd_, "x", O_RDONLY).error(), std::errc::permission_denied);
        }
    });
}

TEST_P(file_engine_test, direct_io_and_many_fibers) {
    // 64 fibers read 4 KiB blocks at random offsets of one O_DIRECT file and check each.
    constexpr int k_blocks = 256;
    int setup = ::openat(dfd_, "d", O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(setup, 0);
    std::vector<char> content(k_blocks * 4096);
    for (int b = 0; b < k_blocks; ++b) std::memset(&content[b * 4096], 'A' + b % 50, 4096);
    ASSERT_EQ(::pwrite(setup, content.data(), content.size(), 0), static_cast<ssize_t>(content.size()));
    ::close(setup);
    int fd = ::openat(dfd_, "d", O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) GTEST_SKIP() << "no O_DIRECT on this filesystem";
    std::vector<fiber> fs;
    int bad = 0, done = 0;
    for (int i = 0; i < 64; ++i) {
        fs.push_back(*spawn([&, i] {
            void* p = nullptr;
            ASSERT_EQ(posix_memalign(&p, 4096, 4096), 0);
            for (int k = 0; k < 20; ++k) {
                int b = (i * 31 + k * 17) % k_blocks;
                auto r = file_io::pread(*e_, fd, p, 4096, static_cast<int64_t>(b) * 4096);
                if (!r || *r != 4096 || static_cast<char*>(p)[100] != 'A' + b % 50) ++bad;
                ++done;
            }
            free(p);
        }));
    }
    for (auto& f : fs) ASSERT_TRUE(f.join().has_value());
    ::close(fd);
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(done, 64 * 20);
}

TEST_P(file_engine_test, interrupt_ends_a_wait_that_can_be_cancelled) {
    // A read of an empty pipe blocks until cancelled; only io_uring can cancel it (the other
    // engines run non-positioned reads as a syscall on the offload pool).
    if (file_engine_kind() != file_io::engine_kind::io_uring) GTEST_SKIP() << "not cancellable";
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    long got = 0;
    auto f = spawn([&] {
        char c;
        auto r = file_io::pread(*e_, p[0], &c, 1, -1);
        got = r ? 1 : -r.error().value();
    });
    ASSERT_TRUE(f.has_value());
    this_fiber::yield();
    this_fiber::yield();
    ASSERT_TRUE(f->interrupt().has_value());
    ASSERT_TRUE(f->join().has_value());
    EXPECT_EQ(got, -ECANCELED);
    ::close(p[0]);
    ::close(p[1]);
}

// An interrupt that comes while a read waits and cannot cancel it (libaio cannot cancel a file
// read; POSIX AIO one that has started): the read's result wins and the interrupt stays pending
// for the next blocking call, as fiber.h says. libaio and POSIX AIO lost it.
TEST_P(file_engine_test, an_interrupt_that_loses_to_the_read_stays_pending) {
    int fd = ::openat(dfd_, "i", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    const std::string data(4096, 'i');
    ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    for (int round = 0; round < 8; ++round) {
        bool started = false, ended = false, pending_after = false;
        long got = 0;
        auto f = spawn([&] {
            started = true;
            char buf[4096];
            auto r = file_io::pread(*e_, fd, buf, sizeof buf, 0);
            got = r ? static_cast<long>(*r) : -r.error().value();
            pending_after = this_fiber::interrupt_pending();
            ended = true;
        });
        ASSERT_TRUE(f.has_value());
        while (!started) this_fiber::yield();
        // One vCPU: unless the read finished without waiting, the reader is parked in it now.
        const bool waiting = !ended;
        ASSERT_TRUE(f->interrupt().has_value());
        ASSERT_TRUE(f->join().has_value());
        if (!waiting) continue;
        if (got == -ECANCELED) continue;  // cancelled in time
        EXPECT_EQ(got, 4096);
        EXPECT_TRUE(pending_after) << "round " << round;
    }
    ::close(fd);
}

// Linux AIO cannot cancel a file read: a libaio read whose deadline has passed before it
// completes waits for it and returns what it read, as file_engine.h says, not ETIMEDOUT.
TEST_P(file_engine_test, a_libaio_read_past_its_deadline_returns_its_result) {
    if (file_engine_kind() != file_io::engine_kind::libaio) GTEST_SKIP() << "libaio only";
    int fd = ::openat(dfd_, "late", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "on time", 7, 0), 7);
    in_fiber([&] {
        char buf[16];
        auto r = file_io::pread(*e_, fd, buf, sizeof buf, 0, std::chrono::nanoseconds(0));
        ASSERT_TRUE(r.has_value()) << r.error().message();
        EXPECT_EQ(std::string(buf, *r), "on time");
    });
    ::close(fd);
}

// A read of a file whose first half is in the page cache, made with an interrupt pending: the
// io_uring engine reads the cached half inline, and the rest on the ring then ends at once on
// the interrupt. The call returns the half it read, so the interrupt must stay pending for the
// next blocking call (fiber.h); the engine dropped it, for plain and vectored reads alike.
TEST_P(file_engine_test, an_interrupt_that_cuts_a_partly_cached_read_short_stays_pending) {
    constexpr size_t n = 1 << 20;
    int fd = ::openat(dfd_, "part", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    int direct = ::openat(dfd_, "part", O_RDWR | O_DIRECT | O_CLOEXEC);
    if (direct < 0) {
        ::close(fd);
        GTEST_SKIP() << "no O_DIRECT on this filesystem";
    }
    void* p = nullptr;
    ASSERT_EQ(posix_memalign(&p, 4096, n), 0);
    std::unique_ptr<void, decltype(&free)> own(p, &free);
    std::memset(p, 'p', n);
    ASSERT_EQ(::posix_fadvise(fd, 0, n, POSIX_FADV_RANDOM), 0);
    for (bool vectored : {false, true}) {
        // Written around the page cache (which drops the range), then its first half read in.
        ASSERT_EQ(::pwrite(direct, p, n, 0), static_cast<ssize_t>(n));
        std::vector<char> warm(n / 2);
        ASSERT_EQ(::pread(fd, warm.data(), warm.size(), 0), static_cast<ssize_t>(warm.size()));
        in_fiber([&] {
            long got = 0;
            bool pending_after = false;
            auto f = spawn([&] {
                while (!this_fiber::interrupt_pending()) this_fiber::yield();
                std::vector<char> buf(n);
                iovec iov{buf.data(), n};
                auto r = vectored ? file_io::preadv(*e_, fd, &iov, 1, 0)
                                  : file_io::pread(*e_, fd, buf.data(), n, 0);
                got = r ? static_cast<long>(*r) : -r.error().value();
                pending_after = this_fiber::interrupt_pending();
            });
            ASSERT_TRUE(f.has_value());
            ASSERT_TRUE(f->interrupt().has_value());
            ASSERT_TRUE(f->join().has_value());
            if (got == -ECANCELED) return;  // cancelled before anything moved
            EXPECT_GT(got, 0) << "vectored " << vectored;
            EXPECT_TRUE(pending_after) << "vectored " << vectored << ", read " << got;
        });
    }
    ::close(direct);
    ::close(fd);
}

// glibc reports a POSIX AIO completion by starting a thread (SIGEV_THREAD), and says nothing
// when it cannot (a thread or memory limit): the read is done, aio_error says so, and no
// notification comes. The engine waited for it for ever. Here no new thread can start (every
// new thread's default stack is larger than the address space; glibc's own I/O threads set their
// size and still start), in a fresh process, as the limit stays.
TEST_P(file_engine_test, a_posix_aio_read_whose_notification_is_lost_still_returns) {
    if (file_engine_kind() != file_io::engine_kind::posix_aio) GTEST_SKIP() << "POSIX AIO only";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            ::alarm(20);  // a read that never returns ends the process instead of hanging it
            // The process ends here, without TearDown: its own directory goes first.
            auto leave = [&](int code) {
                (void)::unlinkat(dfd_, "lost", 0);
                (void)::rmdir(dir_.c_str());
                std::_Exit(code);
            };
            const int fd = ::openat(dfd_, "lost", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0 || ::pwrite(fd, "notice", 6, 0) != 6) leave(2);
            pthread_attr_t a;
            pthread_attr_init(&a);
            if (pthread_attr_setstacksize(&a, size_t{1} << 50) != 0 ||
                pthread_setattr_default_np(&a) != 0)
                leave(3);
            pthread_t t;
            if (pthread_create(&t, nullptr, [](void*) -> void* { return nullptr; }, nullptr) == 0)
                leave(4);  // threads still start: the test would prove nothing
            long got = 0;
            auto f = spawn([&] {
                char buf[16];
                auto r = file_io::pread(*e_, fd, buf, sizeof buf, 0);
                got = r ? static_cast<long>(*r) : -r.error().value();
            });
            if (!f || !f->join()) leave(5);
            leave(got == 6 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST_P(file_engine_test, registered_buffers_and_files) {
    // Opt-in io_uring fast path: fixed buffers and a fixed file on the vCPU's own ring. Other
    // engines run fixed-buffer ops as plain reads; a fixed file is EOPNOTSUPP there.
    int fd = ::openat(dfd_, "fixed", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "registered!", 11, 0), 11);
    engine::engine* eng = current_engine();
    const bool native = file_engine_kind() == file_io::engine_kind::io_uring &&
                        eng->type() == engine::kind::io_uring;
    alignas(64) char buf[64] = {};
    iovec iov{buf, sizeof buf};
    auto rb = eng->register_buffers(&iov, 1);
    auto rf = eng->register_files(&fd, 1);
    EXPECT_EQ(rb.has_value(), eng->type() == engine::kind::io_uring);
    EXPECT_EQ(rf.has_value(), eng->type() == engine::kind::io_uring);
    in_fiber([&] {
        auto op = engine::io_op::fixed(engine::opcode::read_fixed, native ? 0 : fd, buf, 11, 0, 0);
        op.fixed_file = native;
        EXPECT_EQ(e_->execute(op), 11);
        EXPECT_EQ(std::string(buf, 11), "registered!");
        if (!native) {
            auto bad = engine::io_op::transfer(engine::opcode::read, 0, buf, 1, 0);
            bad.fixed_file = true;
            EXPECT_EQ(e_->execute(bad), -EOPNOTSUPP);
        }
    });
    if (rb) (void)eng->register_buffers(nullptr, 0);
    if (rf) (void)eng->register_files(nullptr, 0);
    ::close(fd);
}

TEST(file_engine_sqpoll, file_io_on_an_sqpoll_ring) {
    if (!engine::available(engine::kind::io_uring)) GTEST_SKIP() << "no io_uring";
    init_options o;
    o.engine = engine::kind::io_uring;
    o.sqpoll = true;
    o.log_engine = false;
    auto r = init(o);
    if (!r && r.error() == std::errc::operation_not_permitted) GTEST_SKIP() << "SQPOLL not permitted";
    ASSERT_TRUE(r.has_value()) << r.error().message();
    auto* e = *file_io::get(file_io::engine_kind::io_uring);
    char path[] = "/tmp/gluon-sqpoll-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    auto f = spawn([&] {
        std::string data(8192, 's');
        for (int i = 0; i < 100; ++i) {
            auto w = file_io::pwrite(*e, fd, data.data(), data.size(), i * 8192);
            ASSERT_TRUE(w.has_value());
            ASSERT_EQ(*w, data.size());
        }
        std::string back(8192, '\0');
        ASSERT_EQ(*file_io::pread(*e, fd, back.data(), back.size(), 99 * 8192), 8192u);
        EXPECT_EQ(back, data);
        EXPECT_TRUE(file_io::fsync(*e, fd).has_value());
    });
    ASSERT_TRUE(f.has_value());
    ASSERT_TRUE(f->join().has_value());
    ::close(fd);
    ASSERT_TRUE(fini().has_value());
}

GLUON_ENGINE_PAIR_TEST_SUITE(file_engine_test);

}  // namespace
}  // namespace gluon
