package sampler

import (
	"encoding/binary"
	"log/slog"
	"slices"
	"sync"

	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/unwind"
)

// Functions that have not set the frame pointer: a function that keeps no frame (a leaf
// that keeps its locals in registers: libc's memcpy and strlen, Go's small loops) or a small
// one without a frame pointer (a leaf that saves a register or two), and every function at
// its first instruction, after it pushed the frame pointer, and at its return, leaves the
// caller's frame pointer in place, so the kernel's walk by frame pointers from a sample there
// skips its caller. With Config.Stacks and no Config.Unwind, samples also carry words at the
// stack pointer (the BPF program keeps the first bpf.WordCandidates of cfi.ReturnSlots words
// that may be return addresses, and which words they were; the ring back end copies those
// words with every sample), and where the function sampled has not set the frame pointer
// and its return address is one of them, that word, the caller's return address, goes
// after the sampled instruction. Go's executables say where their functions have no frame
// in their function table (unwind.GoLeaves, read for each target, whose ranges also tell
// the BPF program where Go's code lies; Go sets the frame pointer with any frame); other
// code in its file's frame information (.eh_frame), or in what its JIT registered, wrote in
// its jitdump or loaded (unwind.Unwinder.ReturnSlot, read the first time a word needs it;
// Config.Words).

// leafCallers decides the words at the stack pointer that a sampler's samples carry, for its
// targets (Add, until Forget: goCode's wanted processes); a word of any other process is
// dropped, so that the unwinder holds nothing of a process no Forget will let go of. Safe
// for concurrent use.
type leafCallers struct {
	goCode   *unwind.GoLeaves
	unwinder *unwind.Unwinder
	made     bool // unwinder is the sampler's own (no Config.Words): Close closes it

	mu sync.Mutex
	// waiting are the processes whose words went without a decision since the last
	// takeWaiting, for code whose frame information had not come.
	waiting map[uint32]bool
}

// newLeafCallers returns the leafCallers a sampler of cfg keeps, nil when its chains are not
// the kernel's walks by frame pointers. found and lost are GoLeavesConfig's.
func newLeafCallers(cfg Config, found func(pid uint32, lo, hi uint64), lost func(pid uint32)) *leafCallers {
	if !cfg.Stacks || cfg.Unwind != nil {
		return nil
	}
	c := &leafCallers{
		goCode:   unwind.NewGoLeaves(unwind.GoLeavesConfig{Found: found, Lost: lost, Logger: cfg.Logger}),
		unwinder: cfg.Words,
	}
	if c.unwinder == nil {
		c.unwinder, c.made = unwind.New(unwind.Config{ReturnSlotsOnly: true, Logger: cfg.Logger}), true
	}
	return c
}

// Add has target pid's words decided from now on (its executable read for Go's table in
// the background; the JIT code handed to the unwinder for it kept).
func (c *leafCallers) Add(pid uint32) {
	c.goCode.Add(pid)
	c.unwinder.Follow(pid)
}

// Forget lets go of what is held of pid.
func (c *leafCallers) Forget(pid uint32) {
	c.goCode.Forget(pid)
	c.unwinder.Forget(pid)
}

// Recheck looks for targets that exec'd another Go executable (GoLeaves.Recheck).
func (c *leafCallers) Recheck() { c.goCode.Recheck() }

// Close stops the readers.
func (c *leafCallers) Close() {
	c.goCode.Close()
	if c.made {
		c.unwinder.Close()
	}
}

// returnSlot returns which word at the stack pointer of a sample of pid at ip (0 the one it
// points at) is the caller's return address that the kernel's walk skips there; false where
// none is (the function has set the frame pointer, or its return address lies deeper) or the
// code's frame information has not come (the process is then waiting).
func (c *leafCallers) returnSlot(pid uint32, ip uint64) (int, bool) {
	if c.goCode.InText(pid, ip) {
		return 0, c.goCode.Frameless(pid, ip)
	}
	if !c.goCode.Wanted(pid) {
		return 0, false
	}
	slot, ok, later := c.unwinder.ReturnSlot(pid, ip)
	if later {
		c.mu.Lock()
		if c.waiting == nil {
			c.waiting = map[uint32]bool{}
		}
		c.waiting[pid] = true
		c.mu.Unlock()
	}
	return slot, ok
}

