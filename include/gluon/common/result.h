// gluon::result<T>: the library's return type, shaped like C++23 std::expected<T, std::error_code>
// (only the subset we use, so it can become an alias once the toolchain has std::expected).
#pragma once

#include <cerrno>
#include <functional>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

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

namespace detail {
/// result<T>::value() on an error: prints the error and aborts (library code throws nothing).
[[noreturn]] void value_of_failed_result(int code, const std::error_category& cat) noexcept;
}  // namespace detail

template <typename T>
class result;

namespace detail {
template <typename R>
struct is_result : std::false_type {};
template <typename T>
struct is_result<result<T>> : std::true_type {};
/// result<R> for R = f's return type with references and cv dropped (void stays void).
template <typename F, typename... A>
using transformed = result<std::remove_cv_t<std::invoke_result_t<F, A...>>>;
}  // namespace detail

/// A value or an error. The error is held as its value and category pointer, and a null category
/// pointer means "holds a value", so a result of a trivially copyable T (result<size_t>, the
/// return type of every transfer) is itself trivially copyable and, at 16 bytes, returned in
/// registers; std::variant<T, std::error_code> would be 24 bytes returned through memory, with
/// an index check and a throwing path in every access.
template <typename T>
class [[nodiscard]] result {
public:
    using value_type = T;
    using error_type = std::error_code;

private:
    static constexpr bool trivial_copy = std::is_trivially_copyable_v<T>;

public:
    result() requires std::is_default_constructible_v<T> : val_() {}
    result(T v) : val_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
    result(unexpected u) noexcept  // NOLINT(google-explicit-constructor)
        : err_(u.code.value()), cat_(&u.code.category()) {
        // A reference's address is never null; saying so keeps GCC from warning that a moved
        // value may be read uninitialised on the (impossible) value path of an error.
        if (cat_ == nullptr) __builtin_unreachable();
    }

    result(const result&) requires std::is_trivially_copy_constructible_v<T> = default;
    result(const result& o) requires(!std::is_trivially_copy_constructible_v<T> &&
                                     std::is_copy_constructible_v<T>) {
        construct_from(o);
    }
    result(result&&) requires std::is_trivially_move_constructible_v<T> = default;
    result(result&& o) noexcept(std::is_nothrow_move_constructible_v<T>)
        requires(!std::is_trivially_move_constructible_v<T> && std::is_move_constructible_v<T>) {
        construct_from(std::move(o));
    }
    result& operator=(const result&) requires trivial_copy = default;
    result& operator=(const result& o) requires(!trivial_copy && std::is_copy_constructible_v<T>) {
        if (this != &o) {
            destroy();
            construct_from(o);
        }
        return *this;
    }
    result& operator=(result&&) requires trivial_copy = default;
    result& operator=(result&& o) noexcept(std::is_nothrow_move_constructible_v<T>)
        requires(!trivial_copy && std::is_move_constructible_v<T>) {
        if (this != &o) {
            destroy();
            construct_from(std::move(o));
        }
        return *this;
    }
    ~result() requires std::is_trivially_destructible_v<T> = default;
    ~result() { destroy(); }

    bool has_value() const noexcept { return cat_ == nullptr; }
    explicit operator bool() const noexcept { return has_value(); }

