// Messages of gluon's native RPC: plain structs, no generated code. A message lists its fields
// once with GLUON_RPC_FIELDS; each field is
//
//   - a trivially copyable value (integers, floats, enums, fixed arrays, structs of them),
//     sent as its bytes (little-endian hosts only: the wire is little-endian);
//   - std::string, std::vector<T> with T trivially copyable, or rpc::bytes: variable parts,
//     sent from where they are (one iovec each) and received into their storage as their
//     bytes arrive (straight into an rpc::bytes receive buffer);
//   - another message (nested), whose fields are laid out in place of it.
//
// On the wire a message is its fixed part (the values, and a u32 byte length for each variable
// part, in field order, nested messages inline) followed by the variable parts' bytes in the
// same order (docs/adr/0021-rpc-wire-format.md). The fixed part's size and a schema hash of the
// field types (and of the message's optional `static constexpr uint32_t rpc_version`) are
// derived from the type, so two sides whose types differ are told so (errc::schema_mismatch)
// instead of decoding garbage.
//
//     struct put_request {
//         uint64_t key;
//         std::string name;
//         rpc::bytes value;
//         GLUON_RPC_FIELDS(key, name, value)
//     };
#pragma once

#include "gluon/rpc/native/error.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <sys/uio.h>
#include <system_error>
#include <type_traits>
#include <vector>

static_assert(std::endian::native == std::endian::little, "the native RPC wire is little-endian");

/// Declares a message's fields, in wire order.
#define GLUON_RPC_FIELDS(...)                                                                      \
    template <typename GluonRpcV> void rpc_fields(GluonRpcV&& v) {                                 \
        v(__VA_ARGS__);                                                                            \
    }                                                                                              \
    template <typename GluonRpcV> void rpc_fields(GluonRpcV&& v) const {                           \
        v(__VA_ARGS__);                                                                            \
    }

namespace gluon::rpc {

/// A byte buffer field. Sending: a view of someone else's bytes (no copy) or owned bytes.
/// Receiving: into owned storage, grown as the bytes arrive, or, after receive_into(), straight
/// into the caller's buffer (no allocation and no copy beyond the transport's own; a longer
/// value fails the call with errc::buffer_too_small).
class bytes {
public:
    bytes() noexcept = default;
    bytes(const bytes& o) { *this = o; }
    bytes& operator=(const bytes& o) {
        if (this == &o) return *this;
        if (o.ptr_ != nullptr && o.ptr_ == o.own_.get()) {
            assign(o.ptr_, o.size_);
        } else {
            ptr_ = o.ptr_;
            size_ = o.size_;
        }
        rx_ = o.rx_;
        rx_cap_ = o.rx_cap_;
        return *this;
    }
    bytes(bytes&&) noexcept = default;
    bytes& operator=(bytes&&) noexcept = default;

    /// The n bytes at p, not copied: they must stay valid until the message is sent.
    static bytes view(const void* p, size_t n) noexcept {
        bytes b;
        b.ptr_ = static_cast<uint8_t*>(const_cast<void*>(p));
        b.size_ = n;
        return b;
    }
    /// Copies n bytes at p into owned storage.
    void assign(const void* p, size_t n) {
        uint8_t* d = prepare_owned(n);
        if (n) std::memcpy(d, p, n);
    }
    /// Receives the next value into [p, p + capacity) instead of owned storage.
    void receive_into(void* p, size_t capacity) noexcept {
        rx_ = static_cast<uint8_t*>(p);
        rx_cap_ = capacity;
    }

    const uint8_t* data() const noexcept { return ptr_; }
    size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::span<const uint8_t> span() const noexcept { return {ptr_, size_}; }
    std::string_view str() const noexcept { return {reinterpret_cast<const char*>(ptr_), size_}; }

