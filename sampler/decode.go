package sampler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/profd/profd/internal/unwind"
)

// Perf record types and header bits the ring back end decodes (linux/perf_event.h).
const (
	recordLost        = 2
	recordSample      = 9
	recordLostSamples = 13

	miscCPUModeMask = 7
	miscKernel      = 1

	recordHeaderBytes = 8
	// sampleBodyBytes is a PERF_RECORD_SAMPLE body for sample_type IP|TID|TIME|PERIOD:
	// u64 ip; u32 pid, tid; u64 time; u64 period.
	sampleBodyBytes = 32
)

// ErrBadRecord is wrapped by errors about records that cannot be decoded.
var ErrBadRecord = errors.New("bad perf record")

// Callchain context markers (enum perf_callchain_context): entries at or above
// callchainContextMax are not addresses but say whose frames follow.
const (
	callchainKernel     = ^uint64(128) + 1  // PERF_CONTEXT_KERNEL, -128
	callchainUser       = ^uint64(512) + 1  // PERF_CONTEXT_USER, -512
	callchainContextMax = ^uint64(4095) + 1 // PERF_CONTEXT_MAX, -4095
)

// maxKernelFrames is the most kernel frames a stack keeps.
const maxKernelFrames = 64

// userRegsMask is PERF_SAMPLE_REGS_USER's registers with Config.Unwind: x86-64's BP, SP
// and IP (enum perf_event_x86_regs), which a sample then carries in that order.
const userRegsMask = 1<<6 | 1<<7 | 1<<8

// regsABI64 is PERF_SAMPLE_REGS_ABI_64: the sampled thread ran 64-bit code. A 32-bit
// process's chain is the kernel's: its registers and frame information are another ABI's.
const regsABI64 = 2

// userStack is what a sample carries for Config.Unwind: the user registers (abi 0 when the
// thread had no user context) and the copy of its stack.
type userStack struct {
	abi   uint64
	regs  unwind.Regs
	stack []byte
}

// decodeUserStack decodes PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER at the start of
// b, bounding every size by b.
func decodeUserStack(b []byte) (userStack, error) {
	ne := binary.NativeEndian
	var u userStack
	if len(b) < 8 {
		return u, fmt.Errorf("%w: no user registers in %d bytes", ErrBadRecord, len(b))
	}
	u.abi, b = ne.Uint64(b), b[8:]
	if u.abi != 0 {
		if len(b) < 24 {
			return u, fmt.Errorf("%w: user registers in %d bytes, want 24", ErrBadRecord, len(b))
		}
		u.regs = unwind.Regs{BP: ne.Uint64(b), SP: ne.Uint64(b[8:]), IP: ne.Uint64(b[16:])}
		b = b[24:]
	}
	if len(b) < 8 {
		return u, fmt.Errorf("%w: no user stack size in %d bytes", ErrBadRecord, len(b))
	}
	size, b := ne.Uint64(b), b[8:]
	if size == 0 {
		return u, nil
	}
	if size > uint64(len(b)) || uint64(len(b))-size < 8 {
		return u, fmt.Errorf("%w: user stack of %d bytes in %d", ErrBadRecord, size, len(b))
	}
	dyn := ne.Uint64(b[size:])
	u.stack = b[:min(dyn, size)]
	return u, nil
}

// aggregate turns decoded records into counts. It is not safe for concurrent use.
type aggregate struct {
	counts map[Key]Count
	// stacks: samples carry a callchain (PERF_SAMPLE_CALLCHAIN after PERIOD); kernel: keep
	// the kernel frames of kernel-mode samples, which otherwise only count as Kernel.
	stacks, kernel bool
	// unwind, with stacks: samples also carry user registers and stack, from which it
	// walks the user chain in place of the callchain's.
	unwind *unwind.Unwinder
	// leaves, with stacks and no unwind: samples also carry user registers and the first
	// words at the stack pointer, one of which goes after the leaf where it is the caller
	// the kernel's chain skips (leafcallers.go).
	leaves      *leafCallers
	words       []uint64       // leaves' scratch
	frames      []uint64       // unwind's scratch
	stackIndex  map[string]int // by pid, tid and the callchain's bytes
	stackCounts []StackCount
	key         []byte              // stack's scratch
	targets     map[uint32]struct{} // samples of other pids count as Outside
	// allBut, when not 0, keeps the user-mode samples of every pid but it too
	// (Config.AllProcesses).
	allBut uint32
	stats  Stats
	// held are the samples whose chains wait for frame information (held.go).
	held held
}

func newAggregate() *aggregate {
	return &aggregate{counts: make(map[Key]Count), targets: make(map[uint32]struct{})}
}

