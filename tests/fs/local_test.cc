// The local filesystem on every file engine and event engine.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "fs_fixture.h"
#include "gluon/fs/path.h"

namespace gluon::test {
namespace {

class local_fs_test : public fs_test {};

TEST_P(local_fs_test, files_read_write_seek_and_stat) {
    in_fiber([&] {
        auto f = make("a.txt", "hello world");
        ASSERT_TRUE(f);
        auto st = f->fstat();
        ASSERT_TRUE(st.has_value());
        EXPECT_EQ(st->st_size, 11);
        EXPECT_TRUE(S_ISREG(st->st_mode));
        ASSERT_EQ(*f->lseek(6, SEEK_SET), 6);
        char buf[16] = {};
        ASSERT_EQ(*f->read(buf, sizeof buf), 5u);
        EXPECT_STREQ(buf, "world");
        EXPECT_EQ(*f->read(buf, sizeof buf), 0u);  // EOF
        ASSERT_EQ(*f->lseek(-5, SEEK_END), 6);
        ASSERT_EQ(*f->write("WORLD!", 6), 6u);
        EXPECT_EQ(f->lseek(-100, SEEK_CUR).error(), std::errc::invalid_argument);
        EXPECT_TRUE(f->fsync().has_value());
        EXPECT_TRUE(f->fdatasync().has_value());
        ASSERT_TRUE(f->ftruncate(5).has_value());
        ASSERT_TRUE(f->close().has_value());
        EXPECT_EQ(f->pread(buf, 1, 0).error(), std::errc::bad_file_descriptor);
        EXPECT_EQ(slurp("a.txt"), "hello");
        auto s = fs_->stat("/a.txt");  // '/' is the filesystem's root
        ASSERT_TRUE(s.has_value());
        EXPECT_EQ(s->st_size, 5);
    });
}

// POSIX lseek: a position off_t cannot hold is EOVERFLOW. The sum was computed unchecked (signed
// overflow), and a far SEEK_CUR or SEEK_END wrapped round to a negative position (EINVAL).
TEST_P(local_fs_test, a_seek_past_int64_max_is_eoverflow) {
    in_fiber([&] {
        constexpr int64_t max = std::numeric_limits<int64_t>::max();
        auto f = make("far", "hello world");
        ASSERT_TRUE(f);
        ASSERT_EQ(*f->lseek(max - 1, SEEK_SET), max - 1);
        EXPECT_EQ(*f->lseek(1, SEEK_CUR), max);  // the largest position is fine
        EXPECT_EQ(f->lseek(1, SEEK_CUR).error(), std::errc::value_too_large);
        EXPECT_EQ(f->lseek(max, SEEK_CUR).error(), std::errc::value_too_large);
        EXPECT_EQ(*f->lseek(0, SEEK_CUR), max);  // a failed seek leaves the position
        EXPECT_EQ(f->lseek(max, SEEK_END).error(), std::errc::value_too_large);
        EXPECT_EQ(*f->lseek(max - 11, SEEK_END), max);
        EXPECT_EQ(f->lseek(std::numeric_limits<int64_t>::min(), SEEK_CUR).error(), std::errc::invalid_argument);
        EXPECT_EQ(*f->lseek(-max, SEEK_CUR), 0);
        EXPECT_EQ(f->lseek(std::numeric_limits<int64_t>::min(), SEEK_END).error(), std::errc::invalid_argument);
        EXPECT_EQ(*f->lseek(0, SEEK_CUR), 0);
    });
}

TEST_P(local_fs_test, vectored_and_exact_transfers) {
    in_fiber([&] {
        auto f = make("v", "");
        char a[] = "abc", b[] = "defgh";
        iovec w[] = {{a, 3}, {b, 5}};
        ASSERT_EQ(*f->pwritev(w, 2, 10), 8u);
        char x[4] = {}, y[4] = {};
        iovec r[] = {{x, 4}, {y, 4}};
        ASSERT_EQ(*f->preadv(r, 2, 10), 8u);
        EXPECT_EQ(std::string(x, 4) + std::string(y, 4), "abcdefgh");
        char big[32];
        EXPECT_EQ(f->pread_exactly(big, sizeof big, 0).error(), std::errc::no_message_available);
        char hole[10];
        ASSERT_TRUE(f->pread_exactly(hole, 10, 0).has_value());  // the hole reads as zeros
        EXPECT_EQ(hole[3], 0);
    });
}

TEST_P(local_fs_test, namespace_operations) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->mkdir("d").has_value());
        EXPECT_EQ(fs_->mkdir("d").error(), std::errc::file_exists);
        EXPECT_EQ(fs_->mkdir("no/such").error(), std::errc::no_such_file_or_directory);
        ASSERT_TRUE(make("d/f", "data"));
        ASSERT_TRUE(fs_->rename("d/f", "d/g").has_value());
        EXPECT_EQ(fs_->stat("d/f").error(), std::errc::no_such_file_or_directory);
        ASSERT_TRUE(fs_->link("d/g", "d/h").has_value());
        EXPECT_EQ(fs_->stat("d/h")->st_nlink, 2u);
        ASSERT_TRUE(fs_->symlink("g", "d/s").has_value());
        EXPECT_EQ(*fs_->readlink("d/s"), "g");
        EXPECT_EQ(fs_->readlink("d/g").error(), std::errc::invalid_argument);
        EXPECT_TRUE(S_ISLNK(fs_->lstat("d/s")->st_mode));
        EXPECT_TRUE(S_ISREG(fs_->stat("d/s")->st_mode));
        EXPECT_TRUE(fs_->access("d/g", R_OK | W_OK).has_value());
        EXPECT_EQ(fs_->access("d/nope", F_OK).error(), std::errc::no_such_file_or_directory);
        ASSERT_TRUE(fs_->truncate("d/g", 2).has_value());
        EXPECT_EQ(slurp("d/h"), "da");
        timespec t[2] = {{1000, 0}, {2000, 0}};
        ASSERT_TRUE(fs_->utimes("d/g", t).has_value());
        EXPECT_EQ(fs_->stat("d/g")->st_mtim.tv_sec, 2000);
        auto sv = fs_->statfs("d");
        ASSERT_TRUE(sv.has_value());
        EXPECT_GT(sv->f_bsize, 0u);

