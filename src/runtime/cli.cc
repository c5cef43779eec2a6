#include "gluon/runtime/cli.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "gluon/engine/engine.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::cli {

parser& parser::option(std::string_view name, std::function<bool(std::string_view)> fn) {
    entries_.push_back({std::string(name), true, std::move(fn)});
    return *this;
}

parser& parser::option(std::string_view name, std::string& out) {
    return option(name, [&out](std::string_view v) {
        out = v;
        return true;
    });
}

parser& parser::option(std::string_view name, std::vector<std::string>& out) {
    return option(name, [&out](std::string_view v) {
        out.emplace_back(v);
        return true;
    });
}

parser& parser::option(std::string_view name, duration& out) {
    return option(name, [&out](std::string_view v) {
        double s;
        // The upper bound keeps the conversion to nanoseconds in range (about 292 years).
        if (!to_double(v, s) || !(s >= 0) || s > 9e9) return false;
        out = std::chrono::duration_cast<duration>(std::chrono::duration<double>(s));
        return true;
    });
}

parser& parser::flag(std::string_view name, bool& out) {
    entries_.push_back({std::string(name), false, [&out](std::string_view) {
                            out = true;
                            return true;
                        }});
    return *this;
}

parser& parser::engine(init_options& o) {
    return option("--engine", [&o](std::string_view v) {
        o.engine = gluon::engine::parse_kind(v);
        return o.engine.has_value();
    });
}

bool parser::parse(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a.empty() || a[0] != '-' || a == "-") {
            if (!positional_) {
                std::fprintf(stderr, "unexpected argument: %s\n", argv[i]);
                return false;
            }
            positional_->emplace_back(a);
            continue;
        }
        const entry* e = nullptr;
        for (const auto& x : entries_)
            if (x.name == a) e = &x;
        if (!e) {
            std::fprintf(stderr, "unknown option: %s\n", argv[i]);
            return false;
        }
        if (!e->takes_value) {
            (void)e->fn({});
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "%s needs a value\n", argv[i]);
            return false;
        }
        if (!e->fn(argv[++i])) {
            std::fprintf(stderr, "bad value for %s: %s\n", argv[i - 1], argv[i]);
            return false;
        }
    }
    return true;
}

int parser::usage() const {
    std::fprintf(stderr, "%s\n", usage_.c_str());
    return 2;
}

bool parser::to_integer(std::string_view v, long long& out, long long lo, long long hi) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size() && out >= lo && out <= hi;
}

bool parser::to_unsigned(std::string_view v, unsigned long long& out, unsigned long long hi) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size() && out <= hi;
}

bool parser::to_double(std::string_view v, double& out) {
    // from_chars, not strtod: no leading spaces, '+' or hex, whatever the locale, and a value
    // past a double's range ("1e400") is an error instead of an infinity. "nan" and "inf" parse,
    // but are no number an option means.
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size() && std::isfinite(out);
}

}  // namespace gluon::cli
