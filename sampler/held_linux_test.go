package sampler

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/unwind"
)

// unwoundBody is the body of a user-mode sample record carrying a callchain of the
// kernel's, user registers and a stack copy (Config.Unwind).
func unwoundBody(pid uint32, timeNs uint64, regs unwind.Regs, stack []byte) []byte {
	ne := binary.NativeEndian
	body := sampleRec(pid, pid, regs.IP, timeNs, 1, miscUser)[recordHeaderBytes:]
	body = ne.AppendUint64(ne.AppendUint64(ne.AppendUint64(body, 2), callchainUser), regs.IP)
	body = ne.AppendUint64(body, regsABI64)
	body = ne.AppendUint64(ne.AppendUint64(ne.AppendUint64(body, regs.BP), regs.SP), regs.IP)
	body = ne.AppendUint64(body, uint64(len(stack)))
	body = append(body, stack...)
	return ne.AppendUint64(body, uint64(len(stack)))
}

// TestHeldChains: a sample whose walk meets JIT code nothing describes yet is held, leaf
// and chain, and walked on as its code is described, frame by frame; DrainAll, a process
// gone and maxHoldWait walk it as far as it goes; past maxHeldBytes samples are walked at
// once. Each sample is counted once.
func TestHeldChains(t *testing.T) {
	pid := uint32(os.Getpid())
	// Two trampolines that call on without a frame pointer, the second calling the first:
	// sub $8,%rsp; call *%rcx; add $8,%rsp; ret.
	tramp, _ := hex.DecodeString("4883ec08ffd14883c408c3")
	codeA := testenv.JITMemory(t, 8192)
	codeB := codeA + 4096
	const sp, outer = 0x7ffd00001000, 0x4005
	ne := binary.NativeEndian
	stack := make([]byte, 96)
	ne.PutUint64(stack[8:], codeB+6) // A's return address, past B's call
	ne.PutUint64(stack[24:], outer)  // B's
	regs := unwind.Regs{IP: codeA + 6, SP: sp}

	a := newAggregate()
	a.stacks = true
	a.unwind = unwind.New(unwind.Config{})
	t.Cleanup(a.unwind.Close)
	a.targets[pid] = struct{}{}
	decode := func(timeNs uint64) {
		t.Helper()
		if err := a.record(recordSample, miscUser, unwoundBody(pid, timeNs, regs, stack)); err != nil {
			t.Fatal(err)
		}
	}
	chains := func(d Drained) [][]uint64 {
		var out [][]uint64
		for _, st := range d.Stacks {
			for range st.N {
				out = append(out, st.User)
			}
		}
		return out
	}

	decode(5)
	if d := a.take(false); len(d.Stacks) != 0 || len(d.Counts) != 0 || d.Held[pid] != 5 {
		t.Fatalf("nothing describes A: %d chains, %d counts, held %v; want it held", len(d.Stacks), len(d.Counts), d.Held)
	}
	a.unwind.AddJITCode(pid, codeA, tramp)
	if d := a.take(false); len(d.Stacks) != 0 || d.Held[pid] != 5 {
		t.Fatalf("A described, B not: %v, held %v; want it held at B", chains(d), d.Held)
	}
	a.unwind.AddJITCode(pid, codeB, tramp)
	d := a.take(false)
	if got := chains(d); len(got) != 1 || !slices.Equal(got[0], []uint64{codeA + 6, codeB + 6, outer}) || d.Held != nil {
		t.Fatalf("both described: %#x, held %v; want the chain through both", got, d.Held)
	}
	if c := d.Counts[Key{PID: pid, IP: codeA + 6}]; c.N != 1 || c.FirstNs != 5 {
		t.Errorf("its leaf: %+v, want one sample at its own time", c)
	}

	// Walked as far as it goes: at DrainAll, for a process gone, after maxHoldWait.
	a.unwind.RemoveJITFrames(pid, codeA)
	decode(7)
	if got := chains(a.take(true)); len(got) != 1 || len(got[0]) != 1 {
		t.Errorf("DrainAll: %#x, want the leaf alone", got)
	}
	decode(8)
	a.release(pid, false, true)
	if got := chains(a.take(false)); len(got) != 1 {
		t.Errorf("a process gone: %d chains, want 1", len(got))
	}
	decode(9)
	a.held.samples[0].since = time.Now().Add(-maxHoldWait)
	if got := chains(a.take(false)); len(got) != 1 {
		t.Errorf("held maxHoldWait: %d chains, want 1", len(got))
	}

	// Past maxHeldBytes, samples are walked at once.
	stack = append(stack, make([]byte, 1<<20)...)
	const n = 40
	for i := range n {
		decode(uint64(10 + i))
	}
	held := len(a.held.samples)
	if held == 0 || held == n || a.held.bytes > maxHeldBytes || !a.held.full {
		t.Errorf("%d of %d samples of 1 MiB held, %d bytes; want some within %d bytes", held, n, a.held.bytes, maxHeldBytes)
	}
	if got := chains(a.take(false)); len(got) != n-held {
		t.Errorf("%d chains counted of %d, %d held", len(got), n, held)
	}
	if got := chains(a.take(true)); len(got) != held || a.held.bytes != 0 {
		t.Errorf("DrainAll: %d chains of %d held, %d bytes left", len(got), held, a.held.bytes)
	}
	// The first sample's chain came whole; the other three and the forty went on through
	// code not described.
	if st := a.stats; st.Samples != 4+n || st.HeldChains != uint64(4+held) || st.UndescribedChains != 3+n {
		t.Errorf("stats: %d samples, %d held, %d undescribed; want %d, %d, %d", st.Samples, st.HeldChains,
			st.UndescribedChains, 4+n, 4+held, 3+n)
	}
}
