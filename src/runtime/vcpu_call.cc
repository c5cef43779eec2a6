#include "gluon/runtime/vcpu_call.h"

#include <cstddef>
#include <new>

#include "gluon/common/misuse.h"
#include "scheduler.h"

namespace gluon {
using namespace detail;

static_assert(sizeof(remote_node) <= sizeof(vcpu_call::node_));
static_assert(alignof(remote_node) <= alignof(void*));

result<void> post_call(vcpu_handle v, vcpu_call& c) noexcept {
    if (!v) return errno_error(EINVAL);
    auto* n = new (c.node_) remote_node;
    n->run = [](vcpu*, remote_node* self) {
        auto* call = reinterpret_cast<vcpu_call*>(reinterpret_cast<char*>(self) - offsetof(vcpu_call, node_));
        call->fn(call);
    };
    post_remote(v.get(), n);
    return {};
}

static_assert(sizeof(timer_node) <= 3 * sizeof(int64_t));

namespace {
timer_node* node_of(unsigned char* storage) noexcept { return std::launder(reinterpret_cast<timer_node*>(storage)); }
}  // namespace

result<void> vcpu_timer::arm(deadline_t deadline, fn_t fn) noexcept {
    vcpu* v = cur_vcpu();
    if (!v) return errno_error(EPERM);
    disarm();
    // The node is made here, not in the constructor: most timers are never armed (every engine
    // operation of a task has one, for its timeout).
    timer_node* node = new (node_) timer_node;
    node->deadline = deadline;
    node->fire = [](timer_node* t) {
        auto* self = reinterpret_cast<vcpu_timer*>(reinterpret_cast<char*>(t) - offsetof(vcpu_timer, node_));
        self->armed_ = false;
        self->fn_(self);
    };
    fn_ = fn;
    owner_ = v;
    armed_ = true;
    v->timers.insert(node);
    return {};
}

void vcpu_timer::disarm_slow() noexcept {
    auto* v = static_cast<vcpu*>(owner_);
    if (v != cur_vcpu()) {
        report_misuse("vcpu_timer disarmed on another thread than the vCPU that armed it");
        return;
    }
    v->timers.remove(node_of(node_));
    armed_ = false;
}

}  // namespace gluon
