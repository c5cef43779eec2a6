#include "date.h"

#include <time.h>

#include <cstdio>

namespace gluon::http::detail {

std::string_view http_date_now() noexcept {
    static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    thread_local time_t cached = -1;
    thread_local char buf[32];
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != cached) {
        cached = ts.tv_sec;
        tm t;
        gmtime_r(&ts.tv_sec, &t);
        std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[t.tm_wday], t.tm_mday,
                      months[t.tm_mon], t.tm_year + 1900, t.tm_hour, t.tm_min, t.tm_sec);
    }
    return {buf, 29};
}

}  // namespace gluon::http::detail
