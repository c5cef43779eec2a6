// FUSE export tested with unmodified tools (ls -R, cat, cp -r, dd, find, sha256sum, mv, rm,
// truncate, stat -f) on a mount of the local filesystem and of the HTTP filesystem behind the
// cache, on every engine. Skipped where /dev/fuse or mounting is not available.
#include "gluon/fs/fuse.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <netdb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>
#include <utility>

#include "gluon/fs/cache.h"
#include "gluon/fs/http.h"
#include "gluon/fs/local.h"
#include "gluon/net/resolver.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/signals.h"
#include "gluon/sync/semaphore.h"
#include "forwarding_fs.h"
#include "support/nginx.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::fs {
namespace {

using namespace std::chrono_literals;
namespace stdfs = std::filesystem;

std::string random_bytes(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(g());
    return s;
}

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool mounted(const std::string& mp) { return slurp("/proc/mounts").find(" " + mp + " ") != std::string::npos; }

class fuse_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        std::string tmpl = stdfs::temp_directory_path() / "gluon-fuse-XXXXXX";
        ASSERT_TRUE(::mkdtemp(tmpl.data()));
        dir_ = tmpl;
        src_ = dir_ + "/src";
        mnt_ = dir_ + "/mnt";
        stdfs::create_directories(src_);
        stdfs::create_directories(mnt_);
    }
    void TearDown() override {
        m_.reset();
        if (!dir_.empty()) {
            if (mounted(mnt_)) (void)std::system(("umount -l " + mnt_ + " 2>/dev/null").c_str());
            std::error_code ec;
            stdfs::remove_all(dir_, ec);
        }
        test::engine_test::TearDown();
    }
    /// Mounts fs at mnt_, or skips the test where FUSE cannot mount here.
    void mount(std::shared_ptr<filesystem> fs, fuse_options o = {}) {
        o.mountpoint = mnt_;
        auto m = fuse_mount::mount(std::move(fs), o);
        if (!m && (m.error() == std::errc::no_such_device || m.error() == std::errc::io_error ||
                   m.error() == std::errc::no_such_file_or_directory))
            GTEST_SKIP() << "FUSE cannot mount here: " << m.error().message();
        ASSERT_TRUE(m) << m.error().message();
        m_ = std::move(*m);
        ASSERT_TRUE(mounted(mnt_));
    }
    /// Runs a shell command (the tools are unmodified programs); its stdout, or "<exit N>".
    std::string sh(const std::string& cmd) {
        std::string out = dir_ + "/out.txt";
        test::child c({"/bin/sh", "-c", cmd}, "/dev/null", out, dir_ + "/err.txt");
        int rc = c.wait(60s);
        if (rc != 0) return "<exit " + std::to_string(rc) + ": " + slurp(dir_ + "/err.txt") + ">";
        return slurp(out);
    }
    std::string hash_of(const std::string& p) {
        std::string h = sh("sha256sum < '" + p + "'");
        return h.substr(0, 64);
    }

    std::string dir_, src_, mnt_;
    std::unique_ptr<fuse_mount> m_;
};

