#include "gluon/runtime/vcpu_call.h"

#include <atomic>
#include <cstddef>
#include <new>

#include "gluon/common/misuse.h"
#include "gluon/sys/proc.h"
#include "scheduler.h"

namespace gluon {
using namespace detail;

static_assert(sizeof(remote_node) <= sizeof(vcpu_call::node_));
static_assert(alignof(remote_node) <= alignof(void*));

namespace {
remote_node* call_node(vcpu_call& c) noexcept {
    auto* n = new (c.node_) remote_node;
    n->run = [](vcpu*, remote_node* self) {
        auto* call = reinterpret_cast<vcpu_call*>(reinterpret_cast<char*>(self) - offsetof(vcpu_call, node_));
        call->fn(call);
    };
    return n;
}
}  // namespace

result<void> post_call(vcpu_handle v, vcpu_call& c) noexcept {
    if (!v) return errno_error(EINVAL);
    post_remote(v.get(), call_node(c));
    return {};
}

result<void> post_call_if_alive(vcpu_handle v, vcpu_call& c) noexcept {
    if (!v) return errno_error(EINVAL);
    if (!post_remote_if_alive(v.get(), call_node(c))) return errno_error(ESRCH);
    return {};
}

static_assert(sizeof(timer_node) <= 3 * sizeof(int64_t));

namespace {
timer_node* node_of(unsigned char* storage) noexcept { return std::launder(reinterpret_cast<timer_node*>(storage)); }
}  // namespace

namespace detail {
namespace {
struct timer_removal {
    remote_node node;  // first: run() gets its address
    timer_node* timer = nullptr;
    std::atomic<bool> done{false};
};

void remove_posted_timer(vcpu* v, remote_node* n) {
    auto* r = reinterpret_cast<timer_removal*>(n);
    // Not held: it fired (its callback has run) or another vCPU has v's address now.
    if (v->timers.holds(r->timer)) v->timers.remove(r->timer);
    r->done.store(true, std::memory_order_release);  // r is the waiter's: not touched after
}
}  // namespace

void remove_timer_on(vcpu* v, timer_node* t) noexcept {
    timer_removal r;
    r.node.run = remove_posted_timer;
    r.timer = t;
    if (!post_remote_if_alive(v, &r.node)) return;
    // Spun, not parked: the caller may be any thread, or a callback in another vCPU's event
    // loop, which cannot park. v's event loop runs the removal at its next pass.
    while (!r.done.load(std::memory_order_acquire)) (void)sys::sched_yield();
}

void run_timer_removals(vcpu* v) noexcept {
    for (remote_node* n = v->remote.take_all(); n;) {
        remote_node* next = n->next;
        if (n->run == remove_posted_timer) n->run(v, n);
        n = next;
    }
}
}  // namespace detail

result<void> vcpu_timer::arm(deadline_t deadline, fn_t fn) noexcept {
    vcpu* v = cur_vcpu();
    if (!v) return errno_error(EPERM);
    if (armed_ && owner_ != v) {
        // Moved here, it would sit in two vCPUs' heaps, which their threads change unlocked.
        report_misuse("vcpu_timer armed on a vCPU while it is armed on another");
        return errno_error(EXDEV);
    }
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
        // Left in v's heap, it would fire there after its destructor (this is one) had run.
        remove_timer_on(v, node_of(node_));
        armed_ = false;
        return;
    }
    v->timers.remove(node_of(node_));
    armed_ = false;
}

}  // namespace gluon
