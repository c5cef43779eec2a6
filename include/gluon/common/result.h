// gluon::result<T>: the library's return type, shaped like C++23 std::expected<T, std::error_code>
// (only the subset we use, so it can become an alias once the toolchain has std::expected).
#pragma once

#include <cerrno>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace gluon {

/// Wraps an error for constructing a failed result, like std::unexpected.
struct unexpected {
    std::error_code code;
    explicit unexpected(std::error_code c) : code(c) {}
    explicit unexpected(std::errc e) : code(std::make_error_code(e)) {}
};

/// An error code in the generic (errno) category.
inline std::error_code errno_code(int e) { return {e, std::generic_category()}; }

/// Builds a failed result from a positive errno value.
inline unexpected errno_error(int e) { return unexpected(errno_code(e)); }

template <typename T>
class [[nodiscard]] result {
public:
    using value_type = T;
    using error_type = std::error_code;

    result() requires std::is_default_constructible_v<T> : v_(std::in_place_index<0>) {}
    result(T v) : v_(std::in_place_index<0>, std::move(v)) {}  // NOLINT(google-explicit-constructor)
    result(unexpected u) : v_(std::in_place_index<1>, u.code) {}  // NOLINT(google-explicit-constructor)

    bool has_value() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    /// The error; std::error_code{} when the result holds a value.
    std::error_code error() const noexcept {
        return has_value() ? std::error_code{} : std::get<1>(v_);
    }
    template <typename U>
    T value_or(U&& dflt) const& {
        return has_value() ? value() : static_cast<T>(std::forward<U>(dflt));
    }

private:
    std::variant<T, std::error_code> v_;
};

template <>
class [[nodiscard]] result<void> {
public:
    using value_type = void;
    using error_type = std::error_code;

    result() = default;
    result(unexpected u) noexcept  // NOLINT(google-explicit-constructor)
        : val_(u.code.value()), cat_(u.code ? &u.code.category() : nullptr) {}

    bool has_value() const noexcept { return cat_ == nullptr; }
    explicit operator bool() const noexcept { return has_value(); }
    void value() const {}
    std::error_code error() const noexcept {
        return cat_ ? std::error_code(val_, *cat_) : std::error_code{};
    }

private:
    // Not a std::error_code member: its default constructor calls std::system_category(), an
    // out-of-line library call, on every successful return.
    int val_ = 0;
    const std::error_category* cat_ = nullptr;
};

/// Converts a syscall-floor return value (>= 0 success, -errno failure) into a result.
template <typename T = long>
result<T> from_syscall(long r) {
    if (r < 0) return errno_error(static_cast<int>(-r));
    return static_cast<T>(r);
}
inline result<void> void_from_syscall(long r) {
    if (r < 0) return errno_error(static_cast<int>(-r));
    return {};
}

}  // namespace gluon
