package daemon

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// tripFunctions are workloads/tripcount.c's functions and their true trip counts (its
// defaults): one entered 2000 times around a 100000-trip loop, one entered 10^6 times around
// a 200-trip loop.
var tripFunctions = map[string]float64{"long_trips": 100000, "short_trips": 200}

// tripBounds is the range a profile's trip count must fall in. Samples measure time, and
// how long the code around a loop takes per instruction against the loop's own depends on
// the processor: for short_trips, whose 200-trip loop is entered 10^6 times, it drew 0.6 to
// 3 times a loop instruction's time on one host (77 to 637 trips over eighteen runs) and a
// tenth of it on an AMD EPYC host, where out-of-order execution hides the entry behind the
// loop's dependency chain (331 to 1280 trips over twelve runs, idle and beside two busy
// loops). The bounds hold on both: [trips/4, 10×trips]. They still fail when the head
// count is lost (rounded to 0 or 1: tens of thousands of trips) or the loop's count is.
// For long_trips the samples cannot tell: its 2000 calls spend a few microseconds outside
// the loop, which 20 kHz sampling sees as nothing, and the entry count is an estimate from
// half a sample. There the profile must say the loop runs long for each entry (at least
// 1000 trips; a head of 0 made it unbounded), and not more than twice what it does.
func tripBounds(name string, trips float64) (lo, hi float64) {
	if name == "long_trips" {
		return 1000, 2 * trips
	}
	return trips / 4, 10 * trips
}

// TestTripCounts profiles lli-14 running workloads/tripcount.c at 20 kHz and checks what
// LLVM learns of each loop's trip count from the profile: the loop's count over the head
// count in the profile against the truth (bounds: tripBounds), and, with clang-14
// -fprofile-sample-use, the loop's frequency per entry that LLVM derives from the branch
// weights the profile gave it and the loop's count over the function's entry count, both
// within a factor of 2 of the profile's own ratio and within tripBounds, for the profile
// made with the IR's subprograms and for the one profd wrote live, which has only lli's
// debug objects to count line offsets from.
func TestTripCounts(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"), testenv.Tool("opt-14"))
	dir := t.TempDir()
	src, ir := "../workloads/tripcount.c", filepath.Join(dir, "tripcount.ll")
	compile := []string{"-O2", "-g", "-fdebug-info-for-profiling"}
	if out, err := exec.Command("clang-14", append(compile, "-S", "-emit-llvm", "-o", ir, src)...).CombinedOutput(); err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	d := newDirs(t)
	lli := startChild(t, []string{"JITDUMPDIR=" + d.jitdump}, "lli-14", "-jit-kind=mcjit", "-mcpu=x86-64", ir)
	pid := lli.pid()
	// lli loads LLVM and compiles the IR, registering its object with the GDB JIT interface
	// as it writes its jitdump records (long_trips, short_trips, main), then runs long_trips
	// for a few tenths of a second and short_trips. Held (SIGSTOP) at its start until profd
	// samples it, and once it runs main until profd has read its code loads, it neither runs
	// before profd samples it nor exits before profd reads its debug objects: on a loaded
	// machine (the race detector) profd otherwise starts late enough to miss most of
	// long_trips, and reads the debug objects of a process that has exited.
	sendSignal(t, pid, syscall.SIGSTOP)
	counters := &Counters{}
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FreqHz: 20000, FifoDir: d.fifo,
		JitdumpDir: d.jitdump, OutDir: d.out, Counters: counters})
	r.waitAdded(t, pid, 30*time.Second)
	sendSignal(t, pid, syscall.SIGCONT)
	waitFor(t, "lli's jitdump record of main", 30*time.Second, func() bool {
		dumps, _ := filepath.Glob(filepath.Join(d.jitdump, ".debug", "jit", "*", "jit-"+strconv.Itoa(pid)+".dump"))
		for _, p := range dumps {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("main\x00")) {
				return true
			}
		}
		return false
	})
	compiled := onCPU(t, pid)
	waitFor(t, "lli to run main", 30*time.Second, func() bool { return onCPU(t, pid) > compiled+20*time.Millisecond })
	sendSignal(t, pid, syscall.SIGSTOP)
	waitFor(t, "profd to read lli's code loads", 30*time.Second, func() bool { return counters.Read().SymbolsLoaded >= 3 })
	sendSignal(t, pid, syscall.SIGCONT)
	lli.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	c := readCapture(t, outputPath(d, "lli", pid, FormatCapture))

	// The profile reestimate --ir writes: line offsets from the IR's subprograms.
	irFile, err := os.Open(ir)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := profgen.Subprograms(irFile)
	irFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	prof, st := profgen.FromCapture(c, profgen.Options{Subprograms: subs})
	t.Logf("conversion %+v", st)
	for name, trips := range tripFunctions {
		got := profileTrips(t, "reestimate --ir", prof, name)
		if lo, hi := tripBounds(name, trips); got < lo || got > hi {
			t.Errorf("%s: the profile gives %.0f trips, want %.0f to %.0f", name, got, lo, hi)
		}
	}

	// clang-14 compiling the source with that profile, and with the one profd wrote while
	// lli ran, whose line offsets come from lli's GDB JIT debug objects.
	profPath := filepath.Join(dir, "prof.txt")
	var text bytes.Buffer
	if err := profileio.WriteText(&text, prof); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(profPath, text.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range c.Objects {
		if _, ok := tripFunctions[o.Object.Name]; ok && o.Object.FirstLine == 0 {
			t.Errorf("%s: no first line from lli's debug object", o.Object.Name)
		}
	}
	for what, path := range map[string]string{"reestimate --ir": profPath, "profd's live": outputPath(d, "lli", pid, FormatLLVMText)} {
		checkTripsUnderClang(t, what, path, src, compile)
	}
}

