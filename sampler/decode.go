package sampler

import (
	"encoding/binary"
	"errors"
	"fmt"
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

// aggregate turns decoded records into counts. It is not safe for concurrent use.
type aggregate struct {
	counts map[Key]Count
	// stacks: samples carry a callchain (PERF_SAMPLE_CALLCHAIN after PERIOD); kernel: keep
	// the kernel frames of kernel-mode samples, which otherwise only count as Kernel.
	stacks, kernel bool
	stackIndex     map[string]int // by pid, tid and the callchain's bytes
	stackCounts    []StackCount
	key            []byte              // stack's scratch
	targets        map[uint32]struct{} // samples of other pids count as Outside
	stats          Stats
}

func newAggregate() *aggregate {
	return &aggregate{counts: make(map[Key]Count), targets: make(map[uint32]struct{})}
}

// take hands over what was aggregated and starts afresh; stats and targets stay.
func (a *aggregate) take() Drained {
	d := Drained{Counts: a.counts, Stacks: a.stackCounts}
	a.counts = make(map[Key]Count, len(d.Counts))
	a.stackCounts = nil
	clear(a.stackIndex)
	return d
}

// stack counts a sample of pid, tid at timeNs with the callchain chain (its bytes: u64 nr
// then nr entries, already bounded by the caller).
func (a *aggregate) stack(pid, tid uint32, timeNs int64, chain []byte, kernelMode bool) error {
	ne := binary.NativeEndian
	nr := int(ne.Uint64(chain))
	ips := chain[8 : 8+8*nr]
	// The key: pid, tid, then the entries (a map lookup by string(b) does not allocate).
	k := ne.AppendUint32(ne.AppendUint32(a.key[:0], pid), tid)
	k = append(k, ips...)
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
	if len(st.User) == 0 && len(st.Kernel) == 0 {
		return fmt.Errorf("%w: callchain of %d entries has no frame", ErrBadRecord, nr)
	}
	// The kernel stops at MaxStackFrames (its perf_event_max_stack) frames, kernel and user
	// together: a chain that long was most likely cut.
	if frames := countFrames(ips, nr); frames >= MaxStackFrames {
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
		if _, ok := a.targets[pid]; !ok {
			a.stats.Outside++
			return nil
		}
		kernelMode := misc&miscCPUModeMask == miscKernel
		ip := ne.Uint64(body)
		timeNs := int64(ne.Uint64(body[16:]))
		if a.stacks {
			rest := body[sampleBodyBytes:]
			if len(rest) < 8 {
				return fmt.Errorf("%w: sample body is %d bytes, want a callchain after %d", ErrBadRecord, len(body), sampleBodyBytes)
			}
			if nr := ne.Uint64(rest); nr == 0 || nr > uint64(len(rest)-8)/8 {
				return fmt.Errorf("%w: callchain of %d entries in %d bytes", ErrBadRecord, nr, len(rest)-8)
			}
			if !kernelMode || a.kernel {
				if err := a.stack(pid, ne.Uint32(body[12:]), timeNs, rest, kernelMode); err != nil {
					return err
				}
			}
		}
		if kernelMode {
			a.stats.Kernel++
			return nil
		}
		k := Key{PID: pid, IP: ip}
		addCount(a.counts, k, 1, timeNs, timeNs)
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