// count counts sample s: with stacks, its callchain chain (its bytes: u64 nr then nr
// entries, already bounded by the caller) or, when unwound is not nil, the user frames
// unwound in place of the chain's; then by its leaf.
func (a *aggregate) count(s sample, chain []byte, unwound []uint64) error {
	if a.stacks && (!s.kernelMode || a.kernel) {
		if err := a.stack(s.pid, s.tid, s.timeNs, chain, s.kernelMode, unwound); err != nil {
			return err
		}
	}
	a.countLeaf(s)
	return nil
}

// release walks on the held samples of pid (every pid with all) whose frame information
// came, or that waited maxHoldWait, every one with force, and counts them (held.release).
func (a *aggregate) release(pid uint32, all, force bool) {
	a.frames = a.held.release(a.unwind, pid, all, force, a.frames,
		func(s sample, chain []byte, frames []uint64, undescribed bool) {
			if undescribed {
				a.stats.UndescribedChains++
			}
			a.count(s, chain, frames) // the chain was checked as it came
		})
}

// countLeaf counts s by its leaf, or as Kernel.
func (a *aggregate) countLeaf(s sample) {
	if s.kernelMode {
		a.stats.Kernel++
		return
	}
	addCount(a.counts, Key{PID: s.pid, IP: s.ip}, 1, s.timeNs, s.timeNs)
	a.stats.Samples++
}

// take hands over what was aggregated and starts afresh; stats and targets stay. The held
// samples whose frame information came are walked first, every one with all.
func (a *aggregate) take(all bool) Drained {
	if len(a.held.samples) > 0 {
		a.release(0, true, all)
	}
	d := Drained{Counts: a.counts, Stacks: a.stackCounts, Held: a.held.since()}
	if a.leaves != nil {
		d.Undescribed = a.leaves.takeWaiting()
	}
	a.counts = make(map[Key]Count, len(d.Counts))
	a.stackCounts = nil
	clear(a.stackIndex)
	return d
}

// stack counts a sample of pid, tid at timeNs with the callchain chain (its bytes: u64 nr
// then nr entries, already bounded by the caller) and, when unwound is not nil, the user
// frames unwound in place of the chain's.
func (a *aggregate) stack(pid, tid uint32, timeNs int64, chain []byte, kernelMode bool, unwound []uint64) error {
	ne := binary.NativeEndian
	nr := int(ne.Uint64(chain))
	ips := chain[8 : 8+8*nr]
	// The key: pid, tid, then the entries (a map lookup by string(b) does not allocate).
	// Unwound, the user frames are the unwinder's, not the kernel's walk by frame pointers
	// (through code without them, a different stray address at each sample), but past
	// where the copy of the stack ends (spliced).
	k := ne.AppendUint32(ne.AppendUint32(a.key[:0], pid), tid)
	if unwound == nil {
		k = append(k, ips...)
	} else {
		for i := 0; i < nr && ne.Uint64(ips[8*i:]) != callchainUser; i++ {
			k = append(k, ips[8*i:8*i+8]...)
		}
		k = ne.AppendUint64(k, callchainUser)
		for _, ip := range unwound {
			k = ne.AppendUint64(k, ip)
		}
	}
	a.key = k
	if i, ok := a.stackIndex[string(k)]; ok {
		a.stackCounts[i].add(1, timeNs, timeNs)
		return nil
	}
	st := StackCount{PID: pid, TID: tid}
	user := false
	for i := 0; i < nr; i++ {
		ip := ne.Uint64(ips[8*i:])
		switch {
		case ip == callchainUser:
			user = true
		case ip == callchainKernel:
			user = false
		case ip >= callchainContextMax: // guest contexts: not profd's
			user = false
		case user && unwound != nil:
		case user && len(st.User) < MaxStackFrames:
			st.User = append(st.User, ip)
		case user:
			st.Truncated = true
		case !kernelMode || !a.kernel:
		case len(st.Kernel) < maxKernelFrames:
			st.Kernel = append(st.Kernel, ip)
		default:
			st.Truncated = true
		}
	}
	if unwound != nil {
		st.User = slices.Clone(unwound)
		st.Truncated = len(unwound) >= MaxStackFrames
	}
	if len(st.User) == 0 && len(st.Kernel) == 0 {
		return fmt.Errorf("%w: callchain of %d entries has no frame", ErrBadRecord, nr)
	}
	// The kernel stops at MaxStackFrames (its perf_event_max_stack) frames, kernel and user
	// together: a chain that long was most likely cut.
	if frames := countFrames(ips, nr); unwound == nil && frames >= MaxStackFrames {
		st.Truncated = true
	}
	st.add(1, timeNs, timeNs)
	if a.stackIndex == nil {
		a.stackIndex = map[string]int{}
	}
	a.stackIndex[string(k)] = len(a.stackCounts)
	a.stackCounts = append(a.stackCounts, st)
	return nil
}

