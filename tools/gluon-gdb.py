# gdb commands for gluon fibers, on live processes and core files. Load with
#   (gdb) source tools/gluon-gdb.py
#   gluon fibers (or: info gluon-fibers)  every fiber of every vCPU; '*' marks the current ones
#   gluon bt FIBER [BT-OPTIONS]           backtrace of one fiber, by its short index (the '#'
#                                         column of `gluon fibers`) or its id; BT-OPTIONS go to
#                                         `bt` (full, 5...)
#   gluon tasks                           every spawned C++20 task that has not ended: its vCPU,
#                                         what it is suspended in, and the chain of frames from
#                                         the spawned task to the one that waits
# Needs the runtime's debug info. Data: the registry gluon_vcpu_list (src/runtime/vcpu.cc); each
# vcpu has `main`, `current` and the list `all` of its spawned fibers (scheduler.h). A fiber's
# saved context `ctx` {sp, ip, bp} (context.h) is valid while it is not its vCPU's current fiber;
# the current fiber runs (or its vCPU idles in the event loop) on the thread's live stack.
import itertools
import re
import types

import gdb
from gdb.unwinder import Unwinder, register_unwinder

STATES = ("ready", "running", "waiting", "done")


def _vcpus():
    out, v = [], gdb.parse_and_eval("gluon_vcpu_list")
    while int(v) and len(out) < 100000:
        out.append(v.dereference())
        v = v["next_registered"]
    return sorted(out, key=lambda v: int(v["index"]))


def _fibers(v):
    """Yields the fiber_impl* of vCPU v: its main fiber, then its spawned fibers."""
    impl = gdb.lookup_type("gluon::detail::fiber_impl")
    hook_offset = next(f.bitpos for f in impl.fields() if f.name == "all_hook") // 8
    yield v["main"].address
    head = v["all"]["head_"].address
    h = head["next"]
    for _ in range(1000000):
        if int(h) == int(head):
            return
        if not int(h):
            break
        yield gdb.Value(int(h) - hook_offset).cast(impl.pointer())
        h = h["next"]
    raise gdb.MemoryError("the fiber list of vCPU %d is broken" % int(v["index"]))


def _all_fibers():
    """Yields (index, vcpu, fiber_impl*) in `gluon fibers` order; the index is what `gluon bt`
    takes instead of a 13-digit id."""
    n = 0
    for v in _vcpus():
        for f in _fibers(v):
            yield n, v, f
            n += 1


# Ids are larger than this (the vCPU's thread id above the low 32 bits); smaller numbers are
# short indices.
_MAX_INDEX = 1 << 32


def _name(f):
    raw = bytes(gdb.selected_inferior().read_memory(f["name"].address, f["name"].type.sizeof))
    return raw.split(b"\0")[0].decode(errors="replace") or "(unnamed)"


def _thread(v):
    tid = int(v["tid"])
    return next((t for t in gdb.selected_inferior().threads() if t.ptid[1] == tid), None)


def _saved(f):
    return tuple(int(f["ctx"][r]) for r in ("sp", "ip", "bp"))


def _regs(*names):
    frame = gdb.newest_frame()
    return tuple(int(frame.read_register(r)) for r in names)


class _KeepSelection:
    """Restores the selected thread and frame on exit."""

    def __enter__(self):
        self.thread, self.frame = gdb.selected_thread(), None
        try:
            self.frame = gdb.selected_frame()
        except gdb.error:
            pass

    def __exit__(self, *exc):
        if self.thread is not None and self.thread.is_valid():
            self.thread.switch()
            try:
                self.frame.select()
            except (AttributeError, gdb.error):  # gone: the newest frame stays selected
                pass


def list_fibers(arg, from_tty):
    vcpus = _vcpus()
    if not vcpus:
        print("gluon: no vCPU (gluon_vcpu_list is empty)")
        return
    print("  %-5s %-4s %-20s %-16s %-8s %-18s %-18s" % ("#", "vCPU", "fiber-id", "name", "state", "sp", "ip"))
    index = 0
    with _KeepSelection():
        for v in vcpus:
            current, thread = int(v["current"]), _thread(v)
            try:
                for f in _fibers(v):
                    state = int(f["state"])
                    state = STATES[state] if 0 <= state < len(STATES) else str(state)
                    sp, ip, _ = _saved(f)
                    note = ""
                    if int(f) == current:  # the saved context is stale: show the thread's
                        note = "  <- current"
                        if thread is not None:
                            thread.switch()
                            sp, ip = _regs("rsp", "rip")
                            note += ", thread %d (LWP %d)" % (thread.num, thread.ptid[1])
                        if state != "running":
                            note += ", vCPU idle in its event loop"
                    print("%s %-5d %-4d %-20d %-16s %-8s 0x%016x 0x%016x%s" % (
                        "*" if note else " ", index, int(v["index"]), int(f["id"]), _name(f), state,
                        sp, ip, note))
                    index += 1
            except gdb.MemoryError as e:
                print("  vCPU %d: cannot read its fibers: %s" % (int(v["index"]), e))


