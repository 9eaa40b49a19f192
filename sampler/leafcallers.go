package sampler

import (
	"encoding/binary"
	"log/slog"
	"slices"

	"github.com/profd/profd/internal/unwind"
)

// Go's code and frame pointers: a function Go gives no frame (a leaf that keeps its locals
// in registers), and every function at its first instruction and its return, has no frame
// pointer of its own, so the kernel's walk by frame pointers from a sample there skips its
// caller. With Config.Stacks and no Config.Unwind, samples in a Go executable's code also
// carry the word at the stack pointer (the BPF program keeps it, the ring back end copies
// it with the sample), and where the executable's function table says the sampled function
// has an empty frame there (unwind.GoLeaves), that word, the caller's return address,
// goes after the sampled instruction.

// goLeaves is the GoLeaves a sampler of cfg keeps, nil when its chains are not the
// kernel's walks by frame pointers.
func goLeaves(cfg Config, found func(pid uint32, lo, hi uint64), lost func(pid uint32)) *unwind.GoLeaves {
	if !cfg.Stacks || cfg.Unwind != nil {
		return nil
	}
	return unwind.NewGoLeaves(unwind.GoLeavesConfig{Found: found, Lost: lost, Logger: cfg.Logger})
}

// settleWords keeps, in each of stacks whose User[1] is the word at its stack pointer
// (wordAtSP), that word where the function sampled has an empty frame there, and drops it
// elsewhere.
func settleWords(leaves *unwind.GoLeaves, stacks []StackCount) {
	for i := range stacks {
		st := &stacks[i]
		if !st.wordAtSP {
			continue
		}
		st.wordAtSP = false
		if !leaves.Frameless(st.PID, st.User[0]) {
			st.User = slices.Delete(st.User, 1, 2)
		}
	}
}

// withWordAtSP returns in frames the user frames of chain (a callchain's bytes) with
// word, the word at the sample's stack pointer, after the sampled instruction, where the
// function there, in process pid's Go code, has an empty frame and word lies in that
// code too; nil otherwise.
func withWordAtSP(leaves *unwind.GoLeaves, pid uint32, chain []byte, word uint64, frames []uint64) []uint64 {
	if !leaves.InText(pid, word) { // most samples, those of other processes than Go's first
		return nil
	}
	user := userEntries(chain)
	if user.len() == 0 || !leaves.Frameless(pid, user.at(0)) {
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