TEST_P(fuse_test, unmodified_tools_work_on_a_mounted_local_directory) {
    stdfs::create_directories(src_ + "/a/b");
    std::ofstream(src_ + "/a/b/c.txt") << "hello through fuse\n";
    std::ofstream(src_ + "/big.bin", std::ios::binary) << random_bytes(3 << 20, 9);
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local));

    std::string ls = sh("ls -R " + mnt_);
    EXPECT_NE(ls.find("big.bin"), std::string::npos) << ls;
    EXPECT_NE(ls.find("c.txt"), std::string::npos) << ls;
    EXPECT_EQ(sh("cat " + mnt_ + "/a/b/c.txt"), "hello through fuse\n");
    EXPECT_EQ(hash_of(mnt_ + "/big.bin"), hash_of(src_ + "/big.bin"));
    EXPECT_EQ(sh("find " + mnt_ + " -type f | sort"), mnt_ + "/a/b/c.txt\n" + mnt_ + "/big.bin\n");

    // Writes: cp -r, dd, mv, truncate, rm, mkdir, rmdir.
    EXPECT_EQ(sh("cp -r " + mnt_ + "/a " + mnt_ + "/a2 && cp " + mnt_ + "/big.bin " + mnt_ + "/a2/"), "");
    EXPECT_EQ(slurp(src_ + "/a2/b/c.txt"), "hello through fuse\n");
    EXPECT_EQ(hash_of(src_ + "/a2/big.bin"), hash_of(src_ + "/big.bin"));
    EXPECT_EQ(sh("dd if=/dev/zero of=" + mnt_ + "/z bs=64k count=16 status=none"), "");
    EXPECT_EQ(stdfs::file_size(src_ + "/z"), 1u << 20);
    EXPECT_EQ(sh("mv " + mnt_ + "/a2 " + mnt_ + "/moved && cat " + mnt_ + "/moved/b/c.txt"), "hello through fuse\n");
    EXPECT_TRUE(stdfs::exists(src_ + "/moved/b/c.txt"));
    EXPECT_EQ(sh("truncate -s 1000 " + mnt_ + "/z && stat -c %s " + mnt_ + "/z"), "1000\n");
    EXPECT_EQ(sh("rm -r " + mnt_ + "/moved " + mnt_ + "/z && mkdir " + mnt_ + "/d && rmdir " + mnt_ + "/d && ls " + mnt_),
              "a\nbig.bin\n");
    EXPECT_EQ(sh("stat -f -c %T " + mnt_), "fuseblk\n");
    EXPECT_NE(sh("stat -f -c %b " + mnt_).find_first_of("0123456789"), std::string::npos);
    // fio writes and verifies (crc32c) through the mount, from two processes at once.
    if (!test::find_program("fio").empty()) {
        std::string fio = sh("fio --name=v --directory=" + mnt_ + " --rw=randrw --bs=4k --size=2m --numjobs=2 "
                             "--ioengine=psync --verify=crc32c --do_verify=1 --verify_state_save=0 --minimal");
        EXPECT_EQ(fio.find("<exit"), std::string::npos) << fio;
        EXPECT_EQ(sh("rm " + mnt_ + "/v.* && ls " + mnt_), "a\nbig.bin\n");
    }
    auto st = m_->statistics();
    EXPECT_GT(st.requests, 20u);
    EXPECT_GE(st.bytes_read, 3u << 20);
    EXPECT_GE(st.bytes_written, 4u << 20);

    m_->stop();
    EXPECT_FALSE(mounted(mnt_));
    EXPECT_EQ(m_->statistics().in_flight, 0u);
}

TEST_P(fuse_test, serves_from_a_second_vcpu_and_stops_its_reader) {
    std::ofstream(src_ + "/big.bin", std::ios::binary) << random_bytes(2 << 20, 12);
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local));
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    ASSERT_TRUE((*rt)->run(0, [&] { ASSERT_TRUE(m_->serve_here()); }));
    // Readers on two vCPUs take requests off the one device.
    for (int i = 0; i < 3; ++i) EXPECT_EQ(hash_of(mnt_ + "/big.bin"), hash_of(src_ + "/big.bin"));
    EXPECT_EQ(sh("cp " + mnt_ + "/big.bin " + mnt_ + "/copy.bin && cmp " + mnt_ + "/copy.bin " + src_ + "/big.bin"), "");
    m_->stop();  // interrupts the other vCPU's reader too
    EXPECT_FALSE(mounted(mnt_));
    ASSERT_TRUE((*rt)->run(0, [&] { EXPECT_EQ(m_->serve_here().error().value(), ESHUTDOWN); }));
}

/// Holds every open of a file named "slow" until released; the rest passes straight through.
class gated_fs final : public test::forwarding_fs {
public:
    using forwarding_fs::forwarding_fs;
    event arrived, release;
    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t m) noexcept override {
        if (p.ends_with("slow")) {
            arrived.set();
            GLUON_TRY(release.wait(30s));
        }
        return in_->open(p, flags, m);
    }
};