def _symbol(addr):
    """The function at addr, without its arguments: `info symbol`'s name."""
    try:
        out = gdb.execute("info symbol 0x%x" % addr, to_string=True)
    except gdb.error:
        return "0x%x" % addr
    if out.startswith("No symbol"):
        return "0x%x" % addr
    return out.split(" in section ")[0].strip()


def _short(name):
    """A coroutine's or a cancel hook's symbol, shortened to the function that owns it."""
    for cut in ("::{lambda", " [clone"):
        name = name.split(cut)[0]
    name = name.replace("(anonymous namespace)", "{anonymous}")
    depth, out = 0, ""
    for ch in name:  # drop argument lists and template arguments beyond the first level
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif depth == 0:
            out += ch
    return out


# A coroutine frame, as GCC lays it out: the resume and destroy function pointers, then the
# promise (gluon::task_detail::promise_base first).
_PROMISE_OFFSET = 16


def _chain(frame):
    """The coroutine frames from a spawned task's frame inwards, following promise.awaiting."""
    promise_t = gdb.lookup_type("gluon::task_detail::promise_base").pointer()
    ptr = gdb.lookup_type("long").pointer()
    out = []
    while frame and len(out) < 64:
        resume = int(gdb.Value(frame).cast(ptr).dereference())
        out.append((frame, _short(_symbol(resume)) if resume else "(ended)"))
        if not resume:
            break
        promise = gdb.Value(frame + _PROMISE_OFFSET).cast(promise_t).dereference()
        frame = int(promise["awaiting"]["_M_fr_ptr"])
    return out


def list_tasks(arg, from_tty):
    try:
        s = gdb.parse_and_eval("gluon_task_sched_list")
    except gdb.error:
        print("gluon: this program has no task runner (gluon_task_sched_list not found)")
        return
    root_t = gdb.lookup_type("gluon::task_detail::root_base")
    hook_offset = next(f.bitpos for f in root_t.fields() if f.name == "live_hook") // 8
    print("  %-5s %-4s %-18s %-10s %s" % ("#", "vCPU", "frame", "state", "suspended in / chain of frames"))
    index = 0
    while int(s):
        sched = s.dereference()
        head = sched["live"]["head_"].address
        h = head["next"]
        for _ in range(1000000):
            if int(h) == int(head) or not int(h):
                break
            r = gdb.Value(int(h) - hook_offset).cast(root_t.pointer()).dereference()
            hook = r["ctx"]["hook"]
            state = "suspended" if int(hook) else "ready"  # or suspended where it cannot be cancelled
            what = _short(_symbol(int(hook["fn"]))) if int(hook) else "-"
            chain = _chain(int(r["h"]["_M_fr_ptr"]))
            print("  %-5d %-4d 0x%016x %-10s %s" % (index, int(sched["vcpu_index"]), chain[0][0] if chain else 0,
                                                   state, what))
            for depth, (frame, name) in enumerate(chain):
                print("  %s%s (frame 0x%x)" % ("    " * (depth + 1), name, frame))
            index += 1
            h = h["next"]
        s = sched["next_registered"]


class _FiberUnwinder(Unwinder):
    """When enabled with `target` = ((sp, pc), ctx), the frame with that sp and pc (the thread's
    innermost real frame) returns into the saved context ctx = (sp, ip, bp)."""

    def __init__(self):
        super().__init__("gluon-fiber")
        self.enabled, self.target = False, None

    def __call__(self, pending):
        at, ctx = self.target
        sp, pc = pending.read_register("rsp"), pending.read_register("rip")
        if (int(sp), int(pc)) != at:
            return None
        info = pending.create_unwind_info(types.SimpleNamespace(sp=sp, pc=pc))
        for reg, val in zip(("rsp", "rip", "rbp"), ctx):
            info.add_saved_register(reg, gdb.Value(val).cast(pending.read_register(reg).type))
        return info


class _SkipToFiber:
    """Frame filter: when enabled, `bt` starts at the first frame whose pc is `ip`."""

    def __init__(self):
        self.name, self.priority, self.enabled, self.ip = "gluon-fiber", 100, False, None
        gdb.frame_filters[self.name] = self

    def filter(self, frames):
        return itertools.dropwhile(lambda d: d.inferior_frame().pc() != self.ip, frames)


