package daemon

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

var testjitFunctions = []string{"count_small", "count_medium", "count_large"}

// TestTestJITEndToEnd profiles jit/testjit, which announces its code through the FIFO with
// jit/profd_jit.h, unloads count_small and loads count_large at the same address, moves
// count_medium, and after each round asks for its profiles and waits for their paths. perf record of the same run is attributed with testjit's own account of
// where each function was (perf cannot name FIFO-announced code): the shares must agree, so
// the samples of the two functions that shared an address are each counted right.
func TestTestJITEndToEnd(t *testing.T) {
	for _, backend := range []sampler.Backend{sampler.BackendBPF, sampler.BackendRing} {
		t.Run(string(backend), func(t *testing.T) {
			testenv.Requires(t, testenv.Root)
			testjit, _ := workloads(t)
			d := newDirs(t)
			jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "150", "-r", "2", "-w", "10000", "-F")
			pid := jit.pid()
			var perf *perfRun
			if perfAvailable() {
				perf = startPerf(t, pid, 999)
				time.Sleep(100 * time.Millisecond) // perf enables its event after writing its header
			}
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", Backend: backend, FifoDir: d.fifo, OutDir: d.out})
			jit.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			summary := r.summary.String()
			if !strings.Contains(jit.out.String(), "profd connected") {
				t.Fatalf("testjit did not connect to profd:\n%s", jit.out.String())
			}
			// -F: after each round testjit asks for its profiles over its FIFO and waits
			// for profd's answer: their paths.
			want := "flushed rc=0 status=0 paths=" + strings.Join([]string{outputPath(d, "testjit", pid, FormatLLVMText),
				outputPath(d, "testjit", pid, FormatLLVMExtBinary), outputPath(d, "testjit", pid, FormatPprof),
				outputPath(d, "testjit", pid, FormatCapture)}, ",")
			if n := strings.Count(jit.out.String(), want+"\n"); n != 2 {
				t.Errorf("%d answered flush requests, want one per round (2), each %q:\n%s", n, want, jit.out.String())
			}
			if !strings.Contains(summary, "profd final flush #") {
				t.Errorf("no final flush:\n%s", summary)
			}

			c := readCapture(t, outputPath(d, "testjit", pid, FormatCapture))
			got := jitTotals(c)
			checkEachSampled(t, got)
			checkFewUnnamed(t, c)
			if perf != nil {
				compareShares(t, got, testjitPerfTotals(t, jit.out.String(), perf.samples(t, pid, false)), testjitFunctions, 5)
			}
			checkLLVMOutputs(t, d, "testjit", pid, testjitFunctions)
		})
	}
}

// testjitPerfTotals attributes perf samples to testjit's functions from its stdout. Each
// round runs count_small at A, count_medium at A+0x400, count_large at A again, then
// count_medium moved to A+0x800, so a sample at A belongs to count_large when the latest
// count_medium sample before it was at A+0x400, else to count_small.
func testjitPerfTotals(t testing.TB, stdout string, samples []perfSample) map[string]uint64 {
	t.Helper()
	type span struct {
		name       string
		start, end uint64
	}
	var spans []span
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 4 && f[0] == "load":
			a, err1 := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64)
			n, err2 := strconv.ParseUint(f[3], 10, 64)
			if err1 == nil && err2 == nil {
				spans = append(spans, span{f[1], a, a + n})
			}
		case len(f) >= 5 && f[0] == "move":
			a, err1 := strconv.ParseUint(strings.TrimPrefix(f[3], "0x"), 16, 64)
			n, err2 := strconv.ParseUint(f[4], 10, 64)
			if err1 == nil && err2 == nil {
				spans = append(spans, span{f[1], a, a + n})
			}
		}
	}
	var small, medium1 span
	for _, s := range spans {
		if s.name == "count_small" {
			small = s
		}
		if s.name == "count_medium" && medium1.name == "" {
			medium1 = s
		}
	}
	if small.name == "" || medium1.name == "" {
		t.Fatalf("testjit printed no loads:\n%s", stdout)
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].timeNs < samples[j].timeNs })
	totals := map[string]uint64{}
	afterFirstMedium := false
	for _, s := range samples {
		name := ""
		for _, sp := range spans {
			if s.ip >= sp.start && s.ip < sp.end {
				name = sp.name
				break
			}
		}
		switch {
		case name == "count_medium":
			afterFirstMedium = s.ip >= medium1.start && s.ip < medium1.end
		case name != "" && s.ip >= small.start && s.ip < small.end+64:
			name = "count_small"
			if afterFirstMedium {
				name = "count_large"
			}
		}
		if name != "" {
			totals[name]++
		}
	}
	return totals
}