// Each request runs on a fiber of its own: an open held in the filesystem leaves the mount
// serving other requests (and other programs) meanwhile.
TEST_P(fuse_test, a_request_held_in_the_filesystem_blocks_no_other) {
    std::ofstream(src_ + "/slow") << "slow answer\n";
    std::ofstream(src_ + "/fast") << "fast answer\n";
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    auto gated = std::make_shared<gated_fs>(std::move(*local));
    mount(gated);
    test::child slow({"/bin/cat", mnt_ + "/slow"}, "/dev/null", dir_ + "/slow.out", dir_ + "/slow.err");
    ASSERT_TRUE(gated->arrived.wait(30s));  // its open is held now
    EXPECT_EQ(sh("cat " + mnt_ + "/fast && ls " + mnt_), "fast answer\nfast\nslow\n");
    EXPECT_TRUE(slow.running());
    gated->release.set();
    EXPECT_EQ(slow.wait(30s), 0);
    EXPECT_EQ(slurp(dir_ + "/slow.out"), "slow answer\n");
}

/// A file named "torn" gives its first 8 KiB and then fails with EIO, as a composed file whose
/// second part cannot be read does (the first part's bytes, then the error).
class torn_fs final : public test::forwarding_fs {
public:
    using forwarding_fs::forwarding_fs;
    static constexpr int64_t good = 8192;
    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t m) noexcept override {
        auto f = GLUON_TRY(in_->open(p, flags, m));
        if (!p.ends_with("torn")) return f;
        return std::unique_ptr<file>(new torn_file(std::move(f)));
    }

private:
    class torn_file final : public test::forwarding_file {
    public:
        using forwarding_file::forwarding_file;

    protected:
        result<size_t> do_pread(void* b, size_t n, int64_t off, deadline_t d) noexcept override {
            if (off >= good) return errno_error(EIO);
            return forwarding_file::do_pread(b, std::min<size_t>(n, static_cast<size_t>(good - off)), off, d);
        }
    };
};

// A read that fails after part of the data is the error: a short answer through the page cache
// is the end of the file to the kernel, and cat copied 8 KiB of a 64 KiB file without a word.
// With direct_io the part comes as a short read, and the next read meets the error.
TEST_P(fuse_test, a_read_failing_part_way_is_an_error_not_the_end_of_the_file) {
    std::ofstream(src_ + "/torn", std::ios::binary) << random_bytes(64 << 10, 13);
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    std::shared_ptr<filesystem> fs = std::make_shared<torn_fs>(std::move(*local));
    mount(fs);
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string copy = dir_ + "/copy";
    EXPECT_EQ(sh("cat " + mnt_ + "/torn > " + copy + " 2>/dev/null; echo $?; stat -c %s " + mnt_ + "/torn"),
              "1\n65536\n");
    m_->stop();
    ASSERT_FALSE(mounted(mnt_));
    mount(fs, {.direct_io = true});
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(sh("cat " + mnt_ + "/torn > " + copy + " 2>/dev/null; echo $?; stat -c %s " + copy), "1\n8192\n");
    EXPECT_EQ(slurp(copy), slurp(src_ + "/torn").substr(0, 8192));
}

// An inode whose name went (renamed over, unlinked) while a program held it open kept that
// name as its path: asked for its attributes (fstat, here through /dev/fd) or opened again
// (/proc's links), it answered with the file that took the name. Its open file still serves it,
// fstat included (the kernel asks without the open file); what needs its name is ESTALE. An
// inode moved with its directory follows it.
TEST_P(fuse_test, an_inode_whose_name_is_gone_never_reaches_the_file_that_took_the_name) {
    std::ofstream(src_ + "/a") << "old\n";
    std::ofstream(src_ + "/b") << "the new file\n";
    std::ofstream(src_ + "/c") << "ccc\n";
    std::ofstream(src_ + "/d") << "dddd\n";
    stdfs::create_directories(src_ + "/p/q");
    std::ofstream(src_ + "/p/q/f") << "in p\n";
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local), {.attr_timeout = 0s});  // every stat asks (the kernel keeps a size after an unlink)
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string cd = "cd " + mnt_ + " && ";
    const std::string size3 = "{ stat -L -c %s /dev/fd/3 2>/dev/null || echo gone; }";
    // Renamed over: the old file's inode is not the new file's.
    EXPECT_EQ(sh(cd + "exec 3< a && mv b a && " + size3 + " && { cat /dev/fd/3 2>/dev/null || echo gone; } && cat <&3 && cat a"),
              "4\ngone\nold\nthe new file\n");
    // Unlinked, and the name made again.
    EXPECT_EQ(sh(cd + "exec 3< c && rm c && echo newer-and-longer > c && " + size3 + " && cat <&3 && cat c"),
              "4\nccc\nnewer-and-longer\n");
    // Its directory renamed: the inode goes with it.
    EXPECT_EQ(sh(cd + "exec 3< p/q/f && mv p r && " + size3 + " && cat r/q/f"), "5\nin p\n");
    // An open file whose name is gone is truncated through the file (ftruncate needs no name).
    if (!test::find_program("perl").empty()) {
        EXPECT_EQ(sh(cd + "exec 3<> d && rm d && perl -e 'open(my $f, \"+<&=\", 3) or die; truncate($f, 2) or die \"$!\"' "
                          "&& cat <&3"),
                  "dd");
    }
}

