package sampler

import (
	"context"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/unwind"
)

// TestUnwindWithoutFramePointers: testdata/nofp.c, built without frame pointers, spends its
// time in leaf called by middle, outer and main. The ring back end with Unwind gives most
// samples the whole chain, main and libc's start among it; the kernel's walk by frame
// pointers, on the same program, reaches main in almost none.
func TestUnwindWithoutFramePointers(t *testing.T) {
	exe, pid := startNoFP(t, "30")
	syms := functionRanges(t, exe, "leaf", "middle", "outer", "main")
	sample := func(cfg Config) []StackCount { return sampleStacks(t, pid, cfg) }
	// whole counts the samples in leaf whose chain goes on through middle, outer and main.
	whole := func(stacks []StackCount) (n, all uint64) {
		for _, st := range stacks {
			if len(st.User) == 0 || !syms["leaf"].has(st.User[0]) {
				continue
			}
			all += st.N
			want := []string{"middle", "outer", "main"}
			for _, ip := range st.User[1:] {
				if len(want) > 0 && syms[want[0]].has(ip-1) {
					want = want[1:]
				}
			}
			if len(want) == 0 {
				n += st.N
			}
		}
		return n, all
	}

	u := unwind.New(unwind.Config{})
	t.Cleanup(u.Close)
	sample(Config{Unwind: u}) // the files' frame information read: the chains before are cut
	withCFI := sample(Config{Unwind: u})
	byFP := sample(Config{})
	n, all := whole(withCFI)
	fpN, fpAll := whole(byFP)
	t.Logf("chains through main: %d of %d samples in leaf unwound, %d of %d by frame pointers; frame information held %d kB",
		n, all, fpN, fpAll, u.TableBytes()>>10)
	if all < 300 || fpAll < 300 {
		t.Fatalf("too few samples in leaf: %d and %d", all, fpAll)
	}
	if float64(n) < 0.9*float64(all) {
		t.Errorf("unwound: %d of %d samples in leaf reach main, want 90 %%", n, all)
	}
	if float64(fpN) > 0.1*float64(fpAll) {
		t.Errorf("by frame pointers: %d of %d samples in leaf reach main: the program was meant to keep none", fpN, fpAll)
	}
	// Past main, libc's own code (a shared library, moved when mapped) is unwound too.
	var libc []addrRange // where the layout's randomness put it this run
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Executable() && strings.HasPrefix(filepath.Base(m.Path), "libc.so") {
			libc = append(libc, addrRange{m.Start, m.End})
		}
	}
	if len(libc) == 0 {
		t.Fatal("the program maps no libc")
	}
	pastMain := 0
	for _, st := range withCFI {
		if slices.ContainsFunc(st.User, func(ip uint64) bool {
			return slices.ContainsFunc(libc, func(r addrRange) bool { return r.has(ip - 1) })
		}) {
			pastMain++
		}
	}
	if pastMain == 0 {
		t.Error("no unwound chain goes past main into libc")
	}
}

// TestUnwindVDSO: the same program reading the clock in a loop is sampled mostly in the
// vDSO, which no file holds (the kernel builds it with frame pointers): its chains go on by
// frame pointer to libc's clock_gettime, and by libc's frame information to clockloop and
// main.
func TestUnwindVDSO(t *testing.T) {
	exe, pid := startNoFP(t, "30", "clock")
	syms := functionRanges(t, exe, "clockloop", "main")
	var vdso addrRange
	time.Sleep(100 * time.Millisecond)
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Path == "[vdso]" {
			vdso = addrRange{m.Start, m.End}
		}
	}
	if vdso.hi == 0 {
		t.Fatal("the program maps no vdso")
	}
	u := unwind.New(unwind.Config{})
	t.Cleanup(u.Close)
	sampleStacks(t, pid, Config{Unwind: u}) // the files' frame information read
	var inVDSO, whole uint64
	for _, st := range sampleStacks(t, pid, Config{Unwind: u}) {
		if len(st.User) == 0 || !vdso.has(st.User[0]) {
			continue
		}
		inVDSO += st.N
		loop := false
		for _, ip := range st.User[1:] {
			loop = loop || syms["clockloop"].has(ip-1)
			if loop && syms["main"].has(ip-1) {
				whole += st.N
				break
			}
		}
	}
	t.Logf("%d samples in the vdso, %d of them reach clockloop and main", inVDSO, whole)
	if inVDSO < 100 {
		t.Fatalf("%d samples in the vdso", inVDSO)
	}
	if float64(whole) < 0.9*float64(inVDSO) {
		t.Errorf("%d of %d samples in the vdso reach clockloop and main", whole, inVDSO)
	}
}

