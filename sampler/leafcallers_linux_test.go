package sampler

import (
	"context"
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/arch/x86/x86asm"

	"github.com/profd/profd/bpf"
	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// TestWordSlots: the BPF program looks in as many words at the stack pointer as the tables
// that decide them, and the ring back end copies, answer for (and its key's four bits a word
// hold).
func TestWordSlots(t *testing.T) {
	if bpf.WordSlots != cfi.ReturnSlots || cfi.ReturnSlots > 16 {
		t.Errorf("the BPF program's words %d, the tables' %d (at most 16: the flags' four bits a word)", bpf.WordSlots, cfi.ReturnSlots)
	}
}

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
			pid, stacks := leafCallerStacks(t, be, exe, "30")
			var leaves, fromRun, fromMain uint64
			for _, st := range stacks {
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

// TestCLeafCallers: workloads/leaves.c, built with frame pointers as distributions build C
// (leaves keep none), spends its time in libc's strlen and in mix, both frameless, in
// pushed, which keeps two saved registers below its return address, in framed, which keeps
// eleven words below it, and in stale, framed with the return address of an earlier call
// left at the stack pointer (a word that passes the BPF program's test), all called by run. By
// frame pointers alone every sample there goes on at main (perf record -g gives the same);
// with the words at the stack pointer, decided by libc's and the program's .eh_frame, each
// back end puts run after the leaf in nearly every such sample, and every address of the
// program's own code after the sampled instruction is a call's return.
func TestCLeafCallers(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"), testenv.Tool("gcc"))
	exe := filepath.Join(t.TempDir(), "leaves")
	if out, err := exec.Command("gcc", "-O2", "-no-pie", "-fno-omit-frame-pointer", "-momit-leaf-frame-pointer",
		"-o", exe, "../workloads/leaves.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	syms := functionRanges(t, exe, "mix", "pushed", "framed", "stale", "run", "main")
	text := textOf(t, exe)
	for _, be := range []Backend{BackendBPF, BackendRing} {
		t.Run(string(be), func(t *testing.T) {
			pid, stacks := leafCallerStacks(t, be, exe, "30")
			maps, err := procfs.ReadMaps(pid)
			if err != nil {
				t.Fatal(err)
			}
			var libc []addrRange
			for _, m := range maps {
				if m.Executable() && strings.Contains(filepath.Base(m.Path), "libc.so") {
					libc = append(libc, addrRange{m.Start, m.End})
				}
			}
			if len(libc) == 0 {
				t.Fatalf("no libc mapped by %d", pid)
			}
			inLibc := func(ip uint64) bool { return slices.ContainsFunc(libc, func(r addrRange) bool { return r.has(ip) }) }
			// leafOf names the leaf a sample at ip, returning to caller, was taken in; "" for
			// none of them.
			leafOf := func(ip, caller uint64) string {
				switch {
				case syms["mix"].has(ip):
					return "mix"
				// Its loop: the instructions between its pushes and its pops.
				case syms["pushed"].has(ip) && ip >= syms["pushed"].lo+3 && ip < syms["pushed"].lo+0x28:
					return "pushed"
				case syms["framed"].has(ip):
					return "framed"
				// Its loop, past the call that leaves the word.
				case syms["stale"].has(ip) && ip >= syms["stale"].lo+0xe && ip < syms["stale"].lo+0x40:
					return "stale"
				case inLibc(ip) && (syms["run"].has(caller) || syms["main"].has(caller)):
					return "strlen" // run calls nothing else of libc's
				}
				return ""
			}
			type leafCount struct {
				name    string
				least   uint64 // samples
				n, from uint64 // samples, of them called from run
			}
			leaves := []*leafCount{{name: "mix", least: 300}, {name: "strlen", least: 100}, {name: "pushed", least: 100},
				{name: "framed", least: 100}, {name: "stale", least: 100}}
			var fromMain uint64
			for _, st := range stacks {
				if st.PID != pid || len(st.User) < 2 {
					continue
				}
				for _, ret := range st.User[1:] {
					if text.has(ret) && !text.returnAddress(ret) {
						t.Fatalf("chain %#x: %#x follows no call", st.User, ret)
					}
				}
				caller := st.User[1] - 1
				name := leafOf(st.User[0], caller)
				i := slices.IndexFunc(leaves, func(l *leafCount) bool { return l.name == name })
				if i < 0 {
					continue
				}
				leaves[i].n += st.N
				if syms["run"].has(caller) {
					leaves[i].from += st.N
				}
				if syms["main"].has(caller) {
					fromMain += st.N
				}
			}
			var got []string
			for _, l := range leaves {
				got = append(got, fmt.Sprintf("%s %d of %d", l.name, l.from, l.n))
			}
			t.Logf("samples called from run: %s; %d from main", strings.Join(got, ", "), fromMain)
			for _, l := range leaves {
				if l.n < l.least {
					t.Fatalf("%d samples in %s, want %d at least (called from run: %s)", l.n, l.name, l.least, strings.Join(got, ", "))
				}
			}
			for _, l := range leaves {
				if float64(l.from) < 0.95*float64(l.n) {
					t.Errorf("%d of %d samples in %s called from run; want 95 %%", l.from, l.n, l.name)
				}
			}
		})
	}
}

// leafCallerStacks runs exe with args under a sampler of back end be taking stacks by frame
// pointers, and returns its pid and the stacks of a drain 1.5 s long, after the first half
// second's (in which the files that decide its words are read).
func leafCallerStacks(t *testing.T, be Backend, exe string, args ...string) (uint32, []StackCount) {
	if be == BackendBPF {
		testenv.Requires(t, testenv.BPF)
	}
	cmd := exec.Command(exe, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	s := newTestSampler(t, Config{Backend: be, Stacks: true})
	if err := s.AddTarget(pid); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := s.Drain(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	d, err := s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	return pid, d.Stacks
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