/// "tls" and "dns" fail lstat with errors of a filesystem over the network: a TLS verify
/// failure (2 in its category) and a DNS failure (EAI_NONAME, negative).
class network_errors_fs final : public test::forwarding_fs {
public:
    using forwarding_fs::forwarding_fs;
    result<struct stat> lstat(std::string_view p) noexcept override {
        if (p.ends_with("/tls")) return unexpected(net::tls::make_error_code(net::tls::errc::verify_failed));
        if (p.ends_with("/dns")) return unexpected(std::error_code(EAI_NONAME, net::dns_category()));
        return in_->lstat(p);
    }
};

// Errors of other categories than errno's are EIO to the program: their numbers went to the
// kernel as they were, so a certificate that did not verify was ENOENT ("No such file or
// directory") and a name that did not resolve libfuse's ERANGE.
TEST_P(fuse_test, errors_that_are_not_errnos_reach_programs_as_eio) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::make_shared<network_errors_fs>(std::move(*local)), {.attr_timeout = 0s, .entry_timeout = 0s});
    if (IsSkipped() || HasFatalFailure()) return;
    EXPECT_EQ(sh("for n in tls dns; do LC_ALL=C stat " + mnt_ + "/$n 2>&1 | sed 's/.*: //'; done"),
              "Input/output error\nInput/output error\n");
}

// readdirplus binds each entry it lists to an inode of the kernel's, found by path: it took
// the directory's path at opendir, so a directory renamed while open, its old name made again,
// had its entries bound to the new directory's files: b/x (the original) read a/x.
TEST_P(fuse_test, readdirplus_of_a_directory_renamed_while_open_names_its_own_entries) {
    if (test::find_program("python3").empty()) GTEST_SKIP() << "python3 lists an open directory fd here";
    stdfs::create_directories(src_ + "/a");
    std::ofstream(src_ + "/a/x") << "the original x\n";
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    // Long timeouts: the kernel keeps what readdirplus told it instead of asking again.
    mount(std::move(*local), {.attr_timeout = 60s, .entry_timeout = 60s});
    if (IsSkipped() || HasFatalFailure()) return;
    EXPECT_EQ(sh("cd " + mnt_ + " && exec 3< a && mv a b && mkdir a && echo 'another file named x' > a/x && "
                 "python3 -c 'import os; print(os.listdir(3))' && cat b/x && cat a/x"),
              "['x']\nthe original x\nanother file named x\n");
}

// chmod through the mount reaches the file (it was accepted and ignored).
TEST_P(fuse_test, a_mode_change_reaches_the_file) {
    std::ofstream(src_ + "/m") << "mode\n";
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local), {.attr_timeout = 0s});
    if (IsSkipped() || HasFatalFailure()) return;
    EXPECT_EQ(sh("chmod 640 " + mnt_ + "/m && stat -c %a " + mnt_ + "/m"), "640\n");
    struct stat st{};
    ASSERT_EQ(::stat((src_ + "/m").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(sh("chmod 604 " + mnt_ + "/m && stat -c %a " + mnt_ + "/m"), "604\n");
}

TEST_P(fuse_test, ends_when_unmounted_from_outside) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local));
    test::child u({"/bin/umount", mnt_});
    EXPECT_EQ(u.wait(30s), 0);
    ASSERT_TRUE(m_->wait());
    EXPECT_FALSE(mounted(mnt_));
    m_->stop();  // after the fact: still clean
}

