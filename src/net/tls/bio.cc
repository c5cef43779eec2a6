// A BIO that never blocks: OpenSSL reads ciphertext the stream has already received and appends
// what it wants sent to a buffer. All socket I/O happens in stream.cc between SSL_* calls, so no
// SSL_* call ever parks a fiber (see docs/adr/0007-tls-on-openssl.md).
#include <openssl/bio.h>

#include <climits>
#include <cstring>

#include "gluon/common/lazy.h"
#include "internal.h"

namespace gluon::net::tls::detail {
namespace {

io_buffers* buffers(BIO* b) {
    return static_cast<io_buffers*>(BIO_get_data(b));
}

int bio_read(BIO* b, char* out, int len) {
    BIO_clear_retry_flags(b);
    io_buffers* io = buffers(b);
    if (len <= 0) return 0;
    size_t avail = io->in_available();
    if (avail == 0) {
        if (io->in_eof) return 0;  // OpenSSL reports this as an unexpected EOF
        BIO_set_retry_read(b);    // SSL_* returns SSL_ERROR_WANT_READ; stream.cc fills `in`
        return -1;
    }
    size_t n = avail < static_cast<size_t>(len) ? avail : static_cast<size_t>(len);
    std::memcpy(out, io->in.get() + io->in_begin, n);
    io->in_begin += n;
    return static_cast<int>(n);
}

// Always accepts everything: callers bound what one SSL_* call can produce (send_some writes
// at most 64 KiB of plaintext per call), and stream.cc sends `out` after every call.
int bio_write(BIO* b, const char* in, int len) {
    BIO_clear_retry_flags(b);
    if (len <= 0) return 0;
    buffers(b)->out.append(in, static_cast<size_t>(len));
    return len;
}

long bio_ctrl(BIO* b, int cmd, long, void*) {
    io_buffers* io = buffers(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;  // the stream flushes after each SSL_* call
    case BIO_CTRL_PENDING:
        return static_cast<long>(io->in_available());
    case BIO_CTRL_WPENDING:
        return static_cast<long>(io->out.size());
    case BIO_CTRL_EOF:
        return io->in_eof && io->in_available() == 0;
    default:
        return 0;  // no kTLS, no socket options: OpenSSL treats 0 as "not supported"
    }
}

int bio_create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
}

// The buffers belong to the stream; nothing to free.
int bio_destroy(BIO*) {
    return 1;
}

BIO_METHOD* make_method() {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gluon tls buffers");
    if (!m) return nullptr;
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    return m;
}

// Made once and kept for the life of the process (BIOs may be freed during exit); of two threads
// that race to make it, the loser frees its own.
struct method_holder {
    BIO_METHOD* m = make_method();
    method_holder() = default;
    method_holder(const method_holder&) = delete;
    method_holder& operator=(const method_holder&) = delete;
    ~method_holder() { BIO_meth_free(m); }
};
constinit lazy_ptr<method_holder> g_method;  // not a function-local static: common/lazy.h says why

}  // namespace

BIO* new_buffer_bio(io_buffers* io) noexcept {
    BIO_METHOD* const method = g_method.get([] { return new method_holder; }).m;
    if (!method) return nullptr;
    BIO* b = BIO_new(method);
    if (b) BIO_set_data(b, io);
    return b;
}

}  // namespace gluon::net::tls::detail
