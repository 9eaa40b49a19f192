package daemon

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// hotFunctions are examples/workload/hot.c's hot functions.
var hotFunctions = []string{"sieve", "hash_words", "sort_ints", "matmul"}

// TestLLIEndToEnd profiles lli-14 running examples/workload/hot.c through the jitdump file
// lli writes, while the workload asks for a flush every 100 rounds and a flood of bad
// records goes into the (otherwise unused) FIFO of the process. perf record + perf inject
// --jit profiles the same run. It checks that each SIGUSR1 writes the profiles, that the
// hot functions are named with perf's shares, that the bad records change nothing, that
// LLVM's and pprof's readers accept the outputs, and that profd leaves nothing behind.
func TestLLIEndToEnd(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("llvm-profdata-14"))
	_, hotLL := workloads(t)
	d := newDirs(t)

	lli := startChild(t, []string{"JITDUMPDIR=" + d.jitdump, "PROFD_DIR=" + d.fifo},
		"lli-14", "-jit-kind=mcjit", hotLL, "300", "100")
	pid := lli.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, JitdumpDir: d.jitdump, OutDir: d.out})
	var perf *perfRun
	if perfAvailable() {
		perf = startPerf(t, pid, 999)
	} else {
		t.Log("perf not on PATH: shares are not compared")
	}

	// The first SIGUSR1 writes every output while lli still runs.
	waitFor(t, "the first flush", 60*time.Second, func() bool { return r.flushes() > 0 || !r.running() })
	if !r.running() {
		t.Fatalf("profd stopped before lli's first flush request\n%s\n%s", r.summary.String(), r.logs.String())
	}
	for _, f := range AllFormats {
		if _, err := os.Stat(outputPath(d, "lli", pid, f)); err != nil {
			t.Errorf("after the first SIGUSR1: %v", err)
		}
	}
	flood := floodFIFO(t, filepath.Join(d.fifo, strconv.Itoa(pid)+".map"))

	lli.wait(t, 120*time.Second)
	r.wait(t, 30*time.Second)
	summary := r.summary.String()
	t.Logf("summary:\n%s", summary)

	// Three requests, one flush each (a request can coalesce only with one already pending,
	// and they come a second apart), then the final profile when lli exits.
	if n := strings.Count(summary, "profd flush #"); n < 3 {
		t.Errorf("%d flushes before the final one, want at least 3 (one per SIGUSR1)", n)
	}
	if _, err := os.Stat(d.fifo); !os.IsNotExist(err) {
		t.Errorf("FIFO directory %s still there after profd stopped (err %v)", d.fifo, err)
	}
	if bad := lastCounter(summary, "bad records "); bad < 20000 {
		t.Errorf("summary counts %d bad records, want at least the 20000 bad perf-map lines of the flood", bad)
	}

	c := readCapture(t, outputPath(d, "lli", pid, FormatCapture))
	got := jitTotals(c)
	if names := sortedNames(got); len(names) == 0 || names[0] != "sieve" {
		t.Errorf("hottest JIT functions %v, want sieve first", names)
	}
	for _, n := range hotFunctions {
		if got[n] == 0 {
			t.Errorf("no samples in %s: %v", n, got)
		}
	}
	jit, outside := c.TotalSamples()
	// Outside JIT code: lli compiling the module (~90 samples here, 354 once on a clean clone).
	if jit < 1000 || outside*4 > jit {
		t.Errorf("%d samples in JIT code, %d outside; want most of ~3 s at 999 Hz in JIT code", jit, outside)
	}
	// The valid record sent after the flood is there: the stream resynchronised.
	found := false
	for _, o := range c.Objects {
		if o.Object.Name == flood.marker {
			found = true
		}
	}
	if !found {
		t.Errorf("%s, sent after %d bad records, is not in the capture", flood.marker, flood.bad)
	}

	if perf != nil {
		ps := perf.samples(t, pid, true)
		want := map[string]uint64{}
		var named uint64
		for _, s := range ps {
			want[s.sym]++
		}
		for _, n := range hotFunctions {
			named += want[n]
		}
		// perf inject --jit names lli's code only when perf.data holds the mmap of its
		// jitdump; once, on a busy machine, it named nothing. Then there is nothing to
		// compare with (profd's own naming is checked above).
		if named*2 < uint64(len(ps)) {
			t.Logf("perf inject --jit named %d of perf's %d samples: shares not compared", named, len(ps))
		} else {
			compareShares(t, got, want, hotFunctions, 5)
		}
	}

	checkLLVMOutputs(t, d, "lli", pid, hotFunctions)
	checkDiscriminators(t, d, pid, c)
}

// flood is what floodFIFO sent.
type flood struct {
	bad    int
	marker string
}

