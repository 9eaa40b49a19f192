package sampler

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/profd/profd/internal/unwind"
)

// With Config.Unwind, a sample whose walk met code whose frame information has not come
// yet (a file the unwinder is still reading, JIT code that no jitdump record, perf map or
// registered object describes yet) would have its chain cut there, or led astray, by the
// frame pointer the walk falls back on: code built without one keeps data in it. Such a
// sample is held, its leaf count with it, and a Drain walks it on from where it stopped once
// the information is there (unwind.Unwinder.Ready): a JVM's first perf map, a CPython's
// buffered jitdump records, a library's .eh_frame come a second or two after the code first
// runs. A sample held maxHoldWait, or that finds maxHeldBytes of held samples before it,
// is walked as far as it goes; DrainAll walks every held sample so, and RemoveTarget a
// target's.
const (
	maxHoldWait = 10 * time.Second
	// maxHeldBytes bounds the stack copies held: some two thousand samples of deep stacks.
	maxHeldBytes = 32 << 20
	// heldOverhead is what a held sample costs besides its copies.
	heldOverhead = 160
)

// heldSample is a sample whose chain waits at stop for frame information.
type heldSample struct {
	sample
	chain  []byte   // the kernel's callchain up to its user marker: u64 nr, then nr entries
	frames []uint64 // the user frames walked before stop
	stop   unwind.Stop
	stack  []byte    // the copy of the user stack from stop.Regs.SP up
	since  time.Time // when it was first held
}

func (h *heldSample) bytes() int {
	return len(h.chain) + 8*len(h.frames) + len(h.stack) + heldOverhead
}

// hold keeps sample s (its chain's bytes chain, its stack copy us, walked until stop) for a
// later walk, unless maxHeldBytes are held.
func (a *aggregate) hold(smp sample, chain []byte, us userStack, frames []uint64, stop unwind.Stop) bool {
	ne := binary.NativeEndian
	nr := int(ne.Uint64(chain))
	for i := 0; i < nr; i++ {
		if ne.Uint64(chain[8+8*i:]) == callchainUser {
			nr = i + 1 // the user entries are the walk's
			break
		}
	}
	stack := stackFrom(us.stack, us.regs.SP, stop.Regs.SP)
	if a.heldBytes+8+8*nr+8*stop.N+len(stack)+heldOverhead > maxHeldBytes {
		a.heldFull = true
		a.stats.UndescribedChains++
		return false
	}
	s := heldSample{sample: smp}
	s.chain = append(ne.AppendUint64(nil, uint64(nr)), chain[8:8+8*nr]...)
	s.frames = slices.Clone(frames[:stop.N])
	s.stop = stop
	s.stack = slices.Clone(stack)
	s.since = time.Now()
	a.heldBytes += s.bytes()
	a.held = append(a.held, s)
	a.stats.HeldChains++
	return true
}

// stackFrom is the part of stack, a copy from base up, from sp up.
func stackFrom(stack []byte, base, sp uint64) []byte {
	if sp < base || sp-base > uint64(len(stack)) {
		return nil
	}
	return stack[sp-base:]
}

// release walks on the held samples of pid (every pid with all) whose frame information
// came, or that waited maxHoldWait, and counts them; with force, every one of them, as far
// as its walk goes now. A walk that meets more code still to be described further up is held
// again from there.
func (a *aggregate) release(pid uint32, all, force bool) {
	now := time.Now()
	kept := a.held[:0]
	for _, h := range a.held {
		if !all && h.pid != pid {
			kept = append(kept, h)
			continue
		}
		expired := force || now.Sub(h.since) >= maxHoldWait
		if !expired && !a.unwind.Ready(h.pid, h.stop) {
			kept = append(kept, h)
			continue
		}
		a.heldBytes -= h.bytes()
		frames, stop := a.unwind.Unwind(h.pid, h.stop.Regs, h.stack, MaxStackFrames, append(a.frames[:0], h.frames...))
		a.frames = frames
		if !expired && stop.Wait && stop.N > h.stop.N {
			h.stack = slices.Clone(stackFrom(h.stack, h.stop.Regs.SP, stop.Regs.SP))
			h.frames, h.stop = slices.Clone(frames[:stop.N]), stop
			a.heldBytes += h.bytes()
			kept = append(kept, h)
			continue
		}
		if stop.Wait {
			a.stats.UndescribedChains++
		}
		a.count(h.sample, h.chain, frames) // the chain was checked as it came
	}
	clear(a.held[len(kept):])
	a.held = kept
}

// heldSince returns, for each process with samples held, the time of the oldest.
func (a *aggregate) heldSince() map[uint32]int64 {
	var out map[uint32]int64
	for _, h := range a.held {
		if out == nil {
			out = map[uint32]int64{}
		}
		if t, ok := out[h.pid]; !ok || h.timeNs < t {
			out[h.pid] = h.timeNs
		}
	}
	return out
}
