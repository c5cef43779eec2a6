// gluon-fs-fio (bench/fs): its own options, whole numbers in range, and the rest left to gluon-fio.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "fs_options.h"

namespace bench {
namespace {

/// Splits "gluon-fs-fio" and the given words; "" on success, else the error.
std::string split(std::initializer_list<const char*> words, fs_fio_options& x, std::vector<std::string>* rest = nullptr) {
    std::vector<std::string> s{"gluon-fs-fio"};
    s.insert(s.end(), words.begin(), words.end());
    std::vector<char*> argv;
    for (auto& w : s) argv.push_back(w.data());
    std::vector<char*> r;
    std::string err = split_fs_fio_options(static_cast<int>(argv.size()), argv.data(), x, r);
    if (rest) rest->assign(r.begin(), r.end());
    return err;
}

TEST(gluon_fs_fio, its_options_are_taken_and_the_rest_left) {
    fs_fio_options x;
    std::vector<std::string> rest;
    ASSERT_EQ(split({"--via=cache", "--bs=4k", "--cache-mib=16", "--block-kib=64", "--read-ahead=0", "--warm",
                     "--url=http://127.0.0.1:1/f", "--iodepth=16"},
                    x, &rest),
              "");
    EXPECT_EQ(x.via, "cache");
    EXPECT_EQ(x.url, "http://127.0.0.1:1/f");
    EXPECT_EQ(x.cache_mib, 16u);
    EXPECT_EQ(x.block_kib, 64u);
    EXPECT_EQ(x.read_ahead, 0u);
    EXPECT_TRUE(x.warm);
    EXPECT_EQ(rest, (std::vector<std::string>{"gluon-fs-fio", "--bs=4k", "--iodepth=16"}));
    ASSERT_EQ(split({"--block-kib=4", "--block-kib=65536"}, x), "");  // the cache's smallest and largest blocks
    EXPECT_EQ(x.block_kib, 65536u);
}

TEST(gluon_fs_fio, a_count_that_is_not_a_number_in_range_is_refused) {
    // Each was taken by strtoull: "-1" as 2^64 - 1 (a read-ahead the cache, counting in an int,
    // took for none), "4x" as 4, "" as 0, and 2^54 + 4 KiB or 2^44 MiB wrapped once shifted into
    // bytes (a block of 4 KiB, a cache of 0 bytes).
    for (const char* v : {"--cache-mib=-1", "--cache-mib=17592186044416", "--cache-mib=16x", "--cache-mib=",
                          "--block-kib=18014398509481988", "--block-kib=131072", "--block-kib=2", "--block-kib= 64",
                          "--block-kib=+64", "--read-ahead=-1", "--read-ahead=4097", "--read-ahead=4x", "--read-ahead="}) {
        fs_fio_options x;
        EXPECT_NE(split({v}, x), "") << v;
    }
}

}  // namespace
}  // namespace bench
