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
// target's. The aggregate holds them (held) and counts them as they are let go.
const (
	maxHoldWait = 10 * time.Second
	// maxHeldBytes bounds the stack copies held: some two thousand samples of deep stacks.
	maxHeldBytes = 32 << 20
	// heldOverhead is what a held sample costs besides its copies.
	heldOverhead = 160
)

// sample is one sample record's own fields.
type sample struct {
	pid, tid   uint32
	timeNs     int64
	ip         uint64
	kernelMode bool
}

// heldSample is a sample whose chain waits at stop for frame information.
type heldSample struct {
	sample
	chain  []byte   // the kernel's callchain: nr, entries (its user part for spliced)
	frames []uint64 // the user frames walked before stop
	stop   unwind.Stop
	stack  []byte    // the copy of the user stack from stop.Regs.SP up
	since  time.Time // when it was first held
}

func (h *heldSample) bytes() int {
	return len(h.chain) + 8*len(h.frames) + len(h.stack) + heldOverhead
}

// held are the samples whose chains wait, and what their copies take.
type held struct {
	samples []heldSample
	bytes   int
	full    bool // a sample found maxHeldBytes held
}

// hold keeps sample s (its callchain's entries; its stack copy stack, taken at base,
// walked until stop after frames) for a later walk, unless maxHeldBytes are held.
func (h *held) hold(s sample, entries, stack []byte, base uint64, frames []uint64, stop unwind.Stop) bool {
	stack = stackFrom(stack, base, stop.Regs.SP)
	if h.bytes+8+len(entries)+8*stop.N+len(stack)+heldOverhead > maxHeldBytes {
		h.full = true
		return false
	}
	hs := heldSample{sample: s, stop: stop, since: time.Now()}
	hs.chain = binary.NativeEndian.AppendUint64(make([]byte, 0, 8+len(entries)), uint64(len(entries)/8))
	hs.chain = append(hs.chain, entries...)
	hs.frames = slices.Clone(frames[:stop.N])
	hs.stack = slices.Clone(stack)
	h.bytes += hs.bytes()
	h.samples = append(h.samples, hs)
	return true
}

// stackFrom is the part of stack, a copy from base up, from sp up.
func stackFrom(stack []byte, base, sp uint64) []byte {
	if sp < base || sp-base > uint64(len(stack)) {
		return nil
	}
	return stack[sp-base:]
}

// release walks on, by u, the held samples of pid (every pid with all) whose frame
// information came, or that waited maxHoldWait; with force, every one of them, as far as
// its walk goes now. A walk that meets more code still to be described further up is held
// again from there. Each sample walked is handed to count with its chain, its user frames,
// and whether its walk went on through code not described; frames is scratch for the walks,
// returned for the next.
func (h *held) release(u *unwind.Unwinder, pid uint32, all, force bool, frames []uint64,
	count func(s sample, chain []byte, frames []uint64, undescribed bool)) []uint64 {
	now := time.Now()
	kept := h.samples[:0]
	for _, hs := range h.samples {
		if !all && hs.pid != pid {
			kept = append(kept, hs)
			continue
		}
		expired := force || now.Sub(hs.since) >= maxHoldWait
		if !expired && !u.Ready(hs.pid, hs.stop) {
			kept = append(kept, hs)
			continue
		}
		h.bytes -= hs.bytes()
		var stop unwind.Stop
		frames, stop = u.Unwind(hs.pid, hs.stop.Regs, hs.stack, MaxStackFrames, append(frames[:0], hs.frames...))
		if !expired && stop.Wait && stop.N > hs.stop.N {
			hs.stack = slices.Clone(stackFrom(hs.stack, hs.stop.Regs.SP, stop.Regs.SP))
			hs.frames, hs.stop = slices.Clone(frames[:stop.N]), stop
			h.bytes += hs.bytes()
			kept = append(kept, hs)
			continue
		}
		if stop.Cut {
			frames = spliced(frames, hs.chain)
		}
		count(hs.sample, hs.chain, frames, stop.Wait)
	}
	clear(h.samples[len(kept):])
	h.samples = kept
	return frames
}

// since returns, for each process with samples held, the time of the oldest.
func (h *held) since() map[uint32]int64 {
	var out map[uint32]int64
	for _, hs := range h.samples {
		if out == nil {
			out = map[uint32]int64{}
		}
		if t, ok := out[hs.pid]; !ok || hs.timeNs < t {
			out[hs.pid] = hs.timeNs
		}
	}
	return out
}
