package sampler

import (
	"encoding/binary"
	"log/slog"
	"slices"

	"github.com/profd/profd/internal/unwind"
)

// Functions without a frame: a function that keeps no frame (a leaf that keeps its locals
// in registers: libc's memcpy and strlen, Go's small loops), and every function at its first
// instruction and its return, has not saved the frame pointer, so the kernel's walk by frame
// pointers from a sample there skips its caller. With Config.Stacks and no Config.Unwind,
// samples also carry the word at the stack pointer (the BPF program keeps it where it may
// be a return address, the ring back end copies it with every sample), and where the
// function sampled has no frame at the sampled instruction, that word, the caller's return
// address, goes after the sampled instruction. Go's executables say so in their function
// table (unwind.GoLeaves, read for each target, whose ranges also tell the BPF program where
// Go's code lies); other code in its file's frame information (.eh_frame), or in what its JIT
// registered (unwind.Unwinder.ReturnAtSP, read the first time a word needs it).

// leafCallerTableBytes bounds the frame information read to decide words outside Go's code,
// which keeps only where functions have no frame (cfi.ReadFrameless: libc's 0.08 MB).
const leafCallerTableBytes = 64 << 20

// leafCallers decides the words at the stack pointer that a sampler's samples carry, for its
// targets (Add, until Forget: goCode's wanted processes); a word of any other process is
// dropped, so that the unwinder holds nothing of a process no Forget will let go of. Safe
// for concurrent use.
type leafCallers struct {
	goCode   *unwind.GoLeaves
	unwinder *unwind.Unwinder
}

// newLeafCallers returns the leafCallers a sampler of cfg keeps, nil when its chains are not
// the kernel's walks by frame pointers. found and lost are GoLeavesConfig's.
func newLeafCallers(cfg Config, found func(pid uint32, lo, hi uint64), lost func(pid uint32)) *leafCallers {
	if !cfg.Stacks || cfg.Unwind != nil {
		return nil
	}
	return &leafCallers{
		goCode:   unwind.NewGoLeaves(unwind.GoLeavesConfig{Found: found, Lost: lost, Logger: cfg.Logger}),
		unwinder: unwind.New(unwind.Config{MaxTableBytes: leafCallerTableBytes, FramelessOnly: true, Logger: cfg.Logger}),
	}
}

// Add has target pid's words decided from now on (its executable read for Go's table in
// the background).
func (c *leafCallers) Add(pid uint32) { c.goCode.Add(pid) }

// Forget lets go of what is held of pid.
func (c *leafCallers) Forget(pid uint32) {
	c.goCode.Forget(pid)
	c.unwinder.Forget(pid)
}

// tableBytes is the frame information held to decide words outside Go's code (0 for nil).
func (c *leafCallers) tableBytes() uint64 {
	if c == nil {
		return 0
	}
	return uint64(c.unwinder.TableBytes())
}

// Recheck looks for targets that exec'd another Go executable (GoLeaves.Recheck).
func (c *leafCallers) Recheck() { c.goCode.Recheck() }

// Close stops the readers.
func (c *leafCallers) Close() {
	c.goCode.Close()
	c.unwinder.Close()
}

// keep reports whether word, the word at the stack pointer of a sample of pid at ip, is the
// caller's return address: the function at ip has no frame there. A word whose code's
// frame information is still being read is dropped.
func (c *leafCallers) keep(pid uint32, ip, word uint64) bool {
	if c.goCode.InText(pid, ip) {
		return c.goCode.InText(pid, word) && c.goCode.Frameless(pid, ip)
	}
	if !c.goCode.Wanted(pid) {
		return false
	}
	yes, _ := c.unwinder.ReturnAtSP(pid, ip)
	return yes
}

// settleWords keeps, in each of stacks whose User[1] is the word at its stack pointer
// (wordAtSP), that word where the function sampled has no frame there, and drops it
// elsewhere.
func (c *leafCallers) settleWords(stacks []StackCount) {
	for i := range stacks {
		st := &stacks[i]
		if !st.wordAtSP {
			continue
		}
		st.wordAtSP = false
		if !c.keep(st.PID, st.User[0], st.User[1]) {
			st.User = slices.Delete(st.User, 1, 2)
		} else if len(st.User) > MaxStackFrames {
			st.User = st.User[:MaxStackFrames] // a chain cut anyway (Truncated)
		}
	}
}

// withWordAtSP returns in frames the user frames of chain (a callchain's bytes) with
// word, the word at the sample's stack pointer, after the sampled instruction, where the
// function there has no frame and word lies in process pid's code; nil otherwise.
func (c *leafCallers) withWordAtSP(pid uint32, chain []byte, word uint64, frames []uint64) []uint64 {
	// Most words are not code addresses: the cheap look first.
	if !c.goCode.InText(pid, word) && (!c.goCode.Wanted(pid) || !c.unwinder.InCode(pid, word)) {
		return nil
	}
	user := userEntries(chain)
	if user.len() == 0 || !c.keep(pid, user.at(0), word) {
		return nil
	}
	frames = append(frames[:0], user.at(0), word)
	for i := 1; i < user.len() && len(frames) < MaxStackFrames; i++ {
		frames = append(frames, user.at(i))
	}
	return frames
}

// stackWord is the first word of a sample's copy of its user stack, the word its stack
// pointer pointed at; false when the sample holds none.
func stackWord(us userStack) (uint64, bool) {
	if us.abi != regsABI64 || len(us.stack) < 8 {
		return 0, false
	}
	return binary.NativeEndian.Uint64(us.stack), true
}

// logGoTextErr logs, at Debug, an error telling the BPF program where pid's Go code lies
// (or that it no longer does).
func logGoTextErr(log *slog.Logger, pid uint32, err error) {
	if err != nil {
		log.Debug("sampler: Go code's range not given to the BPF program; its frameless functions' callers are skipped", "pid", pid, "err", err)
	}
}