// record decodes one record body (the bytes after its 8-byte header).
func (a *aggregate) record(typ uint32, misc uint16, body []byte) error {
	ne := binary.NativeEndian
	switch typ {
	case recordSample:
		if len(body) < sampleBodyBytes {
			return fmt.Errorf("%w: sample body is %d bytes, want %d", ErrBadRecord, len(body), sampleBodyBytes)
		}
		pid := ne.Uint32(body[8:])
		kernelMode := misc&miscCPUModeMask == miscKernel
		if !a.counted(pid, kernelMode) {
			a.stats.Outside++
			return nil
		}
		ip := ne.Uint64(body)
		timeNs := int64(ne.Uint64(body[16:]))
		if a.stacks {
			return a.stackSample(sample{pid: pid, tid: ne.Uint32(body[12:]), timeNs: timeNs, ip: ip, kernelMode: kernelMode}, body)
		}
		// countLeaf, written out: the ring back end's hottest path.
		if kernelMode {
			a.stats.Kernel++
			return nil
		}
		addCount(a.counts, Key{PID: pid, IP: ip}, 1, timeNs, timeNs)
		a.stats.Samples++
	case recordLost:
		if len(body) < 16 {
			return fmt.Errorf("%w: lost record body is %d bytes, want 16", ErrBadRecord, len(body))
		}
		a.stats.Lost += ne.Uint64(body[8:])
	case recordLostSamples:
		if len(body) < 8 {
			return fmt.Errorf("%w: lost-samples record body is %d bytes, want 8", ErrBadRecord, len(body))
		}
		a.stats.Lost += ne.Uint64(body)
	}
	return nil
}

// stackSample counts sample s, whose record's body is body, with its callchain and, with
// unwind, its user chain walked from the registers and stack copy that follow; or holds it
// until its walk can go on (held.go).
func (a *aggregate) stackSample(s sample, body []byte) error {
	ne := binary.NativeEndian
	rest := body[sampleBodyBytes:]
	if len(rest) < 8 {
		return fmt.Errorf("%w: sample body is %d bytes, want a callchain after %d", ErrBadRecord, len(body), sampleBodyBytes)
	}
	nr := ne.Uint64(rest)
	if nr == 0 || nr > uint64(len(rest)-8)/8 {
		return fmt.Errorf("%w: callchain of %d entries in %d bytes", ErrBadRecord, nr, len(rest)-8)
	}
	chain := rest[:8+8*nr]
	var unwound []uint64
	if a.leaves != nil {
		us, err := decodeUserStack(rest[8+8*nr:])
		if err != nil {
			return err
		}
		if a.words = stackWords(us, a.words); len(a.words) > 0 && !s.kernelMode {
			if unwound = a.leaves.withWordAtSP(s.pid, chain, a.words, a.frames); unwound != nil {
				a.frames = unwound
			}
		}
	}
	if a.unwind != nil {
		us, err := decodeUserStack(rest[8+8*nr:])
		if err != nil {
			return err
		}
		if us.abi == regsABI64 {
			frames, stop := a.unwind.Unwind(s.pid, us.regs, us.stack, MaxStackFrames, a.frames[:0])
			a.frames = frames
			if stop.Wait && (!s.kernelMode || a.kernel) {
				if a.held.hold(s, chain[8:], us.stack, us.regs.SP, frames, stop) {
					a.stats.HeldChains++
					return nil // counted as it is let go
				}
				a.stats.UndescribedChains++
			}
			if stop.Cut {
				frames = spliced(frames, chain)
				a.frames = frames
			}
			unwound = frames
		}
	}
	return a.count(s, chain, unwound)
}

// counted reports whether a sample of pid is counted: pid is a target, or allBut asks for
// every other process's user-mode samples (profile.c's is_target).
func (a *aggregate) counted(pid uint32, kernelMode bool) bool {
	if _, ok := a.targets[pid]; ok {
		return true
	}
	return a.allBut != 0 && !kernelMode && pid != a.allBut && pid != 0
}

// countFrames is the number of frames (entries that are not context markers) of a callchain.
func countFrames(ips []byte, nr int) int {
	n := 0
	for i := 0; i < nr; i++ {
		if binary.NativeEndian.Uint64(ips[8*i:]) < callchainContextMax {
			n++
		}
	}
	return n
}
