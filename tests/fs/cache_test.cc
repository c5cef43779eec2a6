// The cache filesystem over the local filesystem (every event engine and file engine) and over
// the HTTP filesystem against nginx and a gluon server that sends no validators: blocks in
// memory and on disk, single-flight, read-ahead, invalidation, and the refusal of writes.
#include "gluon/fs/cache.h"

#include <gtest/gtest.h>
#include <sys/time.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "forwarding_fs.h"
#include "fs_fixture.h"
#include "gluon/fs/http.h"
#include "gluon/http/server.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync/semaphore.h"
#include "support/nginx.h"

namespace gluon::fs {
namespace {

using namespace std::chrono_literals;

std::string random_bytes(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(g());
    return s;
}

/// A source that counts the reads reaching it and makes each one take a while (so that other
/// fibers run while a fetch is in flight).
class counting_fs final : public test::forwarding_fs {
public:
    using forwarding_fs::forwarding_fs;
    std::atomic<int> reads{0};
    duration delay = 0ms;
    /// While set, stat waits for stats_go (5 s at most); stats_done counts the stats ended.
    std::atomic<bool> hold_stats{false};
    event stats_go;
    std::atomic<int> stats_done{0};

    result<struct stat> stat(std::string_view p) noexcept override {
        if (hold_stats) (void)stats_go.wait(5s);
        auto r = in_->stat(p);
        ++stats_done;
        return r;
    }

    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t m) noexcept override {
        auto f = GLUON_TRY(in_->open(p, flags, m));
        return std::unique_ptr<file>(new counting_file(std::move(f), *this));
    }

private:
    class counting_file final : public test::forwarding_file {
    public:
        counting_file(std::unique_ptr<file> f, counting_fs& fs) : forwarding_file(std::move(f)), fs_(fs) {}

    protected:
        result<size_t> do_pread(void* b, size_t n, int64_t off, deadline_t d) noexcept override {
            ++fs_.reads;
            if (fs_.delay > 0ms) GLUON_TRY(this_fiber::sleep_for(fs_.delay));
            return forwarding_file::do_pread(b, n, off, d);
        }

    private:
        counting_fs& fs_;
    };
};

class cache_fs_test : public test::fs_test {
protected:
    void SetUp() override {
        test::fs_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        data_ = random_bytes(5 << 20, 3);
        make("data.bin", data_);
        auto src = fs::open_local(dir_, file_engine_kind());
        ASSERT_TRUE(src);
        source_ = std::make_shared<counting_fs>(std::move(*src));
    }
    std::unique_ptr<filesystem> cached(cache_options o) {
        auto c = make_cached(source_, std::move(o));
        EXPECT_TRUE(c) << c.error().message();
        return c ? std::move(*c) : nullptr;
    }
    void expect_window(file& f, size_t n, int64_t off) {
        std::string buf(n, '\0');
        auto r = f.pread(buf.data(), n, off);
        ASSERT_TRUE(r) << r.error().message();
        size_t want = std::min<size_t>(n, data_.size() - off);
        ASSERT_EQ(*r, want);
        EXPECT_TRUE(buf.compare(0, want, data_, off, want) == 0) << "at " << off;
    }
    /// Lets background fetches end before the test looks at counters or tears down.
    // Until no block is fetched in the background (a loaded machine may take long: at most 10 s).
    void settle(filesystem& c) {
        for (int i = 0; i < 10000 && cache_statistics(c).background != 0; ++i) (void)this_fiber::sleep_for(1ms);
        ASSERT_EQ(cache_statistics(c).background, 0u) << "background fetches did not end";
    }