// TestJITKilledMidRun kills one of two JITs while it runs: profd goes on profiling the
// other, and the killed one's samples are in its final profile.
func TestJITKilledMidRun(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	victim := startChild(t, nil, testjit, "-d", d.fifo, "-m", "5000", "-w", "10000")
	other := startChild(t, nil, testjit, "-d", d.fifo, "-m", "100", "-r", "6", "-w", "10000", "-f")
	r := startRun(t, Config{Pids: []uint32{uint32(victim.pid()), uint32(other.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	waitFor(t, "the victim to run count_small", 10*time.Second, func() bool {
		return strings.Contains(victim.out.String(), "load count_medium")
	})
	// 400 ms of the victim's CPU time, however busy the machine.
	mark := testenv.UserCPU(t, victim.pid())
	waitFor(t, "the victim to run for 400 ms of CPU time", 60*time.Second, func() bool {
		return testenv.UserCPU(t, victim.pid())-mark >= 400*time.Millisecond
	})
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	waitFor(t, "the victim's final profile", 10*time.Second, func() bool {
		return fileExists(outputPath(d, "testjit", victim.pid(), FormatCapture))
	})
	if !r.running() {
		t.Fatalf("profd stopped when one of two targets was killed\n%s", r.logs.String())
	}
	other.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	v := jitTotals(readCapture(t, outputPath(d, "testjit", victim.pid(), FormatCapture)))
	if v["count_small"] < 50 || v["count_medium"] != 0 {
		t.Errorf("killed JIT: %v, want count_small's ~400 ms of samples and nothing else", v)
	}
	o := jitTotals(readCapture(t, outputPath(d, "testjit", other.pid(), FormatCapture)))
	for _, n := range testjitFunctions {
		if o[n] < 30 {
			t.Errorf("surviving JIT: %s has %d samples: %v", n, o[n], o)
		}
	}
}

// TestFIFOWriterReopen has testjit close its FIFO writer and open it again after each round:
// every round's stream is decoded, so every round's code is named and counted.
func TestFIFOWriterReopen(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	const rounds = 3
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "80", "-r", strconv.Itoa(rounds), "-w", "10000", "-f", "-c")
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	if n := strings.Count(jit.out.String(), "reopen connected"); n != rounds-1 {
		t.Fatalf("testjit reopened %d times, want %d:\n%s", n, rounds-1, jit.out.String())
	}
	c := readCapture(t, outputPath(d, "testjit", jit.pid(), FormatCapture))
	// Each round loads its functions anew, with the same code (count_medium moves once per
	// round): each function's samples of every round are named and counted (80 ms of CPU a
	// run, sampled at 999 Hz; count_medium runs twice a round). Its copies count as one code
	// object but those whose samples a flush listed unnamed before their record came
	// (attribute's tests check which).
	totals := jitTotals(c)
	for n, runs := range map[string]uint64{"count_small": rounds, "count_medium": 2 * rounds, "count_large": rounds} {
		if totals[n] < runs*40 {
			t.Errorf("%s: %d samples, want at least %d; objects %v", n, totals[n], runs*40, objectSummary(c))
		}
	}
	if got := lastCounter(r.summary.String(), "symbols "); got != rounds*3 {
		t.Errorf("summary counts %d symbols, want %d (3 loads per round)", got, rounds*3)
	}
	checkFewUnnamed(t, c)
}

// checkFewUnnamed fails t when more than 2 % of a JIT's samples fell in anonymous memory
// that profd could not name: testjit runs nothing there that it did not announce.
func checkFewUnnamed(t testing.TB, c *profileio.Capture) {
	t.Helper()
	jitN, _ := c.TotalSamples()
	anon := c.UnnamedSamples() + unmappedSamples(c, func(m string) bool { return m == "[anon]" })
	if anon*50 > jitN {
		t.Errorf("%d samples in anonymous memory profd could not name, %d named", anon, jitN)
	}
}

func objectSummary(c *profileio.Capture) string {
	var b strings.Builder
	for _, o := range c.Objects {
		fmt.Fprintf(&b, "%s@%#x(load %d, %d offsets) ", o.Object.Name, o.Object.Addr, o.Object.LoadNs, len(o.Samples))
	}
	return b.String()
}

// TestLateDumpWithAddressReuse: testjit reuses an address (count_small, then count_large at
// the same place) and moves code, but writes its jitdump only as it exits: every sample
// waits unnamed, and the dump found at the end names each by the code that ran at its time,
// as perf attributes them by time from testjit's own account.
func TestLateDumpWithAddressReuse(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	// Its JITDUMPDIR is the only sign of where the dump will be. It waits (-g) until perf
	// and profd are both attached: its first function runs only 150 ms, which a profiler
	// attached later than the other would miss.
	cmd := exec.Command(testjit, "-o", filepath.Join(d.jitdump, ".debug", "jit", "testjit-late"), "-m", "150", "-r", "2", "-g")
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+d.jitdump)
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	jit := startCmd(t, cmd)
	var perf *perfRun
	if perfAvailable() {
		perf = startPerf(t, jit.pid(), 999)
	}
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	r.waitAdded(t, jit.pid(), 60*time.Second)
	gate.Close()
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	c := readCapture(t, outputPath(d, "testjit", jit.pid(), FormatCapture))
	got := jitTotals(c)
	checkEachSampled(t, got)
	checkFewUnnamed(t, c)
	if perf != nil {
		compareShares(t, got, testjitPerfTotals(t, jit.out.String(), perf.samples(t, jit.pid(), false)), testjitFunctions, 2)
	}
	if t.Failed() {
		for _, o := range c.Objects {
			t.Logf("%s %#x+%d load %d unload %d: %d samples", o.Object.Name, o.Object.Addr, o.Object.Size, o.Object.LoadNs, o.Object.UnloadNs, o.TotalSamples())
		}
		t.Logf("unmapped %+v", c.Unmapped)
		for _, u := range c.Unnamed {
			t.Logf("unnamed %#x %d..%d: %d", u.IP, u.FirstNs, u.LastNs, u.Count)
		}
	}
}

// TestExecEndsOldCode: a JIT, profiled by its pid, execs a program with its code still
// loaded (as a JIT's process that execs does: no record unloads it). The new program runs
// code at the same addresses and tells profd nothing of it. Its samples there are not named
// by the old program's code, which ended at the exec (the time the kernel's exec
// notification carries); the old program's own are named by it. The new program is another
// executable (a target anew, with outputs of its own), or the same one again (the same
// target and outputs).
func TestExecEndsOldCode(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	// run runs testjit, which execs exe, under profd; the new program sends no record.
	run := func(t *testing.T, exe string) (dirs, int, *profdRun) {
		d := newDirs(t)
		const at = "7e5a00000000" // both programs' code space
		jit := startChild(t, nil, testjit, "-d", d.fifo, "-w", "10000", "-A", at, "-m", "300",
			"-X", exe, "-A", at, "-d", filepath.Join(d.out, "nowhere"), "-m", "500")
		r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
			Formats: []Format{FormatCapture}})
		jit.wait(t, 60*time.Second)
		r.wait(t, 30*time.Second)
		if !strings.Contains(jit.out.String(), "profd connected") || !strings.Contains(jit.out.String(), "exec ") {
			t.Fatalf("testjit did not connect, or did not exec:\n%s", jit.out.String())
		}
		return d, jit.pid(), r
	}
	t.Run("another executable", func(t *testing.T) {
		// The new program is testjit under another name, so that its outputs are apart.
		newjit := filepath.Join(t.TempDir(), "newjit")
		if b, err := os.ReadFile(testjit); err != nil || os.WriteFile(newjit, b, 0o755) != nil {
			t.Fatalf("copying testjit: %v", err)
		}
		d, pid, r := run(t, newjit)
		// The old program's capture also holds the new program's samples until profd
		// retired it (unnamed, a busy machine's few tens of milliseconds): its ~600 ms of
		// loops count.
		old := profdTally(readCapture(t, outputPath(d, "testjit", pid, FormatCapture)))
		if old.named < 300 || old.funcs["count_small"] == 0 || old.funcs["count_medium"] == 0 {
			t.Errorf("the old program: %d of %d samples in JIT memory named (%v), want its 600 ms of loops", old.named, old.jitMem, old.funcs)
		}
		tl := profdTally(readCapture(t, outputPath(d, "newjit", pid, FormatCapture)))
		t.Logf("old program: %d of %d samples in JIT memory named; new program: %d of %d", old.named, old.jitMem, tl.named, tl.jitMem)
		if tl.jitMem < 500 || tl.named != 0 {
			t.Errorf("the new program: %d of %d samples in JIT memory named (%v), want none of at least 500\nlogs:\n%s",
				tl.named, tl.jitMem, tl.funcs, r.logs.String())
		}
	})
	t.Run("the same executable", func(t *testing.T) {
		// One capture holds both programs: named by the old code, the new program's
		// samples would make most of it named, not the old program's ~600 ms of loops.
		d, pid, r := run(t, testjit)
		tl := profdTally(readCapture(t, outputPath(d, "testjit", pid, FormatCapture)))
		t.Logf("%d of %d samples in JIT memory named: %v", tl.named, tl.jitMem, tl.funcs)
		if tl.named < 300 || tl.jitMem-tl.named < 1000 || 2*tl.named > tl.jitMem {
			t.Errorf("%d of %d samples in JIT memory named (%v); want the old program's ~600 ms of loops named, the new one's ~2 s not\nlogs:\n%s",
				tl.named, tl.jitMem, tl.funcs, r.logs.String())
		}
	})
}

