package bpf

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// Stack flags, as profile.c's STACK_* bits.
const (
	stackKernelMode = 1
	stackTruncated  = 2
	stackSlotShift  = 3 // four bits a word: which word at the stack pointer each of Words is
	stackSlotMask   = 15
)

// WordSlots is how many words at the stack pointer the program looks in for a return
// address (profile.c's WORD_SLOTS), and WordCandidates the most of them a sample keeps
// (WORD_CANDIDATES).
const (
	WordSlots      = 16
	WordCandidates = 3
)

// stackBatchEntries is how many stacks one BPF_MAP_LOOKUP_BATCH reads (1.5 KiB a key).
const stackBatchEntries = 256

// DefaultStackEntries is the capacity of the stack counts map, in distinct (thread, call
// chain) keys between two drains (1.6 KiB each, allocated as keys arrive; a drain comes at
// least every second, when 1000 samples a second per CPU make at most as many keys);
// samples of new keys past it are dropped and counted.
const DefaultStackEntries = 1 << 14

// Stack is one key of the stack counts: a thread, its name, and a call chain. User and
// Kernel are leaf first; they and Words point into a buffer reused from call to call.
type Stack struct {
	Tgid, Tid    uint32
	Comm         string
	User, Kernel []uint64
	// KernelMode: the sample was taken in kernel mode (with Config.KernelStacks).
	KernelMode bool
	// Truncated: a chain filled all the frames the program keeps, and was most likely cut.
	Truncated bool
	// Words are words at the stack pointer that may be return addresses, nearest the stack
	// pointer first (WordCandidates at most), and WordSlots which word each is (0 the one it
	// pointed at). The sampled function's caller's return address is one of them where the
	// function had not set the frame pointer and its return address lies in the first
	// WordSlots words (the file's frame information, or Go's table, tells which; see
	// SetGoText); the kernel's walk by frame pointers skips that caller.
	Words     []uint64
	WordSlots [WordCandidates]uint8
}

// stack decodes k.
func (k *profileStackKey) stack() Stack {
	comm := make([]byte, 0, len(k.Comm))
	for _, c := range k.Comm {
		if c == 0 {
			break
		}
		comm = append(comm, byte(c))
	}
	s := Stack{Tgid: k.Tgid, Tid: k.Tid, Comm: string(bytes.ToValidUTF8(comm, []byte("?"))),
		User: k.User[:min(int(k.Nuser), len(k.User))], Kernel: k.Kernel[:min(int(k.Nkernel), len(k.Kernel))],
		KernelMode: k.Flags&stackKernelMode != 0, Truncated: k.Flags&stackTruncated != 0}
	n := 0
	for n < len(k.Words) && k.Words[n] != 0 {
		s.WordSlots[n] = uint8(k.Flags>>(stackSlotShift+4*n)) & stackSlotMask
		n++
	}
	if len(s.User) > 0 {
		s.Words = k.Words[:n]
	}
	return s
}

// newStackMap installs an empty stack counts map (the spare the last drain emptied, else a
// new one), returning the one it replaced (nil at the first install). The update returns
// after an RCU grace period: no program run still writes to the old map.
func (p *Program) newStackMap() (*ebpf.Map, error) {
	m := p.stackSpare
	p.stackSpare = nil
	if m == nil {
		var err error
		if m, err = ebpf.NewMap(p.stackSpec); err != nil {
			return nil, fmt.Errorf("bpf: create stack counts map: %w", err)
		}
	}
	if err := p.objs.StackCounts.Update(uint32(0), uint32(m.FD()), ebpf.UpdateAny); err != nil {
		m.Close()
		return nil, fmt.Errorf("bpf: install stack counts map: %w", err)
	}
	old := p.stackMap
	p.stackMap = m
	return old, nil
}

// DrainStacks hands every stack counted since the previous DrainStacks to fn, once, as
// Drain does the counts (an empty map installed, the old one read). The old map is read
// and emptied in one pass where the kernel can (BPF_MAP_LOOKUP_AND_DELETE_BATCH), and kept
// as the next empty one: making a map costs more than the few keys of a drain. Without
// Config.Stacks there are none.
func (p *Program) DrainStacks(fn func(s Stack, c Count)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("bpf: drain stacks: %w", os.ErrClosed)
	}
	if !p.stacks {
		return nil
	}
	old, err := p.newStackMap()
	if err != nil {
		return fmt.Errorf("bpf: drain stacks: %w", err)
	}
	if old == nil {
		return nil
	}
	if p.stackKeys == nil {
		p.stackKeys = make([]profileStackKey, stackBatchEntries)
		p.stackVals = make([]Count, stackBatchEntries)
	}
	var cursor ebpf.MapBatchCursor
	for {
		n, err := old.BatchLookupAndDelete(&cursor, p.stackKeys, p.stackVals, nil)
		for i := 0; i < n; i++ {
			fn(p.stackKeys[i].stack(), p.stackVals[i])
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, ebpf.ErrKeyNotExist):
			p.stackSpare = old // read to its end, and emptied
			return nil
		case errors.Is(err, ebpf.ErrNotSupported) && n == 0:
			defer old.Close()
			it := old.Iterate()
			for it.Next(&p.stackKeys[0], &p.stackVals[0]) {
				fn(p.stackKeys[0].stack(), p.stackVals[0])
			}
			return it.Err()
		default:
			old.Close()
			return fmt.Errorf("bpf: drain stacks: %w", err)
		}
	}
}