// profileTrips is the trip count profile p gives function name's loop: its hottest line's
// count over its head count. A missing profile or a head of 0 fails the test.
func profileTrips(t *testing.T, what string, p *sampleprof.Profile, name string) float64 {
	t.Helper()
	f := p.Functions[name]
	if f == nil || f.HeadSamples == 0 {
		t.Fatalf("%s profile: no profile or no head samples for %s", what, name)
	}
	var loop uint64
	for _, n := range f.Body {
		loop = max(loop, n)
	}
	trips := float64(loop) / float64(f.HeadSamples)
	t.Logf("%s profile: %s: head %d, loop %d: %.0f trips, want %.0f", what, name, f.HeadSamples, loop, trips, tripFunctions[name])
	return trips
}

// checkTripsUnderClang compiles src with clang-14 -fprofile-sample-use=profile and checks
// the trip counts LLVM's block frequencies give tripFunctions' loops: within a factor of 2
// of the profile's own, and within tripBounds.
func checkTripsUnderClang(t *testing.T, what, profile, src string, compile []string) {
	t.Helper()
	pf, err := os.Open(profile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profileio.ReadText(pf)
	pf.Close()
	if err != nil {
		t.Fatalf("%s profile: %v", what, err)
	}
	used := filepath.Join(t.TempDir(), "used.ll")
	args := append(append([]string(nil), compile...), "-fprofile-sample-use="+profile, "-S", "-emit-llvm", "-o", used, src)
	if out, err := exec.Command("clang-14", args...).CombinedOutput(); err != nil {
		t.Fatalf("%s profile: clang-14 -fprofile-sample-use: %v\n%s", what, err, out)
	}
	// LLVM's block frequencies: each block's per entry, from the branch weights, and its
	// count, from the entry count.
	out, err := exec.Command("opt-14", "-passes=print<block-freq>", "-disable-output", used).CombinedOutput()
	if err != nil {
		t.Fatalf("opt-14: %v\n%s", err, out)
	}
	freqs := blockFrequencies(string(out))
	for name, trips := range tripFunctions {
		blocks := freqs[name]
		if len(blocks) == 0 || blocks[0].count == 0 {
			t.Errorf("%s profile: opt-14 printed no block counts for %s (no entry count):\n%s", what, name, out)
			continue
		}
		var loop irBlockFreq
		for _, b := range blocks {
			if b.perEntry > loop.perEntry {
				loop = b
			}
		}
		perCount := float64(loop.count) / float64(blocks[0].count)
		t.Logf("%s profile: %s under clang: entry count %d, loop %.0f per entry, count %d", what, name, blocks[0].count, loop.perEntry, loop.count)
		own := profileTrips(t, what, p, name)
		if lo, hi := max(own/2, 1), 2*own; loop.perEntry < lo || loop.perEntry > hi || perCount < lo || perCount > hi {
			t.Errorf("%s profile: %s: LLVM reads the loop as running %.0f times per entry (branch weights), %.0f (counts), the profile %.0f",
				what, name, loop.perEntry, perCount, own)
		}
		if lo, hi := tripBounds(name, trips); loop.perEntry < lo || loop.perEntry > hi || perCount < lo || perCount > hi {
			t.Errorf("%s profile: %s: LLVM reads the loop as running %.0f times per entry (branch weights), %.0f (counts), want %.0f to %.0f",
				what, name, loop.perEntry, perCount, lo, hi)
		}
	}
}

// irBlockFreq is one line of opt-14's print<block-freq>: a block's frequency per entry of
// its function and its count.
type irBlockFreq struct {
	perEntry float64
	count    uint64
}

var (
	bfiFunctionRE = regexp.MustCompile(`^block-frequency-info: (\S+)`)
	bfiBlockRE    = regexp.MustCompile(`^ - [^:]*: float = ([0-9.e+]+), int = [0-9]+(?:, count = ([0-9]+))?`)
)

// blockFrequencies parses print<block-freq>'s output by function, blocks in its order.
func blockFrequencies(out string) map[string][]irBlockFreq {
	freqs := map[string][]irBlockFreq{}
	fn := ""
	for _, line := range strings.Split(out, "\n") {
		if m := bfiFunctionRE.FindStringSubmatch(line); m != nil {
			fn = m[1]
			continue
		}
		if m := bfiBlockRE.FindStringSubmatch(line); m != nil && fn != "" {
			f, _ := strconv.ParseFloat(m[1], 64)
			n, _ := strconv.ParseUint(m[2], 10, 64)
			freqs[fn] = append(freqs[fn], irBlockFreq{perEntry: f, count: n})
		}
	}
	return freqs
}

// sendSignal sends sig to pid.
func sendSignal(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("%v to %d: %v", sig, pid, err)
	}
}

// onCPU is how long process pid has run (/proc/PID/schedstat).
func onCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		t.Fatalf("process %d: %v (it exited before profd read its code loads)", pid, err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		t.Fatalf("/proc/%d/schedstat: %v", pid, err)
	}
	return time.Duration(ns)
}