// startNoFP builds testdata/nofp.c without frame pointers and runs it with args.
func startNoFP(t *testing.T, args ...string) (exe string, pid uint32) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"), testenv.PerfEvent("cpu-clock"))
	exe = filepath.Join(t.TempDir(), "nofp")
	if out, err := exec.Command("cc", "-O2", "-fomit-frame-pointer", "-no-pie", "-o", exe, "testdata/nofp.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	cmd := exec.Command(exe, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return exe, uint32(cmd.Process.Pid)
}

// sampleStacks samples pid's call chains for 1.5 s with the ring back end per CPU (cfg's
// Unwind, if any) and returns them.
func sampleStacks(t *testing.T, pid uint32, cfg Config) []StackCount {
	cfg.Backend, cfg.RingMode, cfg.Event, cfg.Stacks = BackendRing, RingPerCPU, "cpu-clock", true
	s := newTestSampler(t, cfg)
	defer s.Close()
	d := sampleFor(t, s, pid)
	var out []StackCount
	for _, st := range d.Stacks {
		if st.PID == pid {
			out = append(out, st)
		}
	}
	return out
}

// sampleFor starts s on target pid and drains what it took in 1.5 s.
func sampleFor(t *testing.T, s Sampler, pid uint32) Drained {
	t.Helper()
	if err := s.AddTarget(pid); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	d, err := s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (r addrRange) has(ip uint64) bool { return r.lo <= ip && ip < r.hi }

// functionRanges reads the address ranges of the named functions from exe's symbols.
func functionRanges(t *testing.T, exe string, names ...string) map[string]addrRange {
	out := map[string]addrRange{}
	for _, s := range testenv.ELFSymbols(t, exe) {
		for _, n := range names {
			if s.Name == n && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				out[n] = addrRange{s.Value, s.Value + s.Size}
			}
		}
	}
	if len(out) != len(names) {
		t.Fatalf("%s: found %v of %s", exe, out, strings.Join(names, ", "))
	}
	return out
}

// TestRingFilter: with the filter in the kernel, a busy process that is not a target never
// reaches the per-CPU rings (the reader sees none of its samples), and the filter counts
// them as Outside.
func TestRingFilter(t *testing.T) {
	_, target := startNoFP(t, "30")
	_, other := startNoFP(t, "30")
	u := unwind.New(unwind.Config{})
	t.Cleanup(u.Close)
	s := newTestSampler(t, Config{Backend: BackendRing, RingMode: RingPerCPU, Event: "cpu-clock", Stacks: true, Unwind: u})
	rs := s.(*ringSampler)
	if rs.filter == nil {
		t.Fatal("the rings' filter did not load (as root, where BPF works)")
	}
	d := sampleFor(t, s, target)
	var mine, others uint64
	for k, c := range d.Counts {
		switch k.PID {
		case target:
			mine += c.N
		case other:
			others += c.N
		}
	}
	rs.mu.Lock()
	read := rs.agg.stats.Outside
	rs.mu.Unlock()
	st := s.Stats()
	t.Logf("target %d samples; the other's: %d counted, %d read from the rings, %d kept out by the filter", mine, others, read, st.Outside-read)
	if mine < 300 || others != 0 {
		t.Fatalf("target %d samples, the other process %d", mine, others)
	}
	if read != 0 || st.Outside < 300 {
		t.Errorf("%d samples of other processes read from the rings, %d kept out", read, st.Outside-read)
	}
}
