// copy_file / copy_tree, and a full tmpfs: ENOSPC surfaces and nothing already written is lost.
#include "gluon/fs/copy.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "forwarding_fs.h"
#include "fs_fixture.h"
#include "gluon/fs/path.h"

namespace gluon::test {
namespace {

// Runs a hook once, when the copy first reaches `victim` (a path from the root) by open, opendir
// or open_root, through this filesystem or a directory held open from it: what another process
// can do to a tree between the walk's listing of a directory and its use of an entry.
class hooked_fs final : public forwarding_fs {
public:
    struct hook {
        std::string victim;
        std::function<void()> run;
        bool fired = false;
    };
    hooked_fs(std::unique_ptr<filesystem> in, std::shared_ptr<hook> h, std::string at = ".")
        : forwarding_fs(std::move(in)), hook_(std::move(h)), at_(std::move(at)) {}
    bool fired() const { return hook_->fired; }

    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t m) noexcept override {
        reach(p);
        return in_->open(p, flags, m);
    }
    result<std::unique_ptr<directory>> opendir(std::string_view p) noexcept override {
        reach(p);
        return in_->opendir(p);
    }
    result<std::unique_ptr<filesystem>> open_root(std::string_view p, int flags) noexcept override {
        reach(p);
        auto d = GLUON_TRY(in_->open_root(p, flags));
        return std::unique_ptr<filesystem>(new hooked_fs(std::move(d), hook_, fs::path::join(at_, p)));
    }

private:
    void reach(std::string_view p) {
        if (!hook_->fired && fs::path::normalize(fs::path::join(at_, p)) == hook_->victim) {
            hook_->fired = true;
            hook_->run();
        }
    }
    std::shared_ptr<hook> hook_;
    std::string at_;
};

// Watches a FIFO while a copy runs: a copy not done after a generous limit is taken to be
// waiting in open(2) for a writer, and one is opened (and closed) so that it goes on and the
// test fails instead of hanging.
class fifo_watchdog {
public:
    explicit fifo_watchdog(std::string fifo) : fifo_(std::move(fifo)), thread_([this] { watch(); }) {}
    ~fifo_watchdog() { (void)stop(); }
    /// Ends the watch. True if the copy had to be given a writer: it waited on the FIFO.
    bool stop() {
        {
            std::lock_guard<std::mutex> lk(m_);
            done_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
        return fired_;
    }

private:
    void watch() {
        std::unique_lock<std::mutex> lk(m_);
        if (cv_.wait_for(lk, std::chrono::seconds(10), [&] { return done_; })) return;
        fired_ = true;
        // A reader waiting in open gets its writer and returns; with none this fails (ENXIO).
        const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) ::close(fd);
    }

    std::string fifo_;
    std::mutex m_;
    std::condition_variable cv_;
    bool done_ = false, fired_ = false;
    std::thread thread_;  // last: started once the rest is built
};

class copy_test : public fs_test {
protected:
    // The local filesystem over the test directory, running `run` once when a copy reaches
    // `victim` (hooked_fs).
    std::unique_ptr<hooked_fs> hooked(std::string victim, std::function<void()> run) {
        auto h = std::make_shared<hooked_fs::hook>();
        h->victim = std::move(victim);
        h->run = std::move(run);
        auto base = fs::open_local(dir_, file_engine_kind());
        EXPECT_TRUE(base.has_value());
        if (!base) return nullptr;
        return std::make_unique<hooked_fs>(std::move(*base), std::move(h));
    }