    /// For the decoder, before a value of n bytes arrives: where it can go at once (the
    /// receive buffer, or owned storage that large already), or nullptr: a receive buffer that
    /// is too small, or owned storage that append_received() grows as the bytes come (the
    /// value is empty until then).
    uint8_t* prepare(size_t n) noexcept {
        if (rx_) {
            if (n > rx_cap_) return nullptr;
            ptr_ = rx_;
            size_ = n;
            return ptr_;
        }
        ptr_ = own_.get();
        if (own_ && own_cap_ >= n) {
            size_ = n;
            return ptr_;
        }
        size_ = 0;
        return nullptr;
    }
    bool receives_into() const noexcept { return rx_ != nullptr; }
    /// For the decoder: appends n received bytes of a value of len bytes in all. Owned storage
    /// starts at min(len, 64 KiB) and doubles, never past len: it holds what came, not what
    /// the peer said would come.
    void append_received(const uint8_t* p, size_t n, size_t len) {
        if (size_ + n > own_cap_) {
            size_t cap = std::min(len, std::max({size_ + n, 2 * own_cap_, k_first_bytes}));
            std::unique_ptr<uint8_t[]> b(new uint8_t[cap]); // not value-initialised
            if (size_) std::memcpy(b.get(), ptr_, size_);
            own_ = std::move(b);
            own_cap_ = cap;
            ptr_ = own_.get();
        }
        std::memcpy(ptr_ + size_, p, n);
        size_ += n;
    }

    /// What a value received piece by piece is given first.
    static constexpr size_t k_first_bytes = 64 << 10;

private:
    uint8_t* prepare_owned(size_t n) {
        if (!own_ || own_cap_ < n) {
            own_.reset(new uint8_t[n ? n : 1]); // not value-initialised: the bytes come next
            own_cap_ = n;
        }
        ptr_ = own_.get();
        size_ = n;
        return ptr_;
    }

    std::unique_ptr<uint8_t[]> own_;
    size_t own_cap_ = 0;
    uint8_t* ptr_ = nullptr;
    size_t size_ = 0;
    uint8_t* rx_ = nullptr;
    size_t rx_cap_ = 0;
};

namespace detail {
/// A growable array with room for N elements inline: a message has a few variable parts, and
/// its lists of them cost no allocation.
template <typename T, size_t N>
class inline_list {
public:
    inline_list() noexcept = default;
    inline_list(const inline_list&) = delete;
    inline_list& operator=(const inline_list&) = delete;

    void push_back(const T& v) {
        if (n_ == cap_) grow();
        data_[n_++] = v;
    }
    void clear() noexcept { n_ = 0; }
    T* data() noexcept { return data_; }
    const T* data() const noexcept { return data_; }
    size_t size() const noexcept { return n_; }
    T& operator[](size_t i) noexcept { return data_[i]; }

private:
    void grow() {
        auto h = std::make_unique<T[]>(cap_ * 2);
        std::copy(data_, data_ + n_, h.get());
        heap_ = std::move(h);
        data_ = heap_.get();
        cap_ *= 2;
    }

