package daemon

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
)

// tripFunctions are workloads/tripcount.c's functions and their true trip counts (its
// defaults): one entered 2000 times around a 100000-trip loop, one entered 10^6 times around
// a 200-trip loop.
var tripFunctions = map[string]float64{"long_trips": 100000, "short_trips": 200}

// tripBounds is the range a profile's trip count must fall in. For short_trips, within a
// factor of 3 of the truth: the time an instruction of the code around the loop takes,
// against one of the loop's, varies between runs on these virtual machines (from 0.6 to 3
// times), and the samples measure time (at 77 to 407 trips over ten runs; 41 to 69 before
// profd pooled that code's samples). For long_trips the samples cannot tell: its 2000 calls
// spend a few microseconds outside the loop, which 20 kHz sampling sees as nothing, and the
// entry count is an estimate from half a sample. There the profile must say the loop runs
// long for each entry (at least 1000 trips; a head of 0 made it unbounded), and not more than
// twice what it does.
func tripBounds(name string, trips float64) (lo, hi float64) {
	if name == "long_trips" {
		return 1000, 2 * trips
	}
	return trips / 3, 3 * trips
}

// TestTripCounts profiles lli-14 running workloads/tripcount.c at 20 kHz and checks what
// LLVM learns of each loop's trip count from the profile, within a factor of 2: the loop's
// count over the head count in the profile, and, with clang-14 -fprofile-sample-use, the
// loop's frequency per entry that LLVM derives from the branch weights the profile gave it,
// and the loop's count over the function's entry count (bounds: tripBounds), for the profile
// made with the IR's subprograms and for the one profd wrote live, which has only lli's
// debug objects to count line offsets from. Where the
// time of the second function's entry lands (its first block, the preheader) varies from run
// to run.
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
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FreqHz: 20000, FifoDir: d.fifo,
		JitdumpDir: d.jitdump, OutDir: d.out})
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
		f := prof.Functions[name]
		if f == nil {
			t.Fatalf("no profile for %s", name)
		}
		var loop uint64
		for _, n := range f.Body {
			loop = max(loop, n)
		}
		got := float64(loop) / float64(f.HeadSamples)
		t.Logf("%s: head %d, loop %d: %.0f trips, want %.0f", name, f.HeadSamples, loop, got, trips)
		if lo, hi := tripBounds(name, trips); f.HeadSamples == 0 || got < lo || got > hi {
			t.Errorf("%s: head samples %d and loop count %d give %.0f trips, want %.0f to %.0f",
				name, f.HeadSamples, loop, got, lo, hi)
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

// checkTripsUnderClang compiles src with clang-14 -fprofile-sample-use=profile and checks
// the trip counts LLVM's block frequencies give tripFunctions' loops.
func checkTripsUnderClang(t *testing.T, what, profile, src string, compile []string) {
	t.Helper()
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