        std::set<std::string> names;
        auto dir = fs_->opendir("d");
        ASSERT_TRUE(dir.has_value());
        for (;;) {
            auto e = (*dir)->next();
            ASSERT_TRUE(e.has_value());
            if (!*e) break;
            names.insert((*e)->name);
        }
        EXPECT_EQ(names, (std::set<std::string>{"g", "h", "s"}));
        EXPECT_EQ(fs_->rmdir("d").error(), std::errc::directory_not_empty);
        EXPECT_EQ(fs_->unlink("d").error(), std::errc::is_a_directory);
        for (const char* n : {"d/g", "d/h", "d/s"}) ASSERT_TRUE(fs_->unlink(n).has_value());
        ASSERT_TRUE(fs_->rmdir("d").has_value());
        EXPECT_EQ(fs_->opendir("d").error(), std::errc::no_such_file_or_directory);
    });
}

TEST_P(local_fs_test, honest_errors) {
    in_fiber([&] {
        EXPECT_EQ(fs_->open("missing", O_RDONLY).error(), std::errc::no_such_file_or_directory);
        ASSERT_TRUE(fs_->mkdir("dir").has_value());
        EXPECT_EQ(fs_->open("dir", O_WRONLY).error(), std::errc::is_a_directory);
        ASSERT_TRUE(make("x", "1"));
        EXPECT_EQ(fs_->open("x", O_CREAT | O_EXCL | O_WRONLY).error(), std::errc::file_exists);
        EXPECT_EQ(fs_->open("x/y", O_RDONLY).error(), std::errc::not_a_directory);
        EXPECT_EQ(fs_->truncate("x", -1).error(), std::errc::invalid_argument);
        auto ro = fs_->open("x", O_RDONLY);
        ASSERT_TRUE(ro.has_value());
        EXPECT_EQ((*ro)->pwrite("z", 1, 0).error(), std::errc::bad_file_descriptor);
        EXPECT_EQ((*ro)->pread(nullptr, 0, -1).error(), std::errc::invalid_argument);
        if (geteuid() != 0) {
            ASSERT_EQ(::chmod((dir_ + "/x").c_str(), 0), 0);
            EXPECT_EQ(fs_->open("x", O_RDONLY).error(), std::errc::permission_denied);
        }
    });
}