    T inline_[N];
    T* data_ = inline_;
    size_t n_ = 0;
    size_t cap_ = N;
    std::unique_ptr<T[]> heap_;
};
}  // namespace detail

/// iovecs with room for a few inline (a message's variable parts, a frame's pieces).
class iov_list : public detail::inline_list<iovec, 6> {
public:
    void push(const void* p, size_t n) {
        if (n != 0) push_back({const_cast<void*>(p), n});
    }
};

/// Where one variable part of a message being received goes: `to` (room for its len bytes
/// already: a receive buffer, or storage that large), or else its field, to which `append`
/// adds the bytes as they arrive (whole elements of `unit` bytes), so that the field's storage
/// follows the bytes that came rather than the length the peer announced.
struct rx_part {
    uint8_t* to = nullptr;
    size_t len = 0;
    void* field = nullptr;
    void (*append)(void* field, const uint8_t* p, size_t n, size_t len) = nullptr;
    size_t unit = 1;
};

/// A message's variable parts in wire order, a few inline.
class rx_list : public detail::inline_list<rx_part, 4> {
public:
    void push(const rx_part& p) {
        if (p.len != 0) push_back(p);
    }
};

namespace detail {

template <typename T>
concept message = requires(T& t) {
    t.rpc_fields([](auto&...) {});
};

template <typename T> struct vector_of : std::false_type {};
template <typename E, typename A> struct vector_of<std::vector<E, A>> : std::true_type {
    using elem = E;
};

template <typename T>
concept variable_field =
    std::is_same_v<T, std::string> || std::is_same_v<T, bytes> || vector_of<T>::value;

template <typename T>
concept scalar_field =
    std::is_trivially_copyable_v<T> && !message<T> && !std::is_pointer_v<T> && !variable_field<T>;

template <typename T>
constexpr bool valid_field =
    message<T> || scalar_field<T> || std::is_same_v<T, std::string> || std::is_same_v<T, bytes>;
template <typename E, typename A>
constexpr bool valid_field<std::vector<E, A>> = std::is_trivially_copyable_v<E> && !message<E>;

struct schema_builder {
    uint64_t hash = 0xcbf29ce484222325ull; // FNV-1a
    size_t fixed = 0;
    void mix(uint64_t v) noexcept {
        for (int i = 0; i < 8; ++i) {
            hash ^= (v >> (8 * i)) & 0xff;
            hash *= 0x100000001b3ull;
        }
    }
};

template <typename T> void describe(schema_builder& b);

template <typename F> void describe_field(schema_builder& b) {
    static_assert(valid_field<F>,
                  "an RPC message field must be a trivially copyable value, std::string, "
                  "rpc::bytes, std::vector of trivially copyable values, or a message");
    if constexpr (message<F>) {
        b.mix('N');
        describe<F>(b);
        b.mix('E');
    } else if constexpr (std::is_same_v<F, std::string>) {
        b.mix('T'), b.fixed += 4;
    } else if constexpr (std::is_same_v<F, bytes>) {
        b.mix('B'), b.fixed += 4;
    } else if constexpr (vector_of<F>::value) {
        b.mix('V'), b.mix(sizeof(typename vector_of<F>::elem)), b.fixed += 4;
    } else {
        b.mix('S'), b.mix(sizeof(F)), b.fixed += sizeof(F);
    }
}

template <typename T> void describe(schema_builder& b) {
    static_assert(message<T>, "an RPC message lists its fields with GLUON_RPC_FIELDS");
    if constexpr (requires { T::rpc_version; }) b.mix(uint64_t(T::rpc_version) << 8 | 'R');
    T t{};
    t.rpc_fields([&](auto&... f) { (describe_field<std::remove_cvref_t<decltype(f)>>(b), ...); });
}

// Per thread: a function-local static would take the C++ runtime's lock, which enters the kernel
// through libc when two vCPUs first describe a type at once (common/lazy.h).
template <typename T> const schema_builder& schema_of() {
    thread_local const schema_builder s = [] {
        schema_builder b;
        describe<T>(b);
        return b;
    }();
    return s;
}

/// Writes a message's fixed part to `fixed` and its variable parts' iovecs to `var`; returns
/// the variable bytes.
struct encoder {
    uint8_t* fixed;
    iov_list& var;
    size_t var_bytes = 0;

    void put_len(size_t n, const void* p) {
        uint32_t l = static_cast<uint32_t>(n);
        std::memcpy(fixed, &l, 4);
        fixed += 4;
        var.push(p, n);
        var_bytes += n;
    }
    template <typename F> void field(const F& f) {
        if constexpr (message<F>) {
            f.rpc_fields([&](const auto&... g) { (field(g), ...); });
        } else if constexpr (std::is_same_v<F, std::string>) {
            put_len(f.size(), f.data());
        } else if constexpr (std::is_same_v<F, bytes>) {
            put_len(f.size(), f.data());
        } else if constexpr (vector_of<F>::value) {
            put_len(f.size() * sizeof(typename vector_of<F>::elem), f.data());
        } else {
            std::memcpy(fixed, &f, sizeof(F));
            fixed += sizeof(F);
        }
    }
};

// Room for `need` elements of a value of `len` elements that arrives piece by piece: from
// min(len, 64 KiB) up, doubling, up to len (a string's reserve may round that up to twice its
// capacity: still within twice what came).
template <typename C> void reserve_received(C& c, size_t need, size_t len, size_t unit) {
    if (need <= c.capacity()) return;
    size_t first = std::max<size_t>(bytes::k_first_bytes / unit, 1);
    c.reserve(std::min(len, std::max({need, 2 * c.capacity(), first})));
}
inline void append_string(void* f, const uint8_t* p, size_t n, size_t len) {
    auto& s = *static_cast<std::string*>(f);
    reserve_received(s, s.size() + n, len, 1);
    s.append(reinterpret_cast<const char*>(p), n);
}
template <typename V> void append_vector(void* f, const uint8_t* p, size_t n, size_t len) {
    using E = typename vector_of<V>::elem;
    auto& v = *static_cast<V*>(f);
    size_t at = v.size();
    reserve_received(v, at + n / sizeof(E), len / sizeof(E), sizeof(E));
    v.resize(at + n / sizeof(E)); // zero-fills only what is copied over next: bytes that came
    std::memcpy(static_cast<void*>(v.data() + at), p, n);
}
inline void append_bytes(void* f, const uint8_t* p, size_t n, size_t len) {
    static_cast<bytes*>(f)->append_received(p, n, len);
}

/// Reads a message's fixed part and lists where its variable parts' bytes go (`targets`, in
/// wire order): a receive buffer, or the field itself, emptied, to grow as they arrive.
/// `var_left` is the frame's byte count after the fixed part: the lengths must add up to
/// exactly that, or the frame is malformed.
struct decoder {
    const uint8_t* fixed;
    size_t var_left;
    rx_list& targets;
    errc err{};

