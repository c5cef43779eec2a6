// gluon enters the kernel only through sys:: (ADR 0013): with libc's system-call wrappers
// interposed in this executable (interpose.c), a runtime's start and stop, a fiber TCP echo and
// a shared-memory IPC echo across two vCPUs, and file reads and writes on every file engine
// leave their counters at zero.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gluon/file_io/file_engine.h"
#include "gluon/fs/local.h"
#include "gluon/ipc/listener.h"
#include "gluon/ipc/session.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "interpose.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

std::string libc_calls() {
    char report[1024];
    unsigned long n = interposed_total(report, sizeof report);
    return n ? report : "";
}

// Bytes that differ from one position to the next, so a misplaced chunk shows.
std::string pattern(size_t n, unsigned seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 31 + seed);
    return s;
}

// A listener on vCPU 0 echoes; a client on vCPU 1 sends and checks.
void tcp_echo(runtime& rt) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    auto where = l->local_address();
    ASSERT_TRUE(where);
    ASSERT_TRUE(rt.post(0, [&l] {
        auto c = l->accept(10s);
        if (!c) return;
        char buf[4096];
        while (auto n = c->read_some(buf, sizeof buf, 10s)) {
            if (*n == 0 || !c->write_all(buf, *n, 10s)) break;  // 0: end of stream
        }
    }));
    const std::string out = pattern(200000, 7);
    std::string in(out.size(), '\0');
    ASSERT_TRUE(rt.run(1, [&] {
        auto c = net::stream::connect(*where, 10s);
        ASSERT_TRUE(c) << c.error().message();
        auto writer = spawn([&] { EXPECT_TRUE(c->write_all(out.data(), out.size(), 10s)); });
        ASSERT_TRUE(writer);
        EXPECT_TRUE(c->read_exactly(in.data(), in.size(), 10s));
        EXPECT_TRUE(writer->join());
        EXPECT_TRUE(c->close());
    }));
    EXPECT_EQ(in, out);
}

// A shared-memory session (both handshakes) between vCPU 0 (server) and vCPU 1 (client).
void ipc_echo(runtime& rt, ipc::memory_mode mode) {
    ipc::session_options o;
    o.mode = mode;
    o.path_prefix = "/dev/shm/gluon-one-entry-" + std::to_string(::getpid());
    o.buffer_size = 1u << 20;
    o.slices = {{4092, 50}, {65532, 50}};
    auto addr = *net::address::unix_abstract(o.path_prefix.substr(9) + (mode == ipc::memory_mode::memfd ? "-3" : "-2"));
    auto l = ipc::listener::listen(addr, o);
    ASSERT_TRUE(l) << l.error().message();
    ASSERT_TRUE(rt.post(0, [&l] {
        auto s = l->accept(10s);
        if (!s) return;
        auto st = s->accept_stream(10s);
        if (!st) return;
        while (auto v = st->read_view(10s)) {
            size_t n = v->size();
            if (!st->send(v->data(), n)) break;
            st->consume(n);
        }
    }));
    const std::string out = pattern(200000, 5);
    std::string in(out.size(), '\0');
    ASSERT_TRUE(rt.run(1, [&] {
        auto c = ipc::session::connect(addr, o);
        ASSERT_TRUE(c) << c.error().message();
        auto st = c->open_stream();
        ASSERT_TRUE(st);
        EXPECT_TRUE(st->send(out.data(), out.size(), 10s));
        EXPECT_TRUE(st->recv_exactly(in.data(), in.size(), 10s));
        EXPECT_TRUE(st->close());
        EXPECT_TRUE(c->close());
    }));
    EXPECT_EQ(in, out);
}

// Reads `data` back through a local filesystem on file engine k, and writes and reads a file.
void file_round_trip(runtime& rt, const std::string& dir, file_io::engine_kind k, const std::string& data) {
    ASSERT_TRUE(rt.run(0, [&] {
        auto fs = fs::open_local(dir, k);
        ASSERT_TRUE(fs) << fs.error().message();
        auto f = (*fs)->open("data", O_RDONLY, 0);
        ASSERT_TRUE(f) << f.error().message();
        std::string back(data.size(), '\0');
        ASSERT_TRUE((*f)->pread_exactly(back.data(), back.size(), 0));
        EXPECT_EQ(back, data);
        auto st = (*f)->fstat();
        ASSERT_TRUE(st);
        EXPECT_EQ(static_cast<size_t>(st->st_size), data.size());
        ASSERT_TRUE((*f)->close());

        auto w = (*fs)->open("out", O_CREAT | O_RDWR | O_TRUNC, 0644);
        ASSERT_TRUE(w) << w.error().message();
        ASSERT_TRUE((*w)->pwrite(data.data(), 4096, 0));
        ASSERT_TRUE((*w)->fsync());
        std::string again(4096, '\0');
        ASSERT_TRUE((*w)->pread_exactly(again.data(), again.size(), 0));
        EXPECT_EQ(again, data.substr(0, 4096));
        ASSERT_TRUE((*w)->close());
        ASSERT_TRUE((*fs)->unlink("out"));
    }));
}

class one_entry_test : public test::engine_test {
protected:
    // engine_test made this thread a vCPU; this test starts its own runtime instead.
    void SetUp() override {
        if (!engine::available(GetParam())) GTEST_SKIP() << engine::kind_name(GetParam()) << " not available";
        for (auto k : {file_io::engine_kind::io_uring, file_io::engine_kind::libaio,
                       file_io::engine_kind::posix_aio, file_io::engine_kind::psync,
                       file_io::engine_kind::psync_inline})
            if (file_io::available(k)) file_engines_.push_back(k);
        char tmpl[] = "/tmp/gluon-one-entry-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        data_ = pattern(300000, 3);
        std::ofstream(dir_ + "/data", std::ios::binary).write(data_.data(), static_cast<std::streamsize>(data_.size()));
    }
    void TearDown() override {
        if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
    }
    std::vector<file_io::engine_kind> file_engines_;
    std::string dir_, data_;
};
GLUON_ENGINE_TEST_SUITE(one_entry_test);

TEST(interposer, counts_libc_calls) {
    // The counters would be zero for nothing if the interposer were not in the way.
    interposed_reset();
    EXPECT_LT(::close(-1), 0);
    EXPECT_NE(libc_calls().find("close=1"), std::string::npos) << libc_calls();
    // syscall(2) calls name the first one's number, so a failure says which call it was.
    EXPECT_EQ(::syscall(SYS_getpid), ::getpid());
    EXPECT_NE(libc_calls().find("syscall=1 (first: number " + std::to_string(SYS_getpid)), std::string::npos)
        << libc_calls();
}

TEST_P(one_entry_test, gluon_never_calls_libc_wrappers) {
    interposed_reset();
    {
        auto rt = runtime::start(test::test_runtime(2, GetParam()));
        ASSERT_TRUE(rt) << rt.error().message();
        tcp_echo(**rt);
        ipc_echo(**rt, ipc::memory_mode::memfd);
        ipc_echo(**rt, ipc::memory_mode::dev_shm);
        for (auto k : file_engines_) {
            SCOPED_TRACE(file_io::kind_name(k));
            file_round_trip(**rt, dir_, k, data_);
        }
    }  // the runtime stops: engines, stacks and threads go
    EXPECT_EQ(libc_calls(), "") << "libc system-call wrappers called while gluon worked";
}

}  // namespace
}  // namespace gluon
