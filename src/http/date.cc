#include "date.h"

#include <cstdio>
#include <cstring>

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

namespace {

int month_of(std::string_view m) noexcept {
    for (int i = 0; i < 12; ++i)
        if (m == k_months[i]) return i;
    return -1;
}

bool digits(std::string_view s, int& out) noexcept {
    if (s.empty()) return false;
    out = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        out = out * 10 + (c - '0');
    }
    return true;
}

// "HH:MM:SS"
bool clock_of(std::string_view s, tm& t) noexcept {
    return s.size() == 8 && s[2] == ':' && s[5] == ':' && digits(s.substr(0, 2), t.tm_hour) &&
           digits(s.substr(3, 2), t.tm_min) && digits(s.substr(6, 2), t.tm_sec);
}

// t holds a day, a month (-1: none), a full year and a time of day.
time_t to_time(tm& t) noexcept {
    if (t.tm_mon < 0 || t.tm_mday < 1 || t.tm_mday > 31 || t.tm_hour > 23 || t.tm_min > 59 || t.tm_sec > 60)
        return -1;
    t.tm_year -= 1900;
    return timegm(&t);
}

}  // namespace

time_t parse_http_date(std::string_view s) noexcept {
    tm t{};
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
    if (s.size() == k_http_date_len && s[3] == ',' && s[4] == ' ' && s[7] == ' ' && s[11] == ' ' &&
        s[16] == ' ' && s.substr(25) == " GMT") {
        t.tm_mon = month_of(s.substr(8, 3));
        if (!digits(s.substr(5, 2), t.tm_mday) || !digits(s.substr(12, 4), t.tm_year) || !clock_of(s.substr(17, 8), t))
            return -1;
        return to_time(t);
    }
    // asctime: "Sun Nov  6 08:49:37 1994".
    if (s.size() == 24 && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
        std::string_view day = s.substr(8, 2);
        if (day[0] == ' ') day.remove_prefix(1);
        t.tm_mon = month_of(s.substr(4, 3));
        if (!digits(day, t.tm_mday) || !clock_of(s.substr(11, 8), t) || !digits(s.substr(20, 4), t.tm_year)) return -1;
        return to_time(t);
    }
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT", after the day's full name.
    size_t comma = s.find(", ");
    std::string_view rest = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 2);
    if (rest.size() == 22 && rest[2] == '-' && rest[6] == '-' && rest[9] == ' ' && rest.substr(18) == " GMT") {
        t.tm_mon = month_of(rest.substr(3, 3));
        int yy = 0;
        if (!digits(rest.substr(0, 2), t.tm_mday) || !digits(rest.substr(7, 2), yy) || !clock_of(rest.substr(10, 8), t))
            return -1;
        // A two-digit year more than 50 years ahead is the latest past year with those digits
        // (RFC 9110 5.6.7).
        time_t now = ::time(nullptr);
        tm g;
        gmtime_r(&now, &g);
        const int this_year = g.tm_year + 1900;
        t.tm_year = this_year - this_year % 100 + yy;
        if (t.tm_year > this_year + 50) t.tm_year -= 100;
        return to_time(t);
    }
    return -1;
}

}  // namespace gluon::http::detail
