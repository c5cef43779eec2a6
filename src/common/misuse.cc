#include "gluon/common/misuse.h"

#include <chrono>
#include <cstdlib>

#include "gluon/common/lazy.h"
#include "gluon/common/log.h"
#include "gluon/common/result.h"

namespace gluon::detail {

namespace {
bool abort_on_misuse() {
#ifdef NDEBUG
    const char* env = std::getenv("GLUON_MISUSE_ABORT");
    return env && env[0] == '1';
#else
    const char* env = std::getenv("GLUON_MISUSE_ABORT");
    return !(env && env[0] == '0');
#endif
}
}  // namespace

void report_misuse(std::string_view what) noexcept {
    static constinit lazy_flag do_abort;
    if (do_abort.get(abort_on_misuse)) {
        GLUON_ERROR("gluon: API misuse: {}", what);
        std::abort();
    }
    GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: API misuse: {}", what);
}

void value_of_failed_result(int code, const std::error_category& cat) noexcept {
    GLUON_ERROR("gluon: value() of a result that holds an error: {} ({})",
                cat.message(code), code);
    std::abort();
}

}  // namespace gluon::detail