    T& value() & { return check(), val_; }
    const T& value() const& { return check(), val_; }
    T&& value() && { return check(), std::move(val_); }
    T& operator*() & { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    /// The error; std::error_code{} when the result holds a value.
    std::error_code error() const noexcept {
        return cat_ ? std::error_code(err_, *cat_) : std::error_code{};
    }
    template <typename U>
    T value_or(U&& dflt) const& {
        return has_value() ? val_ : static_cast<T>(std::forward<U>(dflt));
    }

    // Monadic operations with std::expected's semantics (C++23 [expected.object.monadic]):
    //   and_then(f)        value -> f(value), which returns a result<U>; an error passes through
    //   transform(f)       value -> result<U>{f(value)} (f may return void); an error passes through
    //   or_else(f)         error -> f(error), which returns a result<T>; a value passes through
    //   transform_error(f) error -> f(error), a new std::error_code; a value passes through
    template <typename F>
    auto and_then(F&& f) & { return and_then_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto and_then(F&& f) const& { return and_then_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto and_then(F&& f) && { return and_then_impl(std::move(*this), std::forward<F>(f)); }
    template <typename F>
    auto transform(F&& f) & { return transform_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto transform(F&& f) const& { return transform_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto transform(F&& f) && { return transform_impl(std::move(*this), std::forward<F>(f)); }
    template <typename F>
    result or_else(F&& f) const& {
        static_assert(std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F, std::error_code>>, result>,
                      "or_else: f must return the same result type");
        if (has_value()) return *this;
        return std::invoke(std::forward<F>(f), error());
    }
    template <typename F>
    result or_else(F&& f) && {
        static_assert(std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F, std::error_code>>, result>,
                      "or_else: f must return the same result type");
        if (has_value()) return std::move(*this);
        return std::invoke(std::forward<F>(f), error());
    }
    template <typename F>
    result transform_error(F&& f) const& {
        if (has_value()) return *this;
        return unexpected(std::error_code(std::invoke(std::forward<F>(f), error())));
    }
    template <typename F>
    result transform_error(F&& f) && {
        if (has_value()) return std::move(*this);
        return unexpected(std::error_code(std::invoke(std::forward<F>(f), error())));
    }

private:
    template <typename Self, typename F>
    static auto and_then_impl(Self&& self, F&& f) {
        using U = std::remove_cvref_t<std::invoke_result_t<F, decltype(std::forward<Self>(self).val_)>>;
        static_assert(detail::is_result<U>::value, "and_then: f must return a result");
        if (!self.has_value()) return U(unexpected(self.error()));
        return std::invoke(std::forward<F>(f), std::forward<Self>(self).val_);
    }
    template <typename Self, typename F>
    static auto transform_impl(Self&& self, F&& f) {
        using R = detail::transformed<F, decltype(std::forward<Self>(self).val_)>;
        if (!self.has_value()) return R(unexpected(self.error()));
        if constexpr (std::is_void_v<typename R::value_type>) {
            std::invoke(std::forward<F>(f), std::forward<Self>(self).val_);
            return R();
        } else {
            return R(std::invoke(std::forward<F>(f), std::forward<Self>(self).val_));
        }
    }

    template <typename>
    friend class result;

    void check() const noexcept {
        if (cat_) [[unlikely]]
            detail::value_of_failed_result(err_, *cat_);
    }
    void destroy() noexcept {
        if (!cat_) val_.~T();
    }
    template <typename R>
    void construct_from(R&& o) {
        cat_ = o.cat_;
        if (cat_)
            err_ = o.err_;
        else
            new (&val_) T(std::forward<R>(o).val_);
    }

    union {
        T val_;
        int err_;
    };
    const std::error_category* cat_ = nullptr;
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

    // Monadic operations as for result<T>; f takes no argument where result<T>'s takes the value.
    template <typename F>
    auto and_then(F&& f) const {
        using U = std::remove_cvref_t<std::invoke_result_t<F>>;
        static_assert(detail::is_result<U>::value, "and_then: f must return a result");
        if (!has_value()) return U(unexpected(error()));
        return std::invoke(std::forward<F>(f));
    }
    template <typename F>
    auto transform(F&& f) const {
        using R = detail::transformed<F>;
        if (!has_value()) return R(unexpected(error()));
        if constexpr (std::is_void_v<typename R::value_type>) {
            std::invoke(std::forward<F>(f));
            return R();
        } else {
            return R(std::invoke(std::forward<F>(f)));
        }
    }
    template <typename F>
    result or_else(F&& f) const {
        static_assert(std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F, std::error_code>>, result>,
                      "or_else: f must return result<void>");
        if (has_value()) return *this;
        return std::invoke(std::forward<F>(f), error());
    }
    template <typename F>
    result transform_error(F&& f) const {
        if (has_value()) return *this;
        return unexpected(std::error_code(std::invoke(std::forward<F>(f), error())));
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

/// Early return for code that returns a result: evaluates expr (a result<T>); on an error,
/// returns it from the enclosing function (converted to that function's result type); otherwise
/// the macro's value is the T, moved out if expr is an rvalue (nothing for result<void>), like
/// Rust's `?`:
///
///     result<config> load(const char* path) {
///         int fd = GLUON_TRY(open_file(path));
///         GLUON_TRY(check_header(fd));
///         ...
///
/// A GNU statement expression (GCC and Clang).
#define GLUON_TRY(...)                                                              \
    ({                                                                              \
        auto&& gluon_try_r_ = (__VA_ARGS__);                                        \
        if (!gluon_try_r_) [[unlikely]]                                             \
            return ::gluon::unexpected(gluon_try_r_.error());                       \
        std::forward<decltype(gluon_try_r_)>(gluon_try_r_).value();                 \
    })