TEST_P(fuse_test, unmounts_on_sigint) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local));
    auto runner = spawn([&] { EXPECT_TRUE(m_->run_until_signalled()); });
    ASSERT_TRUE(runner);
    // The waiting fiber installs its handler when it runs: until then SIGINT is ignored (not
    // fatal), so it is sent until the mount goes.
    auto old = ::signal(SIGINT, SIG_IGN);
    for (int i = 0; i < 500 && mounted(mnt_); ++i) {
        this_fiber::yield();
        ::kill(::getpid(), SIGINT);
        (void)this_fiber::sleep_for(10ms);
    }
    ASSERT_TRUE(runner->join());
    ::signal(SIGINT, old);
    EXPECT_FALSE(mounted(mnt_));
}

// A program that prints its "mounted" line from ready may be signalled the moment the line is
// out: SIGINT raised there finds the handler (the default disposition would end this test
// program, the mount left dead) and the mount goes.
TEST_P(fuse_test, ready_runs_once_sigint_is_caught) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local));
    if (IsSkipped() || HasFatalFailure()) return;
    auto old = ::signal(SIGINT, SIG_DFL);  // as a program starts (not ignored, as sh's background jobs are)
    int calls = 0;
    auto r = m_->run_until_signalled([&] {
        ++calls;
        (void)::raise(SIGINT);  // the handler runs before raise returns
    });
    EXPECT_TRUE(r) << r.error().message();
    EXPECT_EQ(calls, 1);
    EXPECT_FALSE(mounted(mnt_));
    EXPECT_EQ(::signal(SIGINT, old), SIG_DFL) << "the disposition is given back";
}

// run_until_signalled while another call waits for signals: wait_for_signals refuses it
// (EBUSY), and the mount ends with that error, as a signal would end it. The error was dropped
// and the call went on waiting for an unmount from outside, which no signal could bring.
TEST_P(fuse_test, run_until_signalled_beside_another_signal_waiter_unmounts_with_its_error) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    mount(std::move(*local));
    if (IsSkipped() || HasFatalFailure()) return;
    event holding;
    auto holder = spawn([&] { (void)wait_for_signals({SIGUSR2}, forever, [&] { holding.set(); }); });
    ASSERT_TRUE(holder);
    EXPECT_TRUE(holding.wait(30s));
    result<void> r = errno_error(EINPROGRESS);
    auto runner = spawn([&] { r = m_->run_until_signalled(); });
    EXPECT_TRUE(runner);
    if (runner) {
        const bool ended = runner->join_for(30s).has_value();
        EXPECT_TRUE(ended) << "run_until_signalled waits on";
        if (!ended) {  // end it, so the test fails rather than hangs
            m_->stop();
            (void)runner->join();
        }
        EXPECT_FALSE(r);
        if (!r) {
            EXPECT_EQ(r.error(), std::errc::device_or_resource_busy) << r.error().message();
        }
        EXPECT_FALSE(mounted(mnt_));
    }
    // The holder's wait ends before the test's locals go.
    EXPECT_TRUE(holder->interrupt());
    EXPECT_TRUE(holder->join());
}

TEST_P(fuse_test, refuses_a_missing_mountpoint_or_a_file) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    std::shared_ptr<filesystem> fs = std::move(*local);
    EXPECT_EQ(fuse_mount::mount(fs, {.mountpoint = dir_ + "/nowhere"}).error(), std::errc::no_such_file_or_directory);
    std::ofstream(dir_ + "/plain") << "x";
    auto r = fuse_mount::mount(fs, {.mountpoint = dir_ + "/plain"});
    if (r.error() == std::errc::no_such_device) GTEST_SKIP() << "no /dev/fuse";
    EXPECT_EQ(r.error(), std::errc::not_a_directory);
}