    // Nothing was written in the directory outside: it holds its one file, unchanged.
    void outside_untouched() {
        EXPECT_EQ(slurp("outside/f"), "secret");
        auto d = fs_->opendir("outside");
        ASSERT_TRUE(d.has_value());
        int n = 0;
        while (auto e = (*d)->next()) {
            if (!*e) break;
            ++n;
        }
        EXPECT_EQ(n, 1);
    }
};

TEST_P(copy_test, copies_a_tree_with_content_modes_and_links) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->mkdir("src").has_value());
        ASSERT_TRUE(fs_->mkdir("src/sub").has_value());
        std::string big(3 * 1024 * 1024 + 123, '\0');
        std::mt19937 rng(1);
        for (auto& c : big) c = static_cast<char>(rng());
        ASSERT_TRUE(make("src/big", big));
        ASSERT_TRUE(make("src/sub/small", "tiny"));
        ASSERT_TRUE(make("src/empty", ""));
        ASSERT_TRUE(fs_->symlink("sub/small", "src/link").has_value());
        ASSERT_EQ(::chmod((dir_ + "/src/sub/small").c_str(), 0600), 0);

        uint64_t calls = 0;
        fs::copy_options o;
        o.chunk = 256 * 1024;
        o.depth = 3;
        o.progress = [&](uint64_t, uint64_t) { ++calls; };
        auto st = fs::copy_tree(*fs_, "src", *fs_, "dst", o);
        ASSERT_TRUE(st.has_value()) << st.error().message();
        EXPECT_EQ(st->files, 3u);
        EXPECT_EQ(st->dirs, 2u);
        EXPECT_EQ(st->symlinks, 1u);
        EXPECT_EQ(st->bytes, big.size() + 4);
        EXPECT_GT(calls, 0u);
        EXPECT_EQ(slurp("dst/big"), big);
        EXPECT_EQ(slurp("dst/sub/small"), "tiny");
        EXPECT_EQ(slurp("dst/empty"), "");
        EXPECT_EQ(*fs_->readlink("dst/link"), "sub/small");
        EXPECT_EQ(fs_->stat("dst/sub/small")->st_mode & 0777, 0600u);

        EXPECT_EQ(fs::copy_file(*fs_, "nope", *fs_, "x").error(), std::errc::no_such_file_or_directory);
        EXPECT_EQ(fs::copy_file(*fs_, "src", *fs_, "x").error(), std::errc::is_a_directory);
    });
}

TEST_P(copy_test, a_file_is_not_copied_onto_itself) {
    in_fiber([&] {
        ASSERT_TRUE(make("self", "keep me"));
        ASSERT_TRUE(fs_->link("self", "hard").has_value());
        ASSERT_TRUE(fs_->symlink("self", "soft").has_value());
        // dst opened with O_TRUNC would be src emptied: the copy would "succeed" with 0 bytes.
        for (const char* dst : {"self", "./self", "hard", "soft"})
            EXPECT_EQ(fs::copy_file(*fs_, "self", *fs_, dst).error(), std::errc::invalid_argument) << dst;
        EXPECT_EQ(slurp("self"), "keep me");
        auto c = fs::copy_file(*fs_, "self", *fs_, "other");  // a file of its own is fine
        ASSERT_TRUE(c.has_value()) << c.error().message();
        EXPECT_EQ(*c, 7u);
        EXPECT_EQ(slurp("other"), "keep me");
    });
}

// The source's kind is that of the file opened: a character device (here through a symlink to
// /dev/null) was copied as if regular, dst made first; /dev/zero would have filled the disk.
TEST_P(copy_test, a_source_that_is_not_a_regular_file_is_refused) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->symlink("/dev/null", "null").has_value());
        EXPECT_EQ(fs::copy_file(*fs_, "null", *fs_, "copy").error(), std::errc::invalid_argument);
        EXPECT_EQ(fs_->lstat("copy").error(), std::errc::no_such_file_or_directory);  // not made
        // A FIFO is refused without waiting for a writer that never comes: the open would.
        ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
        fifo_watchdog w(dir_ + "/fifo");
        EXPECT_EQ(fs::copy_file(*fs_, "fifo", *fs_, "copy").error(), std::errc::invalid_argument);
        EXPECT_FALSE(w.stop()) << "the copy waited for a writer";
        EXPECT_EQ(fs_->lstat("copy").error(), std::errc::no_such_file_or_directory);
    });
}

