#include "date.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace gluon::http::detail {

namespace {
constexpr const char* k_days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* k_months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
}  // namespace

void format_http_date(time_t t, char* out) noexcept {
    tm g;
    gmtime_r(&t, &g);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", k_days[g.tm_wday], g.tm_mday,
                  k_months[g.tm_mon], g.tm_year + 1900, g.tm_hour, g.tm_min, g.tm_sec);
    std::memcpy(out, buf, k_http_date_len);
}

std::string_view http_date_now() noexcept {
    thread_local time_t cached = -1;
    thread_local char buf[k_http_date_len];
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != cached) {
        cached = ts.tv_sec;
        format_http_date(ts.tv_sec, buf);
    }
    return {buf, k_http_date_len};
}

time_t parse_http_date(std::string_view s) noexcept {
    if (s.size() != k_http_date_len || s.substr(25) != " GMT" || s[3] != ',') return -1;
    char mon[4] = {};
    tm t{};
    char tail[8];
    std::string z(s);
    if (std::sscanf(z.c_str() + 5, "%2d %3s %4d %2d:%2d:%2d %3s", &t.tm_mday, mon, &t.tm_year, &t.tm_hour,
                    &t.tm_min, &t.tm_sec, tail) != 7)
        return -1;
    int m = 0;
    while (m < 12 && std::strcmp(k_months[m], mon) != 0) ++m;
    if (m == 12) return -1;
    t.tm_mon = m;
    t.tm_year -= 1900;
    return timegm(&t);
}

}  // namespace gluon::http::detail