// The clear errors of a machine without FUSE, each checked in a child process of this test
// program: ENODEV without /dev/fuse (a mount namespace with an empty /dev), ENOENT for a user
// other than root without fusermount3 on its PATH.
TEST_P(fuse_test, says_when_the_device_or_fusermount3_is_missing) {
    auto local = open_local(src_);
    ASSERT_TRUE(local);
    std::shared_ptr<filesystem> fs = std::move(*local);
    if (const char* mode = std::getenv("GLUON_FUSE_TEST_CHILD")) {  // in the child
        if (std::string(mode) == "nohelper") {
            for (auto& d : {dir_, src_, mnt_})  // for TearDown, as that user
                if (::chown(d.c_str(), 65534, 65534) != 0) GTEST_SKIP() << "cannot chown here";
            ASSERT_EQ(::setenv("PATH", "/nonexistent", 1), 0);
            if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
                GTEST_SKIP() << "cannot become another user here";
            auto r = fuse_mount::mount(fs, {.mountpoint = mnt_});
            if (r.error() != std::errc::no_such_device) {  // a machine with no /dev/fuse at all
                EXPECT_EQ(r.error(), std::errc::no_such_file_or_directory) << r.error().message();
            }
        } else {
            EXPECT_EQ(fuse_mount::mount(fs, {.mountpoint = mnt_}).error(), std::errc::no_such_device);
        }
        return;
    }
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount namespace, another user)";
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
    std::string exe = stdfs::read_symlink("/proc/self/exe");
    auto in_child = [&](const std::string& mode, std::vector<std::string> args) {
        std::vector<std::string> argv = {"/usr/bin/env", "GLUON_FUSE_TEST_CHILD=" + mode};
        argv.insert(argv.end(), args.begin(), args.end());
        test::child c(argv, "/dev/null", dir_ + "/child.out", dir_ + "/child.err");
        int rc = c.wait(60s);
        return std::pair(rc, slurp(dir_ + "/child.out") + slurp(dir_ + "/child.err"));
    };
    auto [rc, out] = in_child("nohelper", {exe, filter});
    EXPECT_EQ(rc, 0) << out;
    if (test::find_program("unshare").empty()) GTEST_SKIP() << "no unshare";
    std::tie(rc, out) = in_child("nodev", {"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                                           "mount -t tmpfs tmpfs /dev || exit 77; exec \"$0\" \"$1\"", exe, filter});
    if (rc == 77 || (rc != 0 && out.find("unshare:") != std::string::npos))
        GTEST_SKIP() << "no mount namespace here: " << out;
    EXPECT_EQ(rc, 0) << out;
}

TEST_P(fuse_test, serves_http_files_through_the_cache) {
    std::string why;
    auto nginx = test::nginx::start(why);
    GLUON_REQUIRE_PEER(nginx, why);
    std::string blob = random_bytes(5 << 20, 11);
    std::ofstream(nginx->www() + "/layer.tar", std::ios::binary) << blob;
    std::ofstream(nginx->www() + "/README") << "read me\n";
    std::ofstream(src_ + "/layer.tar", std::ios::binary) << blob;  // to compare with
    auto http = make_http_filesystem({.files = {{"layer.tar", nginx->url("/layer.tar")}, {"README", nginx->url("/README")}}});
    ASSERT_TRUE(http);
    auto cached = make_cached(std::move(*http), {.block_size = 1 << 20});
    ASSERT_TRUE(cached);
    mount(std::move(*cached), {.read_only = true, .keep_cache = true});
    EXPECT_EQ(sh("ls " + mnt_), "README\nlayer.tar\n");
    EXPECT_EQ(sh("cat " + mnt_ + "/README"), "read me\n");
    EXPECT_EQ(hash_of(mnt_ + "/layer.tar"), hash_of(src_ + "/layer.tar"));
    EXPECT_EQ(sh("cp -r " + mnt_ + " " + dir_ + "/copy && cmp " + dir_ + "/copy/layer.tar " + src_ + "/layer.tar"), "");
    EXPECT_EQ(sh("dd if=" + mnt_ + "/layer.tar bs=4k skip=100 count=1 status=none | sha256sum | cut -c1-64"),
              sh("dd if=" + src_ + "/layer.tar bs=4k skip=100 count=1 status=none | sha256sum | cut -c1-64"));
    EXPECT_NE(sh("touch " + mnt_ + "/new").find("<exit"), std::string::npos);  // read-only
    if (!test::find_program("fio").empty()) {
        std::string fio = sh("fio --name=r --filename=" + mnt_ + "/layer.tar --readonly --rw=randread --bs=4k "
                             "--size=5m --numjobs=4 --ioengine=psync --time_based --runtime=1 --minimal");
        EXPECT_EQ(fio.find("<exit"), std::string::npos) << fio;
    }
    m_->stop();
    EXPECT_FALSE(mounted(mnt_));
}

GLUON_ENGINE_TEST_SUITE(fuse_test);

}  // namespace
}  // namespace gluon::fs