// src was a regular file when copy_file (or the tree walk) looked at it and a FIFO when it was
// opened: the open, without O_NONBLOCK, waited for a writer that never came.
TEST_P(copy_test, a_source_replaced_by_a_fifo_is_refused_without_waiting) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->mkdir("src").has_value());
        auto to_fifo = [&] {
            const std::string f = dir_ + "/src/f";
            EXPECT_EQ(::unlink(f.c_str()), 0);
            EXPECT_EQ(::mkfifo(f.c_str(), 0600), 0);
        };
        ASSERT_TRUE(make("src/f", "data"));
        auto racing = hooked("src/f", to_fifo);
        ASSERT_TRUE(racing);
        fifo_watchdog w(dir_ + "/src/f");
        auto c = fs::copy_file(*racing, "src/f", *racing, "copy");
        EXPECT_FALSE(w.stop()) << "copy_file waited for a writer";
        EXPECT_TRUE(racing->fired());
        ASSERT_FALSE(c.has_value());
        EXPECT_EQ(c.error(), std::errc::invalid_argument);
        EXPECT_EQ(fs_->lstat("copy").error(), std::errc::no_such_file_or_directory);

        ASSERT_TRUE(fs_->unlink("src/f").has_value());
        ASSERT_TRUE(make("src/f", "data"));
        racing = hooked("src/f", to_fifo);
        ASSERT_TRUE(racing);
        fifo_watchdog tw(dir_ + "/src/f");
        auto t = fs::copy_tree(*racing, "src", *racing, "dst");
        EXPECT_FALSE(tw.stop()) << "copy_tree waited for a writer";
        EXPECT_TRUE(racing->fired());
        ASSERT_FALSE(t.has_value());
        EXPECT_EQ(t.error(), std::errc::invalid_argument);
        EXPECT_EQ(fs_->lstat("dst/f").error(), std::errc::no_such_file_or_directory);
    });
}

// Replaces `victim` with a symlink to `target` just before opening it: what another process can
// do between a tree walk's lstat of a file and the copy's open of it.
class swapping_fs final : public forwarding_fs {
public:
    swapping_fs(std::unique_ptr<filesystem> in, std::string victim, std::string target)
        : forwarding_fs(std::move(in)), victim_(std::move(victim)), target_(std::move(target)) {}
    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t m) noexcept override {
        if (p == victim_ && !std::exchange(swapped_, true)) {
            if (!in_->unlink(p) || !in_->symlink(target_, p)) return errno_error(EIO);
        }
        return in_->open(p, flags, m);
    }

private:
    std::string victim_, target_;
    bool swapped_ = false;
};

// The walk saw a regular file; the copy then opened the path following a symlink put there
// since, and copied a file from outside the tree. (forwarding_fs cannot hold a directory open:
// this is the walk by path.)
TEST_P(copy_test, a_file_replaced_by_a_symlink_during_a_tree_copy_is_not_followed) {
    in_fiber([&] {
        ASSERT_TRUE(make("secret", "outside"));
        ASSERT_TRUE(fs_->mkdir("src").has_value());
        ASSERT_TRUE(make("src/f", "inside"));
        auto base = fs::open_local(dir_, file_engine_kind());
        ASSERT_TRUE(base.has_value());
        swapping_fs racing(std::move(*base), "src/f", "../secret");
        auto st = fs::copy_tree(racing, "src", racing, "dst");
        ASSERT_FALSE(st.has_value()) << "copied " << slurp("dst/f");
        EXPECT_EQ(st.error(), std::errc::too_many_symbolic_link_levels);
        EXPECT_NE(slurp("dst/f"), "outside");
    });
}

// src/sub/f ("inside") to copy to dst, and outside/f ("secret") beside them. When the copy
// reaches `victim`, the directory `swapped` is moved to `moved` beside it and a symlink to
// ../outside put in its place. Returns the copy's result.
class copy_race_test : public copy_test {
protected:
    result<fs::copy_stats> race(const std::string& victim, const std::string& swapped) {
        EXPECT_TRUE(fs_->mkdir("outside").has_value());
        EXPECT_TRUE(make("outside/f", "secret"));
        EXPECT_TRUE(fs_->mkdir("src").has_value());
        EXPECT_TRUE(fs_->mkdir("src/sub").has_value());
        EXPECT_TRUE(make("src/sub/f", "inside"));
        auto racing = hooked(victim, [this, swapped] {
            const std::string d = dir_ + "/" + swapped;
            EXPECT_EQ(::rename(d.c_str(), (dir_ + "/" + fs::path::dirname(swapped) + "/moved").c_str()), 0);
            EXPECT_EQ(::symlink("../outside", d.c_str()), 0);
        });
        if (!racing) return errno_error(EIO);
        auto st = fs::copy_tree(*racing, "src", *racing, "dst");
        EXPECT_TRUE(racing->fired()) << "the copy never reached " << victim;
        return st;
    }
};

