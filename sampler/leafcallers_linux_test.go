package sampler

import (
	"context"
	"debug/elf"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/arch/x86/x86asm"

	"github.com/profd/profd/internal/testenv"
)

// TestGoLeafCallers: workloads/runtimes/hot.go spends its time in two functions Go gives no
// frame, both called by main.run. By frame pointers alone the chain of every sample in them
// goes on at main.main (run's caller); with the word at the stack pointer each back end
// puts main.run after the leaf, in nearly every such sample, and nowhere else: every
// address of the program's chains after the sampled instruction is a call's return (or,
// above the runtime's preemption, the instruction it interrupted).
func TestGoLeafCallers(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	exe := testenv.GoBuild(t, "../workloads/runtimes/hot.go")
	syms := functionRanges(t, exe, "main.mixInts", "main.sumSquares", "main.run", "main.main")
	text := textOf(t, exe)
	// A goroutine's first frame returns to runtime.goexit as if it had called it; a signal
	// handler's, to the start of the code that returns from the signal; and
	// runtime.asyncPreempt, which the runtime's preemption signal makes the goroutine run, to
	// the instruction it interrupted (under load, when the collector or another goroutine
	// wants the CPU).
	var notCalled []addrRange
	var preempt addrRange
	for _, sym := range testenv.ELFSymbols(t, exe) {
		switch r := (addrRange{sym.Value, sym.Value + sym.Size}); {
		case strings.HasPrefix(sym.Name, "runtime.goexit"), strings.HasPrefix(sym.Name, "runtime.sigreturn"):
			notCalled = append(notCalled, r)
		case sym.Name == "runtime.asyncPreempt.abi0":
			preempt = r
		}
	}
	for _, be := range []Backend{BackendBPF, BackendRing} {
		t.Run(string(be), func(t *testing.T) {
			if be == BackendBPF {
				testenv.Requires(t, testenv.BPF)
			}
			cmd := exec.Command(exe, "30")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			pid := uint32(cmd.Process.Pid)
			s := newTestSampler(t, Config{Backend: be, Stacks: true})
			if err := s.AddTarget(pid); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the executable read
			if _, err := s.Drain(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			d, err := s.Drain()
			if err != nil {
				t.Fatal(err)
			}
			var leaves, fromRun, fromMain uint64
			for _, st := range d.Stacks {
				if st.PID != pid || len(st.User) < 2 {
					continue
				}
				for i, ret := range st.User[1:] {
					callee := st.User[i] // the frame that returns to ret: the sampled instruction, or a return address
					if i > 0 {
						callee--
					}
					if text.has(ret) && !text.returnAddress(ret) && !preempt.has(callee) &&
						!slices.ContainsFunc(notCalled, func(r addrRange) bool { return r.has(ret-1) || r.has(ret) }) {
						t.Fatalf("chain %#x: %#x follows no call", st.User, ret)
					}
				}
				if !syms["main.mixInts"].has(st.User[0]) && !syms["main.sumSquares"].has(st.User[0]) {
					continue
				}
				leaves += st.N
				switch caller := st.User[1] - 1; {
				case syms["main.run"].has(caller):
					fromRun += st.N
				case syms["main.main"].has(caller):
					fromMain += st.N
				}
			}
			t.Logf("%d samples in the leaves: %d called from main.run, %d from main.main", leaves, fromRun, fromMain)
			if leaves < 500 {
				t.Fatalf("%d samples in the leaves", leaves)
			}
			if float64(fromRun) < 0.95*float64(leaves) {
				t.Errorf("%d of %d samples in the leaves called from main.run, want 95 %%", fromRun, leaves)
			}
		})
	}
}

// code is an executable's .text and its address.
type code struct {
	addr  uint64
	bytes []byte
}

func textOf(t *testing.T, exe string) code {
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".text")
	b, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	return code{sec.Addr, b}
}

func (c code) has(addr uint64) bool { return c.addr < addr && addr <= c.addr+uint64(len(c.bytes)) }

// returnAddress reports whether the instruction that ends at addr is a call.
func (c code) returnAddress(addr uint64) bool {
	end := int(addr - c.addr)
	for n := 2; n <= 7 && n <= end; n++ {
		inst, err := x86asm.Decode(c.bytes[end-n:end], 64)
		if err == nil && inst.Len == n && inst.Op == x86asm.CALL {
			return true
		}
	}
	return false
}