    bool take_len(size_t& n, size_t unit = 1) {
        uint32_t l;
        std::memcpy(&l, fixed, 4);
        fixed += 4;
        if (l > var_left || l % unit != 0) {
            err = errc::malformed_frame;
            return false;
        }
        var_left -= l;
        n = l;
        return true;
    }
    template <typename F> void field(F& f) {
        if (err != errc{}) return;
        size_t n;
        if constexpr (message<F>) {
            f.rpc_fields([&](auto&... g) { (field(g), ...); });
        } else if constexpr (std::is_same_v<F, std::string>) {
            if (!take_len(n)) return;
            f.clear();
            targets.push({.len = n, .field = &f, .append = append_string});
        } else if constexpr (std::is_same_v<F, bytes>) {
            if (!take_len(n)) return;
            uint8_t* p = f.prepare(n);
            if (p) {
                targets.push({.to = p, .len = n});
            } else if (f.receives_into()) {
                err = errc::buffer_too_small;
            } else {
                targets.push({.len = n, .field = &f, .append = append_bytes});
            }
        } else if constexpr (vector_of<F>::value) {
            using E = typename vector_of<F>::elem;
            if (!take_len(n, sizeof(E))) return;
            f.clear();
            targets.push({.len = n, .field = &f, .append = append_vector<F>, .unit = sizeof(E)});
        } else if constexpr (std::is_same_v<F, bool>) {
            f = *fixed++ != 0;
        } else {
            std::memcpy(static_cast<void*>(&f), fixed, sizeof(F));
            fixed += sizeof(F);
        }
    }
};

} // namespace detail

/// A message type's schema hash (field types in order, nesting, rpc_version).
template <typename M> uint32_t schema_hash() {
    uint64_t h = detail::schema_of<M>().hash;
    return static_cast<uint32_t>(h ^ (h >> 32));
}
/// The size of a message type's fixed part on the wire.
template <typename M> size_t fixed_size() {
    return detail::schema_of<M>().fixed;
}

/// Encodes m: its fixed part into `fixed` (fixed_size<M>() bytes) and its variable parts as
/// iovecs appended to `var`, pointing into m. Returns the variable parts' total size.
template <typename M> size_t encode(const M& m, uint8_t* fixed, iov_list& var) {
    detail::encoder e{fixed, var};
    e.field(m);
    return e.var_bytes;
}

/// Decodes the fixed part of a message whose frame has `var_len` bytes after it into m,
/// appending where its variable parts' bytes go to `targets` (m's variable fields are empty
/// until those bytes are given to them: nothing is allocated for bytes not yet received).
/// Errors: errc::malformed_frame (lengths that do not add up to var_len),
/// errc::buffer_too_small.
template <typename M>
std::error_code decode_fixed(const uint8_t* fixed, size_t var_len, M& m, rx_list& targets) {
    detail::decoder d{fixed, var_len, targets};
    d.field(m);
    if (d.err == errc{} && d.var_left != 0) d.err = errc::malformed_frame;
    return d.err == errc{} ? std::error_code{} : make_error_code(d.err);
}

/// Decodes a whole message from one buffer (tests, fuzzing, payloads already in memory).
/// Errors: those of decode_fixed.
template <typename M> std::error_code decode(std::span<const uint8_t> payload, M& m) {
    size_t f = fixed_size<M>();
    if (payload.size() < f) return make_error_code(errc::malformed_frame);
    rx_list t;
    if (auto e = decode_fixed(payload.data(), payload.size() - f, m, t)) return e;
    const uint8_t* p = payload.data() + f;
    for (size_t i = 0; i < t.size(); ++i) {
        if (t[i].to)
            std::memcpy(t[i].to, p, t[i].len);
        else
            t[i].append(t[i].field, p, t[i].len, t[i].len);
        p += t[i].len;
    }
    return {};
}

} // namespace gluon::rpc