// The walk listed src and saw sub, a directory; sub became a symlink before its file was opened.
// Opened by path ("src/sub/f", O_NOFOLLOW on the last name only) the file was outside/f. Held
// open, sub is still the directory listed (now src/moved): its file is copied, nothing else.
// (The listing of src may go on to show the new entries, moved and the symlink sub, which then
// fails to be made beside the copied sub: EEXIST. The outcome that matters is what was read.)
TEST_P(copy_race_test, a_source_directory_replaced_by_a_symlink_is_not_followed) {
    in_fiber([&] {
        (void)race("src/sub/f", "src/sub");
        EXPECT_EQ(slurp("dst/sub/f"), "inside");
        outside_untouched();
    });
}

// sub became a symlink after the walk listed it and before it entered it: opendir by path listed
// outside and its file was copied. Entered without following a symlink, it is refused.
TEST_P(copy_race_test, a_source_directory_replaced_before_it_is_entered_is_refused) {
    in_fiber([&] {
        auto st = race("src/sub", "src/sub");
        ASSERT_FALSE(st.has_value()) << "copied " << slurp("dst/sub/f");
        EXPECT_TRUE(st.error() == std::errc::too_many_symbolic_link_levels ||
                    st.error() == std::errc::not_a_directory)
            << st.error().message();
        EXPECT_EQ(fs_->lstat("dst/sub/f").error(), std::errc::no_such_file_or_directory);
        outside_untouched();
    });
}

// dst/sub, made by the copy, became a symlink before the copy wrote its file: written by path,
// the file landed in outside (a new outside/f, or outside/f overwritten). Held open, dst/sub is
// still the directory made (now dst/moved), and the file lands there.
TEST_P(copy_race_test, a_destination_directory_replaced_by_a_symlink_is_not_written_through) {
    in_fiber([&] {
        auto st = race("dst/sub/f", "dst/sub");
        EXPECT_TRUE(st.has_value()) << st.error().message();
        EXPECT_EQ(slurp("dst/moved/f"), "inside");
        outside_untouched();
    });
}

// dst/sub became a symlink after the copy made it and before it entered it.
TEST_P(copy_race_test, a_destination_directory_replaced_before_it_is_entered_is_refused) {
    in_fiber([&] {
        auto st = race("dst/sub", "dst/sub");
        ASSERT_FALSE(st.has_value());
        EXPECT_TRUE(st.error() == std::errc::too_many_symbolic_link_levels ||
                    st.error() == std::errc::not_a_directory)
            << st.error().message();
        outside_untouched();
    });
}

GLUON_FS_TEST_SUITE(copy_race_test);