    std::string data_;
    std::shared_ptr<counting_fs> source_;
};

TEST_P(cache_fs_test, serves_reads_from_memory_after_the_first_and_evicts_within_its_bound) {
    auto c = cached({.block_size = 64 << 10, .memory_bytes = 1 << 20, .read_ahead_blocks = 0});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    std::mt19937 g(1);
    for (int i = 0; i < 40; ++i) expect_window(**f, 1 + g() % 200000, g() % data_.size());
    int reads = source_->reads;
    auto st = cache_statistics(*c);
    EXPECT_GT(st.misses, 0u);
    EXPECT_LE(st.memory_bytes, 1u << 20);
    // A window inside one block, twice: the second is a hit with no source read.
    expect_window(**f, 1000, 3 * 65536 + 10);
    reads = source_->reads;
    expect_window(**f, 1000, 3 * 65536 + 2000);
    EXPECT_EQ(source_->reads, reads);
    // The whole file through a 1 MiB cache: blocks go out, the bound holds.
    for (int64_t off = 0; off < static_cast<int64_t>(data_.size()); off += 300000) expect_window(**f, 300000, off);
    settle(*c);
    st = cache_statistics(*c);
    EXPECT_GT(st.evictions, 0u);
    EXPECT_LE(st.memory_bytes, 1u << 20);
    EXPECT_EQ(cache_statistics(*fs_).hits, 0u);  // not a cache: zeros
}

TEST_P(cache_fs_test, many_fibers_missing_one_block_cause_one_fetch) {
    source_->delay = 20ms;
    auto c = cached({.block_size = 1 << 20, .read_ahead_blocks = 0});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    std::vector<fiber> readers;
    std::atomic<int> ok{0};
    for (int i = 0; i < 8; ++i) {
        auto r = spawn([&, i] {
            std::string buf(4096, '\0');
            int64_t off = 100000 + i * 4096;
            auto n = (*f)->pread(buf.data(), buf.size(), off);
            if (n && *n == buf.size() && data_.compare(off, buf.size(), buf) == 0) ++ok;
        });
        ASSERT_TRUE(r);
        readers.push_back(std::move(*r));
    }
    for (auto& r : readers) ASSERT_TRUE(r.join());
    EXPECT_EQ(ok.load(), 8);
    EXPECT_EQ(source_->reads.load(), 1);
    auto st = cache_statistics(*c);
    EXPECT_EQ(st.misses, 1u);
    EXPECT_EQ(st.waits, 7u);
}

TEST_P(cache_fs_test, readers_on_two_vcpus_share_blocks_and_fetch_each_once) {
    source_->delay = 2ms;
    auto c = cached({.block_size = 64 << 10, .read_ahead_blocks = 0});
    std::shared_ptr<filesystem> shared(std::move(c));
    auto rt = runtime::start(test::test_runtime(2, std::get<0>(GetParam())));
    ASSERT_TRUE(rt) << rt.error().message();
    std::atomic<int> ok{0};
    auto on_vcpu = [&](unsigned v) {
        auto f = shared->open("data.bin", O_RDONLY);
        if (!f) return;
        std::vector<fiber> fs;
        for (int i = 0; i < 8; ++i)
            fs.push_back(*spawn([&, v, i] {
                std::mt19937 g(v * 100 + i);
                for (int k = 0; k < 20; ++k) {
                    size_t n = 1 + g() % 100000;
                    size_t off = g() % (data_.size() - n);
                    std::string buf(n, '\0');
                    auto r = (*f)->pread(buf.data(), n, static_cast<int64_t>(off));
                    if (r && *r == n && data_.compare(off, n, buf) == 0) ++ok;
                }
            }));
        for (auto& fb : fs) (void)fb.join();
    };
    auto a = spawn([&] { ASSERT_TRUE((*rt)->run(0, [&] { on_vcpu(0); })); });
    auto b = spawn([&] { ASSERT_TRUE((*rt)->run(1, [&] { on_vcpu(1); })); });
    ASSERT_TRUE(a->join());
    ASSERT_TRUE(b->join());
    EXPECT_EQ(ok.load(), 2 * 8 * 20);
    auto st = cache_statistics(*shared);
    EXPECT_LE(st.misses, data_.size() / (64 << 10) + 1);  // no block fetched twice
    EXPECT_EQ(static_cast<uint64_t>(source_->reads.load()), st.misses);
}

TEST_P(cache_fs_test, sequential_readers_get_blocks_fetched_ahead) {
    auto c = cached({.block_size = 64 << 10, .read_ahead_blocks = 4});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    expect_window(**f, 65536, 0);
    expect_window(**f, 65536, 65536);  // continues the last read: blocks 2..5 are fetched ahead
    settle(*c);
    auto st = cache_statistics(*c);
    EXPECT_GE(st.read_ahead, 4u);
    uint64_t hits = st.hits;
    for (int b = 2; b < 6; ++b) expect_window(**f, 65536, b * 65536);
    EXPECT_GE(cache_statistics(*c).hits, hits + 4);
    // A read over several missing blocks fetches them side by side and returns them all.
    expect_window(**f, 1 << 20, 2 << 20);
    settle(*c);
}

TEST_P(cache_fs_test, keeps_blocks_on_disk_across_memory_drops_and_new_instances) {
    std::string disk = dir_ + "/cache-dir";
    cache_options o{.block_size = 256 << 10, .disk_dir = disk, .read_ahead_blocks = 0};
    auto c = cached(o);
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    for (int64_t off = 0; off < static_cast<int64_t>(data_.size()); off += 1 << 20) expect_window(**f, 1 << 20, off);
    settle(*c);
    int reads = source_->reads;
    cache_drop_memory(*c);
    EXPECT_EQ(cache_statistics(*c).memory_bytes, 0u);
    for (int64_t off = 0; off < static_cast<int64_t>(data_.size()); off += 1 << 20) expect_window(**f, 1 << 20, off);
    EXPECT_EQ(source_->reads, reads);
    EXPECT_EQ(cache_statistics(*c).disk_hits, 20u);
    // Another cache on the same directory (a restart) finds them too.
    auto again = cached(o);
    auto g = again->open("data.bin", O_RDONLY);
    ASSERT_TRUE(g);
    expect_window(**g, 5000, 4 << 20);
    EXPECT_EQ(source_->reads, reads);
    EXPECT_EQ(cache_statistics(*again).disk_hits, 1u);
}

// With memory full, a read of part of a block that is on disk reads that part from the block's
// file, not the whole block into memory (which would only push another out); one in 32 such
// reads still brings its block in, so that memory follows what is read.
TEST_P(cache_fs_test, reads_parts_of_blocks_from_disk_while_memory_is_full) {
    std::string disk = dir_ + "/parts";
    constexpr size_t bs = 256 << 10;
    auto c = cached({.block_size = bs, .memory_bytes = bs, .disk_dir = disk, .read_ahead_blocks = 0});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    for (int64_t off = 0; off < static_cast<int64_t>(data_.size()); off += 1 << 20) expect_window(**f, 1 << 20, off);
    settle(*c);
    const int reads = source_->reads;
    const auto before = cache_statistics(*c);
    EXPECT_EQ(before.memory_bytes, bs);  // full: the last block
    for (uint64_t b = 0; b < 19; ++b) expect_window(**f, 4096, static_cast<int64_t>(b * bs + 1000));
    auto after = cache_statistics(*c);
    EXPECT_EQ(source_->reads, reads);
    EXPECT_EQ(after.disk_hits - before.disk_hits, 19u);
    EXPECT_EQ(after.evictions, before.evictions) << "no block came into memory";
    EXPECT_EQ(after.hits, before.hits);
    // Reading on in one block: within 32 reads it comes in whole, and later reads are hits.
    for (int i = 0; i < 40; ++i) expect_window(**f, 4096, 1000 + 4096 * i);
    after = cache_statistics(*c);
    EXPECT_EQ(source_->reads, reads);
    EXPECT_EQ(after.evictions, before.evictions + 1);
    EXPECT_GE(after.hits, before.hits + 8);
}

TEST_P(cache_fs_test, keeps_its_disk_directory_within_its_bound) {
    std::string disk = dir_ + "/bounded";
    auto bytes_on_disk = [&] {
        uint64_t n = 0;
        for (auto& e : std::filesystem::recursive_directory_iterator(disk))
            if (e.is_regular_file()) n += e.file_size();
        return n;
    };
    auto c = cached({.block_size = 256 << 10, .disk_dir = disk, .disk_bytes = 1 << 20, .read_ahead_blocks = 0});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    for (int64_t off = 0; off < static_cast<int64_t>(data_.size()); off += 1 << 20) expect_window(**f, 1 << 20, off);
    settle(*c);
    auto st = cache_statistics(*c);
    EXPECT_LE(st.disk_bytes, 1u << 20);
    EXPECT_EQ(st.disk_evictions, 20u - 4u);  // 20 blocks written, 4 fit
    EXPECT_LE(bytes_on_disk(), 1u << 20);
    // The newest blocks stayed: they are disk hits for a new instance, which trims to its own
    // smaller bound at start.
    auto again = cached({.block_size = 256 << 10, .disk_dir = disk, .disk_bytes = 512 << 10, .read_ahead_blocks = 0});
    EXPECT_LE(bytes_on_disk(), 512u << 10);
    EXPECT_EQ(cache_statistics(*again).disk_bytes, 512u << 10);
    auto g = again->open("data.bin", O_RDONLY);
    ASSERT_TRUE(g);
    int reads = source_->reads;
    expect_window(**g, 1000, static_cast<int64_t>(data_.size()) - 5000);  // the last block
    EXPECT_EQ(source_->reads, reads);
    EXPECT_EQ(cache_statistics(*again).disk_hits, 1u);
}

uint64_t bytes_in(const std::string& dir) {
    uint64_t n = 0;
    for (auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file()) n += e.file_size();
    return n;
}

// A block whose file is written again replaces that file: it counts once against disk_bytes,
// not once per write (which shrank what the bound let the directory hold, for good).
TEST_P(cache_fs_test, counts_a_block_written_again_once_against_its_disk_bound) {
    std::string disk = dir_ + "/recount";
    constexpr size_t bs = 256 << 10;
    auto c = cached({.block_size = bs, .disk_dir = disk, .disk_bytes = 4 << 20, .read_ahead_blocks = 0});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    expect_window(**f, 1000, 0);
    EXPECT_EQ(cache_statistics(*c).disk_bytes, bs);
    // The block's file cut short (as a crash can leave one): not read back, so fetched and
    // written again.
    std::vector<std::filesystem::path> files;
    for (auto& e : std::filesystem::recursive_directory_iterator(disk))
        if (e.is_regular_file()) files.push_back(e.path());
    ASSERT_EQ(files.size(), 1u);
    std::filesystem::resize_file(files[0], 1000);
    cache_drop_memory(*c);
    const int reads = source_->reads;
    expect_window(**f, 1000, 0);
    EXPECT_EQ(source_->reads, reads + 1);
    EXPECT_EQ(std::filesystem::file_size(files[0]), bs);
    EXPECT_EQ(cache_statistics(*c).disk_bytes, bs);
    EXPECT_EQ(bytes_in(disk), bs);
}

// With memory for one block, a block leaves memory as soon as another comes in, and is often
// wanted again while its first copy is still being written to the directory: fetched again, it
// is written once and counted once, and the count stays that of the directory.
TEST_P(cache_fs_test, blocks_fetched_again_while_being_written_are_counted_once) {
    std::string disk = dir_ + "/racing";
    constexpr size_t bs = 64 << 10;
    auto c = cached({.block_size = bs, .memory_bytes = bs, .disk_dir = disk, .disk_bytes = 1ull << 30,
                     .read_ahead_blocks = 0});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    std::vector<fiber> readers;
    std::atomic<int> ok{0};
    for (int i = 0; i < 8; ++i) {
        auto r = spawn([&, i] {
            std::mt19937 g(i);
            for (int k = 0; k < 40; ++k) {
                int64_t off = static_cast<int64_t>(g() % 16) * bs;  // whole blocks, through memory
                std::string buf(bs, '\0');
                auto n = (*f)->pread(buf.data(), buf.size(), off);
                if (n && *n == buf.size() && data_.compare(off, bs, buf) == 0) ++ok;
            }
        });
        ASSERT_TRUE(r);
        readers.push_back(std::move(*r));
    }
    for (auto& r : readers) ASSERT_TRUE(r.join());
    settle(*c);
    EXPECT_EQ(ok.load(), 8 * 40);
    auto st = cache_statistics(*c);
    EXPECT_EQ(st.disk_evictions, 0u);
    EXPECT_LE(st.disk_bytes, 16u * bs);
    EXPECT_EQ(st.disk_bytes, bytes_in(disk));
}

TEST_P(cache_fs_test, a_changed_source_file_is_a_new_file_and_fails_open_readers_with_estale) {
    auto c = cached({.block_size = 64 << 10, .read_ahead_blocks = 0, .revalidate_after = 0s});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    expect_window(**f, 1000, 0);
    data_ = random_bytes(100000, 4);  // another size, other bytes
    make("data.bin", data_);
    char b[10];
    EXPECT_EQ((*f)->pread(b, sizeof b, 0).error().value(), ESTALE);
    auto g = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(g);
    expect_window(**g, 1000, 0);  // not the old block 0
    EXPECT_EQ((*g)->fstat()->st_size, 100000);
}

// The check of an open file against its source is a stat, which has no deadline (over HTTP a
// HEAD, with the client's timeout for each retry): a read with a 50 ms timeout that made the
// check waited as long as the stat took, here the 5 s the held stat gives up after.
TEST_P(cache_fs_test, a_read_waits_for_its_source_check_no_longer_than_its_timeout) {
    auto c = cached({.block_size = 64 << 10, .read_ahead_blocks = 0, .revalidate_after = 0s});
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    expect_window(**f, 1000, 0);
    source_->hold_stats = true;
    const int before = source_->stats_done;
    char b[10];
    auto r = (*f)->pread(b, sizeof b, 0, 50ms);  // a hit: only the check is slow
    ASSERT_FALSE(r) << "the read waited for the held check";
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_EQ(source_->stats_done, before);  // still held
    source_->hold_stats = false;
    source_->stats_go.set();
    for (int i = 0; i < 10000 && source_->stats_done == before; ++i) (void)this_fiber::sleep_for(1ms);
    ASSERT_GT(source_->stats_done, before) << "the held check did not end";
    expect_window(**f, 1000, 0);  // the file did not change: reads go on
}

TEST_P(cache_fs_test, is_read_only_and_says_so) {
    auto c = cached({});
    EXPECT_EQ(c->open("data.bin", O_RDWR).error(), std::errc::read_only_file_system);
    EXPECT_EQ(c->open("new", O_WRONLY | O_CREAT).error(), std::errc::read_only_file_system);
    EXPECT_EQ(c->unlink("data.bin").error(), std::errc::read_only_file_system);
    EXPECT_EQ(c->mkdir("d").error(), std::errc::read_only_file_system);
    EXPECT_EQ(c->truncate("data.bin", 0).error(), std::errc::read_only_file_system);
    EXPECT_EQ(c->access("data.bin", W_OK).error(), std::errc::read_only_file_system);
    auto f = c->open("data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    EXPECT_EQ((*f)->pwrite("x", 1, 0).error(), std::errc::bad_file_descriptor);
    EXPECT_EQ((*f)->ftruncate(0).error(), std::errc::read_only_file_system);
    EXPECT_EQ(c->stat("data.bin")->st_size, static_cast<off_t>(data_.size()));
    EXPECT_EQ(make_cached(source_, {.block_size = 3000}).error(), std::errc::invalid_argument);
}

GLUON_FS_TEST_SUITE(cache_fs_test);

// Over the HTTP filesystem and nginx.
class cache_http_test : public test::engine_test {
protected:
    static void SetUpTestSuite() { nginx_ = test::nginx::start(why_).release(); }
    static void TearDownTestSuite() {
        delete nginx_;
        nginx_ = nullptr;
    }
    void SetUp() override {
        GLUON_REQUIRE_PEER(nginx_, why_);
        test::engine_test::SetUp();
    }
    static inline test::nginx* nginx_ = nullptr;
    static inline std::string why_;
};

TEST_P(cache_http_test, caches_an_http_file_and_sees_a_new_etag_at_the_next_open) {
    std::string p = nginx_->www() + "/img.bin";
    std::string v1 = random_bytes(3 << 20, 5);
    std::ofstream(p, std::ios::binary) << v1;
    auto h = make_http_filesystem({.base_url = nginx_->url(""), .metadata_ttl = 0s});
    ASSERT_TRUE(h);
    std::shared_ptr<filesystem> http = std::move(*h);
    auto c = make_cached(http, {.block_size = 1 << 20, .read_ahead_blocks = 0});
    ASSERT_TRUE(c);
    auto f = (*c)->open("/img.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    std::string buf(v1.size(), '\0');
    ASSERT_TRUE((*f)->pread_exactly(buf.data(), buf.size(), 0));
    EXPECT_EQ(buf, v1);
    auto ranges = http_fs_statistics(*http).range_reads;
    ASSERT_TRUE((*f)->pread_exactly(buf.data(), buf.size(), 0));
    EXPECT_EQ(http_fs_statistics(*http).range_reads, ranges);  // all from memory
    EXPECT_EQ(cache_statistics(**c).misses, 3u);

    std::string v2 = random_bytes(3 << 20, 6);  // same size: only the ETag (mtime) tells
    std::ofstream(p, std::ios::binary) << v2;
    struct stat st{};
    ::stat(p.c_str(), &st);
    timeval tv[2] = {{st.st_mtime + 10, 0}, {st.st_mtime + 10, 0}};
    ::utimes(p.c_str(), tv);
    auto g = (*c)->open("/img.bin", O_RDONLY);
    ASSERT_TRUE(g);
    ASSERT_TRUE((*g)->pread_exactly(buf.data(), buf.size(), 0));
    EXPECT_EQ(buf, v2);
}

GLUON_ENGINE_TEST_SUITE(cache_http_test);

// Over the HTTP filesystem and a gluon server that sends neither ETag nor Last-Modified.
class cache_unvalidated_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        std::string tmpl = std::filesystem::temp_directory_path() / "gluon-cache-XXXXXX";
        ASSERT_TRUE(::mkdtemp(tmpl.data()));
        dir_ = tmpl;
    }
    void TearDown() override {
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
        }
        test::engine_test::TearDown();
    }
    /// Serves *body at every path: HEAD and single byte ranges, no validators.
    static result<std::unique_ptr<http::server>> serve(const std::string* body) {
        return http::server::start(net::address::ipv4_loopback(0), [body](http::request& req, http::response& res) {
            res.header("Accept-Ranges", "bytes");
            unsigned long long first = 0, last = 0;
            std::string range(req.header("Range"));
            if (std::sscanf(range.c_str(), "bytes=%llu-%llu", &first, &last) == 2 && first <= last &&
                last < body->size()) {
                res.status(206);
                res.header("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                                std::to_string(body->size()));
                return res.body(std::string_view(*body).substr(first, last - first + 1));
            }
            res.body(*body);  // a HEAD gets its length and no body
        });
    }
    std::string dir_;
};

// Nothing in such a file's stat changes with its bytes: blocks keyed on the stat served the old
// version of a file changed at the same size to every later open, and from the cache directory
// to later processes too.
TEST_P(cache_unvalidated_test, a_file_without_validators_is_fetched_again_at_each_open_and_never_kept_on_disk) {
    std::string body = random_bytes(1 << 20, 21);
    auto server = serve(&body);
    ASSERT_TRUE(server) << server.error().message();
    std::string origin = "http://127.0.0.1:" + std::to_string((*server)->local_address().port());
    auto h = make_http_filesystem({.base_url = origin, .metadata_ttl = 0s});
    ASSERT_TRUE(h);
    std::shared_ptr<filesystem> http = std::move(*h);
    cache_options o{.block_size = 256 << 10, .disk_dir = dir_ + "/blocks", .read_ahead_blocks = 0};
    auto c = make_cached(http, o);
    ASSERT_TRUE(c) << c.error().message();
    auto read_all = [](filesystem& fs) {
        auto f = fs.open("/blob", O_RDONLY);
        EXPECT_TRUE(f) << f.error().message();
        if (!f) return std::string();
        std::string buf(1 << 20, '\0');
        auto r = (*f)->pread_exactly(buf.data(), buf.size(), 0);
        EXPECT_TRUE(r) << r.error().message();
        return buf;
    };

    auto f = (*c)->open("/blob", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_FALSE((*f)->versioned());
    std::string buf(body.size(), '\0');
    ASSERT_TRUE((*f)->pread_exactly(buf.data(), buf.size(), 0));
    EXPECT_EQ(buf, body);
    auto ranges = http_fs_statistics(*http).range_reads;
    ASSERT_TRUE((*f)->pread_exactly(buf.data(), buf.size(), 0));
    EXPECT_EQ(http_fs_statistics(*http).range_reads, ranges);  // the open file's blocks, from memory

    body = random_bytes(1 << 20, 22);  // same size, other bytes: the stat cannot tell
    EXPECT_EQ(read_all(**c), body);
    EXPECT_EQ(http_fs_statistics(*http).range_reads, ranges + 4);  // fetched again, block by block
    EXPECT_EQ(cache_statistics(**c).disk_hits, 0u);
    size_t kept = 0;
    for (auto& e : std::filesystem::recursive_directory_iterator(o.disk_dir)) kept += e.is_regular_file();
    EXPECT_EQ(kept, 0u);

    body = random_bytes(1 << 20, 23);
    auto again = make_cached(http, o);  // a restart on the same directory
    ASSERT_TRUE(again);
    EXPECT_EQ(read_all(**again), body);
}

GLUON_ENGINE_TEST_SUITE(cache_unvalidated_test);

}  // namespace
}  // namespace gluon::fs