// The kernel ends a path at its first NUL: "a\0x" reached the system call as "a", so each call
// acted on a name it was not given (opened, removed, renamed or changed "a").
TEST_P(local_fs_test, a_path_with_a_nul_is_refused) {
    in_fiber([&] {
        using namespace std::string_view_literals;
        ASSERT_TRUE(make("a", "keep"));
        ASSERT_TRUE(fs_->mkdir("d").has_value());
        ASSERT_TRUE(fs_->symlink("a", "s").has_value());
        const mode_t mode = fs_->stat("a")->st_mode;
        const auto a = "a\0x"sv, d = "d\0x"sv, s = "s\0x"sv, n = "n\0x"sv;
        const auto einval = std::errc::invalid_argument;
        EXPECT_EQ(fs_->open(a, O_RDONLY).error(), einval);
        EXPECT_EQ(fs_->open(n, O_WRONLY | O_CREAT).error(), einval);
        EXPECT_EQ(fs_->mkdir(n).error(), einval);
        EXPECT_EQ(fs_->stat(a).error(), einval);
        EXPECT_EQ(fs_->lstat(s).error(), einval);
        EXPECT_EQ(fs_->readlink(s).error(), einval);
        EXPECT_EQ(fs_->statfs(d).error(), einval);
        EXPECT_EQ(fs_->access(a, F_OK).error(), einval);
        EXPECT_EQ(fs_->opendir(d).error(), einval);
        EXPECT_EQ(fs_->truncate(a, 0).error(), einval);
        EXPECT_EQ(fs_->chmod(a, 0).error(), einval);
        timespec t[2] = {{1000, 0}, {2000, 0}};
        EXPECT_EQ(fs_->utimes(a, t).error(), einval);
        EXPECT_EQ(fs_->link(a, "hard").error(), einval);
        EXPECT_EQ(fs_->link("a", n).error(), einval);
        EXPECT_EQ(fs_->symlink("a", n).error(), einval);
        EXPECT_EQ(fs_->symlink(a, "soft").error(), einval);  // a target would be stored cut too
        EXPECT_EQ(fs_->rename(a, "b").error(), einval);
        EXPECT_EQ(fs_->rename("a", n).error(), einval);
        EXPECT_EQ(fs_->unlink(a).error(), einval);
        EXPECT_EQ(fs_->rmdir(d).error(), einval);
        // Nothing was made, changed or removed under the names before the NUL.
        EXPECT_EQ(slurp("a"), "keep");
        auto sa = fs_->stat("a");
        ASSERT_TRUE(sa.has_value());
        EXPECT_EQ(sa->st_mode, mode);
        EXPECT_NE(sa->st_mtim.tv_sec, 2000);
        EXPECT_EQ(fs_->stat("n").error(), std::errc::no_such_file_or_directory);
        auto sd = fs_->stat("d");
        EXPECT_TRUE(sd && S_ISDIR(sd->st_mode));
        auto sl = fs_->readlink("s");
        EXPECT_TRUE(sl && *sl == "a");
        for (const char* never : {"hard", "soft", "b"})
            EXPECT_EQ(fs_->lstat(never).error(), std::errc::no_such_file_or_directory) << never;
        EXPECT_EQ(fs::open_local(dir_ + std::string("\0x", 2), file_engine_kind()).error(), einval);
    });
}

// truncate(2) refuses what is not a regular file (EINVAL) without opening it. The local
// filesystem opened the path for writing to cut it: a FIFO there held the call (on psync_inline
// the vCPU) until a reader came, and a socket failed the open with ENXIO. A thread opens the FIFO
// for reading if the answer has not come within 10 s, so that a call that does wait is released
// and the test fails instead of hanging (again every 10 s while it has not come).
TEST_P(local_fs_test, truncate_refuses_a_fifo_or_socket_without_opening_it) {
    using namespace std::chrono_literals;
    const std::string fifo = dir_ + "/pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::mutex m;
    std::condition_variable cv;
    bool answered = false, released = false;
    std::thread valve([&] {
        std::unique_lock g(m);
        while (!cv.wait_for(g, 10s, [&] { return answered; })) {
            const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0) ::close(fd);
            released = true;
        }
    });
    result<void> piped, linked;
    in_fiber([&] {
        piped = fs_->truncate("pipe", 0);
        ASSERT_TRUE(fs_->symlink("pipe", "to-pipe").has_value());  // followed, as by truncate(2)
        linked = fs_->truncate("to-pipe", 0);
    });
    {
        std::lock_guard g(m);
        answered = true;
    }
    cv.notify_one();
    valve.join();
    EXPECT_FALSE(released) << "truncate waited in open(2) for a reader";
    EXPECT_EQ(piped.error(), std::errc::invalid_argument);
    EXPECT_EQ(linked.error(), std::errc::invalid_argument);

    const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string sock = dir_ + "/sock";
    ASSERT_LT(sock.size(), sizeof a.sun_path);
    std::memcpy(a.sun_path, sock.c_str(), sock.size() + 1);
    ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    in_fiber([&] {
        EXPECT_EQ(fs_->truncate("sock", 0).error(), std::errc::invalid_argument);
        ASSERT_TRUE(fs_->mkdir("dir").has_value());
        EXPECT_EQ(fs_->truncate("dir", 0).error(), std::errc::is_a_directory);
        EXPECT_EQ(fs_->truncate("missing", 0).error(), std::errc::no_such_file_or_directory);
        ASSERT_TRUE(make("file", "0123456789"));
        ASSERT_TRUE(fs_->truncate("file", 4).has_value());
        EXPECT_EQ(slurp("file"), "0123");
    });
    ::close(s);
}

