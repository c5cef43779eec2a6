// Command lines for gluon programs (examples, benchmarks, tools): options declared once, then
// parsed, with the usage printed on any mistake.
//
//     cli::parser p("usage: echo_server [--port N] [--engine io_uring|epoll]");
//     p.option("--port", c.port).engine(c.vcpu).flag("--access-log", c.access_log);
//     if (!p.parse(argc, argv)) return p.usage();
//
// Options take their value from the next argument ("--port 80"); numbers are checked (digits,
// in range of the target's type; a floating-point number is a finite decimal such as "0.5" or
// "1e-3", in the type's range, without leading spaces or '+': "nan", "inf" and "1e400" are refused). Arguments that do not start with '-' are positional, kept in
// order unless positional() says otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gluon/common/clock.h"

namespace gluon {
struct init_options;
}

namespace gluon::cli {

class parser {
public:
    explicit parser(std::string usage) : usage_(std::move(usage)) {}

    /// An option with a value, handled by fn (false: the value is wrong).
    parser& option(std::string_view name, std::function<bool(std::string_view)> fn);
    /// An option that sets a string; repeated, the last wins.
    parser& option(std::string_view name, std::string& out);
    /// An option that adds to a list each time it is given.
    parser& option(std::string_view name, std::vector<std::string>& out);
    /// An option that sets a number (integers in the type's range, or a finite floating-point
    /// number in the type's range).
    template <typename T>
        requires std::is_arithmetic_v<T>
    parser& option(std::string_view name, T& out) {
        return option(name, [&out](std::string_view v) { return to_number(v, out); });
    }
    /// An option that sets a duration, given in seconds as a decimal number ("0.5" is half a
    /// second); negative, infinite or NaN values are refused.
    parser& option(std::string_view name, duration& out);
    /// An option without a value: sets out to true.
    parser& flag(std::string_view name, bool& out);
    /// `--engine io_uring|epoll`: the vCPU engine.
    parser& engine(init_options& o);
    /// Where positional arguments go (by default they are an error).
    parser& positional(std::vector<std::string>& out) {
        positional_ = &out;
        return *this;
    }

    /// Parses argv[first..argc). False on an unknown option, a missing or wrong value or an
    /// unexpected positional argument (what went wrong is printed to stderr).
    bool parse(int argc, char** argv, int first = 1);
    /// Prints the usage to stderr and returns 2 (the exit status for a bad command line).
    int usage() const;

private:
    template <typename T>
    static bool to_number(std::string_view v, T& out) {
        if constexpr (std::is_floating_point_v<T>) {
            double d;
            // A double past T's range (a float's 3.4e38) has no value in T: converting it is
            // undefined behaviour.
            if (!to_double(v, d) || d < std::numeric_limits<T>::lowest() || d > std::numeric_limits<T>::max())
                return false;
            out = static_cast<T>(d);
            return true;
        } else if constexpr (std::is_same_v<T, bool>) {
            return false;
        } else if constexpr (std::is_unsigned_v<T>) {
            unsigned long long x;
            if (!to_unsigned(v, x, std::numeric_limits<T>::max())) return false;
            out = static_cast<T>(x);
            return true;
        } else {
            long long x;
            if (!to_integer(v, x, std::numeric_limits<T>::min(), std::numeric_limits<T>::max())) return false;
            out = static_cast<T>(x);
            return true;
        }
    }
    static bool to_integer(std::string_view v, long long& out, long long lo, long long hi);
    static bool to_unsigned(std::string_view v, unsigned long long& out, unsigned long long hi);
    static bool to_double(std::string_view v, double& out);

    struct entry {
        std::string name;
        bool takes_value;
        std::function<bool(std::string_view)> fn;
    };
    std::string usage_;
    std::vector<entry> entries_;
    std::vector<std::string>* positional_ = nullptr;
};

}  // namespace gluon::cli
