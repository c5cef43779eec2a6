// A Redis reply, RESP2 or RESP3: one value type for every kind the server can answer with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gluon::redis {

struct reply {
    enum class kind : uint8_t {
        nil,          // RESP2 null bulk string / array, RESP3 null
        simple,       // +OK
        error,        // -ERR ..., RESP3 blob error (!)
        integer,      // :42
        bulk,         // $5 hello
        array,        // *N
        double_,      // RESP3 ,3.14 (text in str, value in number)
        boolean,      // RESP3 #t / #f (in integer: 1 or 0)
        big_number,   // RESP3 ( (digits in str)
        verbatim,     // RESP3 =txt:... (the text after "txt:" in str)
        map,          // RESP3 %N: elements hold key, value, key, value, ...
        set,          // RESP3 ~N
        push,         // RESP3 >N: out-of-band (pub/sub messages, invalidations)
    };
    kind type = kind::nil;
    std::string str;              // simple, error, bulk, double_, big_number, verbatim
    int64_t integer = 0;          // integer, boolean
    double number = 0;            // double_
    std::vector<reply> elements;  // array, map, set, push

    bool is_nil() const noexcept { return type == kind::nil; }
    bool is_error() const noexcept { return type == kind::error; }
    bool is_string() const noexcept {
        return type == kind::simple || type == kind::bulk || type == kind::verbatim;
    }
    bool is_aggregate() const noexcept {
        return type == kind::array || type == kind::map || type == kind::set || type == kind::push;
    }
};

/// The kind's RESP name ("bulk", "map", ...), for messages.
const char* kind_name(reply::kind k) noexcept;

}  // namespace gluon::redis