// TestTimeNamespace: testjit in a time namespace whose CLOCK_MONOTONIC is more than a day
// ahead of the host's reuses an address (count_small, then count_large) and tells profd
// through its FIFO, or through a jitdump it writes only as it exits. profd takes the
// namespace's offset off the records' times, so each sample is named by the code that ran
// at its time. (Taken as the records of a clock ahead, they would be timed as read: at the
// exit, for the jitdump, and count_large's samples named count_small.)
func TestTimeNamespace(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"))
	if _, err := os.Stat("/proc/self/timens_offsets"); err != nil {
		t.Skipf("no time namespaces: %v", err)
	}
	testjit, _ := workloads(t)
	for _, tc := range []struct {
		name string
		args func(d dirs) []string
	}{
		{"fifo", func(d dirs) []string { return []string{"-d", d.fifo, "-w", "10000"} }},
		{"jitdump at exit", func(d dirs) []string {
			return []string{"-o", filepath.Join(d.jitdump, ".debug", "jit", "testjit-ns")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDirs(t)
			args := append([]string{"--fork", "--time", "--monotonic", "100000", testjit, "-m", "150", "-r", "2", "-g"}, tc.args(d)...)
			cmd := exec.Command("unshare", args...)
			cmd.Env = append(os.Environ(), "JITDUMPDIR="+d.jitdump)
			gate, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			container := startCmd(t, cmd)
			pid := inNamespace(t, container, "testjit")
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
			r.waitAdded(t, pid, 60*time.Second)
			gate.Close()
			container.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "testjit", pid, FormatCapture))
			checkEachSampled(t, jitTotals(c))
			checkFewUnnamed(t, c)
			if strings.Contains(r.logs.String(), "another clock") {
				t.Errorf("the records were taken as of another clock:\n%s", r.logs.String())
			}
		})
	}
}