// takeWaiting returns the processes whose words went without a decision since the last
// call, for code whose frame information had not come (Drained.Undescribed); nil when none.
func (c *leafCallers) takeWaiting() map[uint32]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waiting
	c.waiting = nil
	return w
}

// pick returns the one of words (words at the stack pointer of a sample of pid at ip, slots
// which word each is) that is the caller's return address the kernel's walk skips there;
// false where none is. A word whose code's frame information is still being read is
// dropped.
func (c *leafCallers) pick(pid uint32, ip uint64, words []uint64, slots []uint8) (uint64, bool) {
	at, ok := c.returnSlot(pid, ip)
	if !ok {
		return 0, false
	}
	for i, w := range words {
		if int(slots[i]) == at {
			return w, c.fromCode(pid, ip, w)
		}
	}
	return 0, false
}

// fromCode reports whether a function at ip of pid may be called from word: Go's code, as
// far as its frameless functions go, from Go's code alone.
func (c *leafCallers) fromCode(pid uint32, ip, word uint64) bool {
	return !c.goCode.InText(pid, ip) || c.goCode.InText(pid, word)
}

// settleWords puts after the sampled instruction of each of stacks that carries words at its
// stack pointer the one of them that is the caller's return address, where the function
// sampled has not set the frame pointer there, and lets go of the words.
func (c *leafCallers) settleWords(stacks []StackCount) {
	for i := range stacks {
		st := &stacks[i]
		if st.nwords == 0 {
			continue
		}
		w, ok := c.pick(st.PID, st.User[0], st.words[:st.nwords], st.wordSlots[:st.nwords])
		st.nwords = 0
		if ok {
			st.User = slices.Insert(st.User, 1, w)
			if len(st.User) > MaxStackFrames {
				st.User = st.User[:MaxStackFrames] // a chain cut anyway (Truncated)
			}
		}
	}
}

// withWordAtSP returns in frames the user frames of chain (a callchain's bytes) with the
// caller's return address after the sampled instruction, where the function there has not set
// the frame pointer and its return address is one of words (the first words at the sample's
// stack pointer), in process pid's code; nil otherwise.
func (c *leafCallers) withWordAtSP(pid uint32, chain []byte, words []uint64, frames []uint64) []uint64 {
	user := userEntries(chain)
	if user.len() == 0 {
		return nil
	}
	ip := user.at(0)
	slot, ok := c.returnSlot(pid, ip)
	if !ok || slot >= len(words) || !c.inCode(pid, words[slot]) || !c.fromCode(pid, ip, words[slot]) {
		return nil
	}
	frames = append(frames[:0], ip, words[slot])
	for i := 1; i < user.len() && len(frames) < MaxStackFrames; i++ {
		frames = append(frames, user.at(i))
	}
	return frames
}

// inCode reports whether word lies in process pid's code, as far as a target's Go table or
// mappings tell.
func (c *leafCallers) inCode(pid uint32, word uint64) bool {
	return c.goCode.InText(pid, word) || c.goCode.Wanted(pid) && c.unwinder.InCode(pid, word)
}

// stackWords appends to words the first words of a sample's copy of its user stack (from
// the one its stack pointer pointed at), cfi.ReturnSlots at most; none when it holds none.
func stackWords(us userStack, words []uint64) []uint64 {
	words = words[:0]
	if us.abi != regsABI64 {
		return words
	}
	for b := us.stack; len(b) >= 8 && len(words) < cfi.ReturnSlots; b = b[8:] {
		words = append(words, binary.NativeEndian.Uint64(b))
	}
	return words
}

// logTextErr logs, at Debug, an error telling the BPF program where pid's Go or JIT code
// lies (or that it no longer does).
func logTextErr(log *slog.Logger, pid uint32, err error) {
	if err != nil {
		log.Debug("sampler: code's range not given to the BPF program; callers of its functions that keep no frame may be skipped", "pid", pid, "err", err)
	}
}