// readlink(2) fills its buffer with as much of the target as fits and does not say whether it
// cut it. Targets of each size the local filesystem's buffer takes (256 bytes, then twice as
// much each time one fills it), one byte either side, and the longest symlink(2) makes (4095
// bytes: PATH_MAX with the NUL; a filesystem may store less, and ENAMETOOLONG ends the series)
// come back whole. (Longer ones exist only where a filesystem makes them itself: FUSE, network
// filesystems, a page of 64 KiB; readlink(2) does the same there.)
TEST_P(local_fs_test, readlink_returns_a_long_target_whole) {
    in_fiber([&] {
        size_t longest = 0;
        for (size_t len : {1, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 2048, 4095}) {
            std::string target(len, 'x');
            for (size_t i = 0; i < len; ++i)
                target[i] = i % 64 == 63 ? '/' : static_cast<char>('a' + i % 26);
            const std::string name = "l" + std::to_string(len);
            auto made = fs_->symlink(target, name);
            if (!made && made.error() == std::errc::filename_too_long) break;
            ASSERT_TRUE(made.has_value()) << len << ": " << made.error().message();
            auto got = fs_->readlink(name);
            ASSERT_TRUE(got.has_value()) << len << ": " << got.error().message();
            EXPECT_EQ(*got, target) << len;
            longest = len;
        }
        EXPECT_GE(longest, 513u);  // past the second size at least
    });
}

TEST_P(local_fs_test, direct_io_alignment_is_checked_before_the_kernel) {
    in_fiber([&] {
        auto f = fs_->open("direct", O_RDWR | O_CREAT | O_DIRECT);
        if (!f && f.error() == std::errc::invalid_argument) GTEST_SKIP() << "no O_DIRECT here";
        ASSERT_TRUE(f.has_value()) << f.error().message();
        void* p = nullptr;
        ASSERT_EQ(posix_memalign(&p, 4096, 8192), 0);
        std::memset(p, 'q', 8192);
        char* b = static_cast<char*>(p);
        EXPECT_EQ((*f)->pwrite(b + 1, 4096, 0).error(), std::errc::invalid_argument);   // buffer
        EXPECT_EQ((*f)->pwrite(b, 100, 0).error(), std::errc::invalid_argument);        // length
        EXPECT_EQ((*f)->pwrite(b, 4096, 100).error(), std::errc::invalid_argument);     // offset
        ASSERT_EQ(*(*f)->pwrite(b, 4096, 4096), 4096u);
        std::memset(p, 0, 4096);
        ASSERT_EQ(*(*f)->pread(b, 4096, 4096), 4096u);
        EXPECT_EQ(b[4095], 'q');
        free(p);
    });
}

// path::walk down a tree 1,500 directories deep (one-letter names: its paths stay within
// PATH_MAX) from a fiber, whose stack is 256 KiB. The walk recursed, a frame per level, and
// overflowed the stack (the process ended on the guard page) a few hundred levels down.
TEST_P(local_fs_test, walk_goes_down_a_tree_deeper_than_a_fiber_stack_holds) {
    constexpr int k_depth = 1500;
    // One open directory per level below the root: raise the soft descriptor limit if need be.
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    constexpr rlim_t k_fds = k_depth + 512;
    const bool raise = saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < k_fds;
    if (raise) {
        if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < k_fds)
            GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is below " << k_fds;
        rlimit more = saved;
        more.rlim_cur = k_fds;
        ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &more), 0);
    }
    int d = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(d, 0);
    for (int i = 0; i < k_depth; ++i) {
        ASSERT_EQ(::mkdirat(d, "d", 0755), 0) << i;
        const int next = ::openat(d, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ::close(d);
        d = next;
        ASSERT_GE(d, 0) << i;
    }
    ::close(d);
    in_fiber([&] {
        int dirs = 0;
        size_t deepest = 0;
        auto r = fs::path::walk(*fs_, "/", [&](const std::string& p, const struct stat& st) {
            if (S_ISDIR(st.st_mode)) ++dirs;
            deepest = std::max(deepest, p.size());
            return fs::path::walk_action::next;
        });
        ASSERT_TRUE(r.has_value()) << r.error().message();
        EXPECT_EQ(dirs, k_depth + 1);
        EXPECT_EQ(deepest, 2u * k_depth);  // "/d" per level
    });
    if (raise) (void)setrlimit(RLIMIT_NOFILE, &saved);
}

GLUON_FS_TEST_SUITE(local_fs_test);

}  // namespace
}  // namespace gluon::test