// What a race would leave, there before the copy: below dst (the root the caller named, which is
// followed), a symlink where the copy puts a directory or a file is not written through. By
// path, outside/f was overwritten each time.
TEST_P(copy_test, a_symlink_in_the_destination_tree_is_not_written_through) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->mkdir("outside").has_value());
        ASSERT_TRUE(make("outside/f", "secret"));
        ASSERT_TRUE(fs_->mkdir("src").has_value());
        ASSERT_TRUE(fs_->mkdir("src/sub").has_value());
        ASSERT_TRUE(make("src/sub/f", "inside"));
        ASSERT_TRUE(fs_->mkdir("dst").has_value());
        ASSERT_TRUE(fs_->symlink("../outside", "dst/sub").has_value());
        auto st = fs::copy_tree(*fs_, "src", *fs_, "dst");
        ASSERT_FALSE(st.has_value());
        EXPECT_TRUE(st.error() == std::errc::too_many_symbolic_link_levels ||
                    st.error() == std::errc::not_a_directory)
            << st.error().message();
        outside_untouched();

        ASSERT_TRUE(fs_->mkdir("src2").has_value());
        ASSERT_TRUE(make("src2/f", "inside"));
        ASSERT_TRUE(fs_->mkdir("dst2").has_value());
        ASSERT_TRUE(fs_->symlink("../outside/f", "dst2/f").has_value());
        st = fs::copy_tree(*fs_, "src2", *fs_, "dst2");
        ASSERT_FALSE(st.has_value());
        EXPECT_EQ(st.error(), std::errc::too_many_symbolic_link_levels);
        outside_untouched();

        ASSERT_TRUE(fs_->unlink("dst/sub").has_value());
        ASSERT_TRUE(fs_->symlink("dst", "alias").has_value());  // the root itself may be one
        st = fs::copy_tree(*fs_, "src", *fs_, "alias");
        ASSERT_TRUE(st.has_value()) << st.error().message();
        EXPECT_EQ(slurp("dst/sub/f"), "inside");
    });
}

TEST_P(copy_test, a_tree_is_not_copied_into_itself) {
    in_fiber([&] {
        ASSERT_TRUE(fs_->mkdir("src").has_value());
        ASSERT_TRUE(fs_->mkdir("src/sub").has_value());
        ASSERT_TRUE(make("src/f", "data"));
        ASSERT_TRUE(fs_->symlink("src", "alias").has_value());
        // Each level created below src was walked in turn: the copy went deeper until a path
        // grew too long (or the disk filled with copies of the file).
        for (const char* dst : {"src", "src/sub/dst", "./src/new", "alias/sub/dst", "src/sub/../dst"})
            EXPECT_EQ(fs::copy_tree(*fs_, "src", *fs_, dst).error(), std::errc::invalid_argument) << dst;
        for (const char* made : {"src/sub/dst", "src/new", "src/dst"})
            EXPECT_EQ(fs_->lstat(made).error(), std::errc::no_such_file_or_directory) << made;
        auto st = fs::copy_tree(*fs_, "src/sub", *fs_, "src/copy");  // a part of src, beside it
        ASSERT_TRUE(st.has_value()) << st.error().message();
        st = fs::copy_tree(*fs_, "src", *fs_, "other");
        ASSERT_TRUE(st.has_value()) << st.error().message();
        EXPECT_EQ(slurp("other/f"), "data");
    });
}

TEST_P(copy_test, a_read_only_tree_is_copied_with_its_modes) {
    in_fiber([&] {
        const mode_t umask_was = ::umask(022);  // the modes below are what mkdir leaves under it
        ASSERT_TRUE(fs_->mkdir("ro").has_value());
        ASSERT_TRUE(fs_->mkdir("ro/inner").has_value());
        ASSERT_TRUE(make("ro/f", "top"));
        ASSERT_TRUE(make("ro/inner/g", "deep"));
        ASSERT_EQ(::chmod((dir_ + "/ro/inner").c_str(), 0500), 0);
        ASSERT_EQ(::chmod((dir_ + "/ro").c_str(), 0555), 0);
        // Made with the source's mode before being filled, the copy of a read-only directory
        // refused its entries (EACCES) to all but root.
        auto st = fs::copy_tree(*fs_, "ro", *fs_, "copy");
        EXPECT_TRUE(st.has_value()) << st.error().message();
        EXPECT_EQ(slurp("copy/f"), "top");
        EXPECT_EQ(slurp("copy/inner/g"), "deep");
        EXPECT_EQ(fs_->stat("copy")->st_mode & 07777, 0555u);
        EXPECT_EQ(fs_->stat("copy/inner")->st_mode & 07777, 0500u);
        for (const char* d : {"ro", "ro/inner", "copy", "copy/inner"}) (void)::chmod((dir_ + "/" + d).c_str(), 0755);
        ::umask(umask_was);
    });
}

