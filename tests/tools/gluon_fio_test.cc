// gluon-fio (bench/io): its options read as fio reads them, and what a hostile value cannot do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "layout.h"
#include "options.h"

namespace bench {
namespace {

/// Parses "--filename=f" and the given options; "" on success, else the error.
std::string parse(std::initializer_list<const char*> words, fio_options& o) {
    std::vector<std::string> s{"gluon-fio", "--filename=f"};
    s.insert(s.end(), words.begin(), words.end());
    std::vector<char*> argv;
    for (auto& x : s) argv.push_back(x.data());
    return parse_fio_options(static_cast<int>(argv.size()), argv.data(), o);
}

TEST(gluon_fio, sizes_take_fio_suffixes) {
    fio_options o;
    ASSERT_EQ(parse({"--size=2g", "--bs=64k", "--iodepth=16"}, o), "");
    EXPECT_EQ(o.size, 2ULL << 30);
    EXPECT_EQ(o.bs, 64u << 10);
    EXPECT_EQ(o.iodepth, 16u);
    EXPECT_NE(parse({"--size=8388607t"}, o), "");  // no such suffix
    ASSERT_EQ(parse({"--size=8589934591g"}, o), "");        // 2^63 - 2^30: still an off_t
    EXPECT_EQ(o.size, 8589934591ULL << 30);
}

TEST(gluon_fio, a_size_that_is_negative_or_past_an_off_t_is_refused) {
    // Each was taken: "-1" as 2^64 - 1 (a layout that fills the disk), the others modulo 2^64
    // (18014398509481985k is 2^64 + 1024: a file of 1 KiB).
    for (const char* v : {"--size=-1", "--size=-1g", "--size=99999999999999999999", "--size=20000000000g",
                          "--size=18014398509481985k", "--size=8589934592g", "--size= 8k", "--size=+8k"}) {
        fio_options o;
        EXPECT_NE(parse({v, "--bs=512"}, o), "") << v << " gave size " << o.size;
    }
}

TEST(gluon_fio, runtime_is_read_in_fio_units) {
    fio_options o;
    ASSERT_EQ(parse({"--runtime=1m"}, o), "");
    EXPECT_EQ(o.runtime_s, 60);  // fio's minute, not a second
    ASSERT_EQ(parse({"--runtime=500ms"}, o), "");
    EXPECT_DOUBLE_EQ(o.runtime_s, 0.5);
    ASSERT_EQ(parse({"--runtime=4"}, o), "");
    EXPECT_EQ(o.runtime_s, 4);
    ASSERT_EQ(parse({"--runtime=0.01"}, o), "");
    EXPECT_DOUBLE_EQ(o.runtime_s, 0.01);
    for (const char* v : {"--runtime=nan", "--runtime=inf", "--runtime=1e300", "--runtime=0", "--runtime=-1",
                          "--runtime=10x", "--runtime="}) {
        fio_options bad;
        EXPECT_NE(parse({v}, bad), "") << v;
    }
}

TEST(gluon_fio, direct_and_cpu_take_only_what_they_mean) {
    fio_options o;
    ASSERT_EQ(parse({"--direct=1", "--cpu=1"}, o), "");
    EXPECT_TRUE(o.direct);
    EXPECT_EQ(o.cpu, 1);
    ASSERT_EQ(parse({"--direct=0"}, o), "");
    EXPECT_FALSE(o.direct);
    // Each ran silently as something else: buffered I/O, or pinned to CPU 0.
    for (const char* v : {"--direct=yes", "--direct=true", "--direct", "--cpu=abc", "--cpu=", "--cpu=-1",
                          "--cpu=100000"}) {
        fio_options bad;
        EXPECT_NE(parse({v}, bad), "") << v;
    }
}

// A file of stamped blocks in memory: what layout() writes.
std::vector<char> laid_out(size_t size) {
    std::vector<char> file(size, 'g');
    stamp(file.data(), file.size(), 0);
    return file;
}

TEST(gluon_fio, writes_of_any_block_size_keep_the_stamps_reads_check) {
    // A write run, then a read run of another block size, each over the whole file as fio's
    // sequential modes go: every read must find its stamps. A 6 KiB write at 6 KiB used to
    // leave its buffer's old bytes where the block at 8 KiB starts (its stamp was skipped, as
    // 6 KiB is no multiple of 4), and 4097 cuts through stamps.
    for (size_t wbs : {size_t{4096}, size_t{6144}, size_t{4097}, size_t{512}, size_t{65536}}) {
        for (size_t rbs : {size_t{4096}, size_t{6144}, size_t{512}, size_t{1000}}) {
            std::vector<char> file = laid_out(256 * 1024);
            std::vector<char> buf(wbs, 'w');
            for (size_t off = 0; off + wbs <= file.size(); off += wbs) {
                stamp(buf.data(), wbs, static_cast<int64_t>(off));
                std::copy(buf.begin(), buf.end(), file.begin() + static_cast<std::ptrdiff_t>(off));
            }
            for (size_t off = 0; off + rbs <= file.size(); off += rbs)
                ASSERT_TRUE(check_stamp(file.data() + off, rbs, static_cast<int64_t>(off)))
                    << "written in " << wbs << ", read in " << rbs << " at " << off;
        }
    }
}

TEST(gluon_fio, a_read_from_the_wrong_place_fails_its_check) {
    std::vector<char> file = laid_out(64 * 1024);
    // Every block size sees a stamp that is not its own: 6 KiB at 12 KiB holds the block at
    // 12 KiB, checked as if read at 6 KiB (whose 8 KiB block then starts 2 KiB in); 512 bytes
    // at 4 KiB, read as if from 8 KiB.
    EXPECT_FALSE(check_stamp(file.data() + 12288, 6144, 6144));
    EXPECT_FALSE(check_stamp(file.data() + 4096, 512, 8192));
    EXPECT_TRUE(check_stamp(file.data() + 6144, 6144, 6144));
    // A read that did nothing (zeros) cannot pass once its range holds a stamp.
    std::vector<char> zeros(6144, 0);
    EXPECT_FALSE(check_stamp(zeros.data(), zeros.size(), 6144));
}

}  // namespace
}  // namespace bench