// TestUnnamedWarnedAtStop: a JIT that still runs when profd stops is warned about by the
// final flush, after the symbol sources closed: the warning still says where profd looked.
func TestUnnamedWarnedAtStop(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	jit := startChild(t, nil, testjit, "-d", filepath.Join(d.out, "nowhere"), "-m", "100", "-r", "100")
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	waitFor(t, "samples of the JIT", 30*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "profd: target added")
	})
	time.Sleep(time.Second)
	r.stop(t)
	logs := r.logs.String()
	if n := strings.Count(logs, "samples in JIT memory have no symbol"); n != 1 {
		t.Fatalf("%d warnings about unnamed samples, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, fmt.Sprintf("perf-%d.map", jit.pid())) {
		t.Errorf("the final warning does not say where profd looked:\n%s", logs)
	}
}

// TestUnnamedWarnedOnce: testjit announces its code nowhere profd looks; its samples stay
// unnamed, one warning (not one per sample or flush) says how many and where profd looked,
// the summary shows the named share, and the capture keeps the samples for reestimate
// --symbols.
func TestUnnamedWarnedOnce(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	jit := startChild(t, nil, testjit, "-d", filepath.Join(d.out, "nowhere"), "-m", "100", "-r", "2", "-f")
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	logs := r.logs.String()
	if n := strings.Count(logs, "samples in JIT memory have no symbol"); n != 1 {
		t.Errorf("%d warnings about unnamed samples, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, "looked=") || !strings.Contains(logs, fmt.Sprintf("perf-%d.map", jit.pid())) {
		t.Errorf("the warning does not say where profd looked:\n%s", logs)
	}
	if !strings.Contains(r.summary.String(), "of the samples in JIT memory named") {
		t.Errorf("the summary shows no named share:\n%s", r.summary.String())
	}
	c := readCapture(t, outputPath(d, "testjit", jit.pid(), FormatCapture))
	if n := c.UnnamedSamples(); n < 200 {
		t.Errorf("the capture keeps %d unnamed samples, want the ~600 ms of loops", n)
	}
}

// checkEachSampled fails t when a testjit function has fewer samples than its ~150 ms of
// CPU time a phase give at 999 Hz, with margin.
func checkEachSampled(t *testing.T, got map[string]uint64) {
	t.Helper()
	for _, n := range testjitFunctions {
		if got[n] < 30 {
			t.Errorf("%s has %d samples, want its share of ~150 ms per phase: %v", n, got[n], got)
		}
	}
}