TEST_P(copy_test, a_tree_deeper_than_max_depth_is_refused_and_one_as_deep_is_copied) {
    in_fiber([&] {
        // Walking by name, no path grows too long to end a runaway copy (dst mounted inside
        // src): the depth bound does. A tree as deep as the bound takes no fiber stack (a
        // recursive walk overflowed the default 256 KiB at 128 levels under ASan).
        const unsigned depth = fs::copy_options{}.max_depth;
        std::string p = "deep";
        ASSERT_TRUE(fs_->mkdir(p).has_value());
        for (unsigned i = 0; i < depth; ++i) {
            p += "/d";
            ASSERT_TRUE(fs_->mkdir(p).has_value());
        }
        ASSERT_TRUE(make((p + "/f").c_str(), "bottom"));
        // On a fiber with a small stack: a walk that recursed needed some hundreds of bytes per
        // level of it (KiBs under ASan).
        result<fs::copy_stats> st = errno_error(EINPROGRESS);
        auto walker = spawn(fiber_options{.stack_size = 48 * 1024}, [&] { st = fs::copy_tree(*fs_, "deep", *fs_, "copy"); });
        ASSERT_TRUE(walker);
        ASSERT_TRUE(walker->join());
        ASSERT_TRUE(st.has_value()) << st.error().message();
        EXPECT_EQ(st->dirs, depth + 1);
        EXPECT_EQ(slurp(("copy" + p.substr(4) + "/f").c_str()), "bottom");

        fs::copy_options shallow;
        shallow.max_depth = depth - 1;
        EXPECT_EQ(fs::copy_tree(*fs_, "deep", *fs_, "copy2", shallow).error(), std::errc::filename_too_long);
    });
}

GLUON_FS_TEST_SUITE(copy_test);

// Fills a 1 MiB tmpfs (mounted in a private mount namespace of a child process: needs
// CAP_SYS_ADMIN, skipped otherwise) through gluon until ENOSPC, then checks every byte that was
// reported written is there.
TEST(enospc, a_full_filesystem_reports_enospc_and_keeps_what_was_written) {
    char tmpl[] = "/tmp/gluon-enospc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string dir = tmpl;
    for (auto fk : {file_io::engine_kind::io_uring, file_io::engine_kind::psync, file_io::engine_kind::libaio}) {
        if (!file_io::available(fk)) continue;
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            if (unshare(CLONE_NEWNS) != 0) _exit(77);
            if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
            if (mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) _exit(77);
            init_options io;
            io.log_engine = false;
            if (!init(io)) _exit(10);
            int rc = 0;
            auto f = spawn([&] {
                auto lfs = fs::open_local(dir, fk);
                if (!lfs) { rc = 11; return; }
                auto file = (*lfs)->open("fill", O_RDWR | O_CREAT | O_TRUNC);
                if (!file) { rc = 12; return; }
                std::string chunk(100 * 1000, '\0');
                uint64_t written = 0;
                std::error_code last;
                for (int i = 0; i < 100; ++i) {
                    for (size_t k = 0; k < chunk.size(); ++k) chunk[k] = static_cast<char>((written + k) % 251);
                    auto r = (*file)->pwrite(chunk.data(), chunk.size(), static_cast<int64_t>(written));
                    if (!r) { last = r.error(); break; }
                    written += *r;  // a partial write counts: it is on the filesystem
                }
                if (last != std::errc::no_space_on_device) { rc = 13; return; }
                if (written < 500 * 1000) { rc = 14; return; }
                std::string back(written, '\0');
                if (!(*file)->pread_exactly(back.data(), written, 0)) { rc = 15; return; }
                for (uint64_t k = 0; k < written; ++k)
                    if (back[k] != static_cast<char>(k % 251)) { rc = 16; return; }
                if ((*file)->fstat()->st_size != static_cast<off_t>(written)) rc = 17;
            });
            if (!f || !f->join()) _exit(18);
            (void)fini();
            _exit(rc);
        }
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        if (WEXITSTATUS(status) == 77) {
            ::rmdir(dir.c_str());
            GTEST_SKIP() << "no mount namespace (needs CAP_SYS_ADMIN)";
        }
        EXPECT_EQ(WEXITSTATUS(status), 0) << "engine " << file_io::kind_name(fk);
    }
    ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace gluon::test