// floodFIFO writes bad records to a FIFO in three writer sessions (perf-map garbage, a
// jitdump stream of broken records, random bytes), each ending with a valid record, and
// returns the name of the last one.
func floodFIFO(t testing.TB, path string) flood {
	t.Helper()
	fl := flood{marker: "flood_marker"}
	session := func(data []byte) {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		defer unix.Close(fd)
		for len(data) > 0 {
			n, err := unix.Write(fd, data)
			if err != nil {
				t.Fatalf("write %s: %v", path, err)
			}
			data = data[n:]
		}
	}
	// perf-map text: lines that are not "START SIZE NAME", one very long line, then a good one.
	var text bytes.Buffer
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&text, "zz%d not-hex name\n", i)
		fl.bad++
	}
	text.WriteString("10 " + strings.Repeat("f", 200000) + "\n")
	fl.bad++
	text.WriteString("0x1000 0x10 flood_text_ok\n")
	session(text.Bytes())

	// jitdump: a good header, records with impossible sizes and unknown ids.
	var jd bytes.Buffer
	le := binary.LittleEndian
	hdr := make([]byte, 40)
	le.PutUint32(hdr[0:], 0x4A695444) // JiTD
	le.PutUint32(hdr[4:], 1)
	le.PutUint32(hdr[8:], 40)
	le.PutUint32(hdr[12:], 62) // EM_X86_64
	jd.Write(hdr)
	for i := 0; i < 5000; i++ {
		rec := make([]byte, 16)
		le.PutUint32(rec[0:], 0)  // CODE_LOAD
		le.PutUint32(rec[4:], 16) // too short for a CODE_LOAD body
		jd.Write(rec)
		fl.bad++
	}
	session(jd.Bytes())

	// Random bytes, then a perf-map line naming the marker.
	junk := make([]byte, 1<<20)
	seed := uint64(1)
	for i := range junk {
		seed = seed*6364136223846793005 + 1442695040888963407
		junk[i] = byte(seed >> 56)
		if junk[i] == '\n' {
			fl.bad++
		}
	}
	// A text line first: the reader may see no end of file between this session and the
	// jitdump one before it (it was busy when the writer reopened), and text is what tells
	// a perf-map session from the rest of a jitdump one.
	copy(junk, "not a symbol line\n")
	fl.bad++
	session(append(junk, []byte("\n0x2000 0x10 "+fl.marker+"\n")...))
	return fl
}

// checkLLVMOutputs runs llvm-profdata-14 on both LLVM files and pprof's validator on the
// pprof file of one process; each must name every function in names.
func checkLLVMOutputs(t testing.TB, d dirs, image string, pid int, names []string) {
	t.Helper()
	checkLLVMOutputsAt(t, strings.TrimSuffix(outputPath(d, image, pid, FormatCapture), extension[FormatCapture]), names)
}

// checkLLVMOutputsAt is checkLLVMOutputs of the outputs named base.<ext>.
func checkLLVMOutputsAt(t testing.TB, base string, names []string) {
	t.Helper()
	for _, f := range []Format{FormatLLVMText, FormatLLVMExtBinary} {
		path := base + extension[f]
		out, err := exec.Command("llvm-profdata-14", "show", "--sample", "--all-functions", path).CombinedOutput()
		if err != nil {
			t.Errorf("llvm-profdata-14 show --sample %s: %v\n%s", path, err, out)
			continue
		}
		for _, n := range names {
			if !bytes.Contains(out, []byte("Function: "+n+":")) {
				t.Errorf("llvm-profdata-14 shows no %s in %s:\n%s", n, path, out)
			}
		}
	}
	path := base + extension[FormatPprof]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gzip.NewReader(bytes.NewReader(data)); err != nil {
		t.Errorf("%s is not gzipped: %v", path, err)
	}
	p, err := profile.ParseData(data)
	if err != nil {
		t.Fatalf("pprof %s: %v", path, err)
	}
	if err := p.CheckValid(); err != nil {
		t.Errorf("pprof %s: CheckValid: %v", path, err)
	}
	fns := map[string]bool{}
	for _, f := range p.Function {
		fns[f.Name] = true
	}
	for _, n := range names {
		if !fns[n] {
			t.Errorf("pprof %s has no function %s", path, n)
		}
	}
	if gobin, err := exec.LookPath("go"); err == nil {
		out, err := exec.Command(gobin, "tool", "pprof", "-top", path).CombinedOutput()
		if err != nil {
			t.Errorf("go tool pprof -top %s: %v\n%s", path, err, out)
		} else if !bytes.Contains(out, []byte(names[0])) {
			t.Errorf("go tool pprof -top shows no %s:\n%s", names[0], out)
		}
	}
}