_unwinder, _filter = _FiberUnwinder(), _SkipToFiber()
register_unwinder(None, _unwinder, replace=True)


def _bt_registers(ctx, bt):
    """Runs `bt` with the selected thread's registers pointed at ctx, then restores them.
    Returns False if the registers are read-only (core files)."""
    saved = _regs("rsp", "rip", "rbp")
    try:
        gdb.execute("set $rsp = %d" % ctx[0], to_string=True)
    except gdb.error:  # "You can't do that without a process to debug."
        return False
    try:
        gdb.execute("set $rip = %d" % ctx[1], to_string=True)
        gdb.execute("set $rbp = %d" % ctx[2], to_string=True)
        gdb.execute(bt)
    finally:
        for reg, val in zip(("rsp", "rip", "rbp"), saved):
            gdb.execute("set $%s = %d" % (reg, val), to_string=True)
    return True


def _bt_unwinder(ctx, bt):
    """Runs `bt` with the thread's innermost frame unwinding into ctx; shows the frames from
    ctx on (they keep the numbers they have below the thread's own innermost frames)."""
    _unwinder.target, _filter.ip = (_regs("rsp", "rip"), ctx), ctx[1]
    _unwinder.enabled = _filter.enabled = True  # off otherwise: plain `bt` stays gdb's own
    gdb.invalidate_cached_frames()
    try:
        out = gdb.execute(bt, to_string=True)
    finally:
        _unwinder.enabled = _filter.enabled = False
        gdb.invalidate_cached_frames()
    if not out:
        raise gdb.GdbError("gluon bt: cannot unwind from the fiber's saved context")
    print(_renumbered(out), end="")


def _renumbered(bt_out):
    """Numbers the frames of a `bt` output from #0 (the filter dropped the thread's own innermost
    frames, so the fiber's first frame came out as #N)."""
    first = re.search(r"^#(\d+)", bt_out, re.M)
    if not first:
        return bt_out
    skip = int(first.group(1))
    def renumber(m):
        n = str(int(m.group(1)) - skip)
        return "#" + n + " " * (len(m.group(1)) - len(n))  # keeps the columns aligned
    return re.sub(r"^#(\d+)", renumber, bt_out, flags=re.M)


def fiber_bt(arg, from_tty):
    argv = gdb.string_to_argv(arg)
    try:
        want = int(argv[0], 0)
    except (IndexError, ValueError):
        raise gdb.GdbError("usage: gluon bt FIBER [BT-OPTIONS] (FIBER: the '#' or the id of gluon fibers)")
    bt = " ".join(["bt"] + argv[1:])
    by_index = 0 <= want < _MAX_INDEX
    found = next(((v, f) for i, v, f in _all_fibers() if (i if by_index else int(f["id"])) == want), None)
    if found is None:
        raise gdb.GdbError("gluon bt: no fiber with %s %d" % ("index" if by_index else "id", want))
    v, f = found
    thread = _thread(v)
    if thread is None:
        raise gdb.GdbError("gluon bt: no thread for vCPU %d" % int(v["index"]))
    with _KeepSelection():
        thread.switch()
        gdb.newest_frame().select()  # registers are written in the selected frame
        if int(f) == int(v["current"]):
            gdb.execute(bt)
            return
        ctx = _saved(f)
        if ctx[1] == int(gdb.parse_and_eval("(long)&gluon_context_trampoline")):
            print("fiber %d has not started yet (it starts in gluon_context_trampoline)" % want)
        elif not _bt_registers(ctx, bt):
            _bt_unwinder(ctx, bt)


class _Command(gdb.Command):
    def __init__(self, name, fn, doc, prefix=False, cls=gdb.COMMAND_STACK):
        self.__doc__, self.fn = doc, fn
        super().__init__(name, cls, prefix=prefix)

    def invoke(self, arg, from_tty):
        self.fn(arg, from_tty)


_Command("gluon", lambda arg, tty: gdb.execute("help gluon"), "gluon fiber commands.", True)
_Command("gluon fibers", list_fibers, "List every fiber of every gluon vCPU ('*': current).")
_Command("gluon bt", fiber_bt, "gluon bt FIBER [BT-OPTIONS]: backtrace of a gluon fiber (FIBER: its # or id).")
_Command("gluon tasks", list_tasks, "List the spawned C++20 tasks that have not ended, with their awaits.")
_Command("info gluon-fibers", list_fibers, "List every fiber of every gluon vCPU.",
         cls=gdb.COMMAND_STATUS)
