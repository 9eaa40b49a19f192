package daemon

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/symsource/fifo"
)

// TestChurnKeepsNoUnsampledCode: a JIT that keeps loading and unloading code that draws no
// sample (50 000 functions of 256 bytes, each loaded and unloaded through the FIFO), with
// 10 000 functions of 1 KiB left live and idle. The ended functions are let go as the
// records come (the batches that end code drain, and let go what ended before: the next
// such batch leaves at most its own), and after a
// flush the daemon holds none of them (the map has only the live ones, and the next capture
// lists only them: the attribution kept none); no capture carries the code bytes or line
// tables of functions that drew no sample.
func TestChurnKeepsNoUnsampledCode(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const churned, live = 50000, 10000
	d, pid, j := newChurnDaemon(t)
	image := d.locked.counts.Image(pid)

	load := func(i int, addr uint64, size int) {
		t.Helper()
		code := make([]byte, size)
		for k := range code {
			code[k] = 0x90
		}
		code[size-1] = 0xC3
		if err := j.w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{Name: "churn_" + itoa(i), Addr: addr,
			Size: uint64(size), Code: code, LoadNs: monotonicNs(), CodeIndex: uint64(i + 1),
			Lines: []codeobj.LineEntry{{Addr: addr, File: "churn.jit", Line: 1}, {Addr: addr + 8, File: "churn.jit", Line: 2}}}}); err != nil {
			t.Fatal(err)
		}
	}
	unload := func(i int, addr uint64) {
		t.Helper()
		if err := j.w.CodeUnload(&jitmap.CodeUnload{Pid: pid, Tid: pid, TimeNs: monotonicNs(), CodeIndex: uint64(i + 1), Addr: addr}); err != nil {
			t.Fatal(err)
		}
	}
	base := uint64(0x7e0000000000)
	for i := range churned {
		addr := base + uint64(i%64)*256
		load(i, addr, 256)
		unload(i, addr)
	}
	for i := range live {
		load(churned+i, base+1<<24+uint64(i)*1024, 1024)
	}
	// The loads come after every unload in the stream.
	waitFor(t, "the records applied", 20*time.Second, func() bool {
		l, _ := d.parts.jit.Counts(pid)
		return l == live && d.counted.loads.Load() == churned+live
	})
	// Batches that end code let go of what ended before their drain, one every
	// endReclaimGap: the next one lets go of every function ended before it, whatever
	// the last held when the churn stopped.
	time.Sleep(endReclaimGap)
	load(churned+live, base, 256)
	unload(churned+live, base)
	waitFor(t, "the ended functions let go, before any flush", 20*time.Second, func() bool {
		_, e := d.parts.jit.Counts(pid)
		return e <= 1 && d.counted.loads.Load() == churned+live+1
	})

	capture := filepath.Join(d.cfg.OutDir, outputBase(image, pid, 1)+extension[FormatCapture])
	// The live functions and the ended ones not let go yet are in the capture, by name and
	// range; none drew a sample, so none carries code or lines: a few dozen bytes each,
	// where their code alone is 22 MiB.
	d.flush(false)
	c := readCapture(t, capture)
	if len(c.Objects) < live || len(c.Objects) > live+1 {
		t.Fatalf("first capture: %d objects, want %d to %d", len(c.Objects), live, live+1)
	}
	checkNoCode(t, "first capture", c.Objects)
	if st, err := os.Stat(capture); err != nil || st.Size() > 64*(churned+live) {
		t.Errorf("first capture: %v bytes (%v), want at most %d for %d functions that drew no sample", st.Size(), err, 64*(churned+live), churned+live)
	}
	if l, e := d.parts.jit.Counts(pid); l != live || e != 0 {
		t.Errorf("after a flush the map holds %d live and %d ended functions, want %d and 0", l, e, live)
	}
	if held, most := d.parts.jit.HeldBytes(pid), int64(live)*(1024+512); held > most {
		t.Errorf("after a flush the map holds %d bytes, want at most %d (the live functions)", held, most)
	}
	// The next capture lists only the live functions: nothing kept the ended ones.
	d.flush(false)
	c = readCapture(t, capture)
	if len(c.Objects) != live {
		t.Errorf("second capture: %d objects, want the %d live ones", len(c.Objects), live)
	}
	checkNoCode(t, "second capture", c.Objects)
	if st, err := os.Stat(capture); err != nil || st.Size() > 64*live {
		t.Errorf("second capture: %v bytes (%v), want at most %d for an idle target's %d live functions", st.Size(), err, 64*live, live)
	}
}

// newChurnDaemon is a daemon with its real components (a sampler with no targets, the symbol
// stage, a FIFO server) and one target, this process, whose FIFO the returned end writes.
// Only the capture is written. Nothing runs the drains or the flushes: the test calls them.
func newChurnDaemon(t *testing.T) (*daemonRun, uint32, *jitEnd) {
	t.Helper()
	d := newTestRun(t, slog.New(slog.NewTextHandler(io.Discard, nil)), []Format{FormatCapture})
	pid := uint32(os.Getpid()) // the sampler samples no target: no function draws a sample
	d.mu.Lock()
	image := d.locked.counts.AddProcess(pid, monotonicNs())
	d.locked.targets[pid] = &liveTarget{base: outputBase(image, pid, 1)}
	d.mu.Unlock()
	d.parts.symbols.addTarget(pid)
	if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: os.Geteuid(), GID: os.Getegid()}); err != nil {
		t.Fatal(err)
	}
	return d, pid, openJITEnd(t, d.parts.fifo.Dir(), pid)
}

// TestDrainLetsEndedCodeGo: code that ended and drew no sample is let go at the drains,
// a second apart at most, not only at the flushes.
func TestDrainLetsEndedCodeGo(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const churned = 20000
	d, pid, j := newChurnDaemon(t)
	code := make([]byte, 1024)
	for i := range churned {
		addr := uint64(0x7e0000000000) + uint64(i%64)*1024
		if err := j.w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{Name: "churn_" + itoa(i), Addr: addr,
			Size: uint64(len(code)), Code: code, LoadNs: monotonicNs(), CodeIndex: uint64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
		if err := j.w.CodeUnload(&jitmap.CodeUnload{Pid: pid, Tid: pid, TimeNs: monotonicNs(), CodeIndex: uint64(i + 1), Addr: addr}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the records applied", 20*time.Second, func() bool {
		loads := d.counted.loads.Load()
		live, _ := d.parts.jit.Counts(pid)
		return loads == churned && live == 0
	})
	time.Sleep(drainEvery) // the next drain tick lets go of what ended
	d.drainTick()
	if l, e := d.parts.jit.Counts(pid); l != 0 || e != 0 {
		t.Errorf("after a drain the map holds %d live and %d ended functions, want none", l, e)
	}
	if held := d.parts.jit.HeldBytes(pid); held != 0 {
		t.Errorf("after a drain the map holds %d bytes, want 0", held)
	}
}

func checkNoCode(t *testing.T, what string, objs []*profileio.CaptureObject) {
	t.Helper()
	with := 0
	for _, o := range objs {
		if len(o.Object.Code) > 0 || len(o.Object.Lines) > 0 {
			with++
		}
	}
	if with > 0 {
		t.Errorf("%s: %d of %d functions that drew no sample carry code bytes or lines", what, with, len(objs))
	}
}

// TestChurnOfSampledCodeStaysInBudget: a JIT that keeps loading, running and unloading big
// functions (256 KiB, a new one run every round) draws samples in each: the attribution
// keeps every sampled function for the cumulative profile, which the map's budget did not
// see (a 1 MiB churn took root profd to 4 GB in a minute). With --max-symbol-mb 4 the final
// capture holds at most that of code objects, the least sampled functions lose their code
// first (their samples stay in them), no sample is lost, and one warning says so.
func TestChurnOfSampledCodeStaysInBudget(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const budget = 4 << 20
	testjit, _ := workloads(t)
	d := newDirs(t)
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-w", "10000", "-C", "2", "-S", "262144", "-m", "20", "-r", "150")
	pid := jit.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatLLVMText, FormatCapture}, MaxSymbolBytes: budget})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	c := readCapture(t, outputPath(d, "testjit", pid, FormatCapture))
	var held int64
	var named, codeless, sampled uint64
	for _, o := range c.Objects {
		held += o.Object.HeldBytes()
		n := o.TotalSamples()
		named += n
		if n > 0 {
			sampled++
			if o.Object.Code == nil {
				codeless++
			}
		}
	}
	over := unmappedSamples(c, func(m string) bool { return m == profileio.OverBudgetMapping })
	t.Logf("%d sampled functions, %d without their code; %d samples named, %d over budget; objects hold %d bytes",
		sampled, codeless, named, over, held)
	if held > budget {
		t.Errorf("the final capture's code objects hold %d bytes, over the budget of %d", held, budget)
	}
	if sampled < 30 || codeless == 0 {
		t.Fatalf("%d sampled functions, %d of them without code: the churn did not pass the budget\n%s", sampled, codeless, r.logs.String())
	}
	// No sample lost: what the run counted in JIT code is in the capture, named or over budget.
	if want := uint64(lastCounter(r.summary.String(), "samples ")); named+over != want {
		t.Errorf("the capture holds %d samples in JIT code (%d named, %d over budget), the run counted %d", named+over, named, over, want)
	}
	if n := strings.Count(r.logs.String(), "sampled code that ended holds more than its budgets"); n != 1 {
		t.Errorf("%d warnings that sampled code was let go, want 1\n%s", n, r.logs.String())
	}
}
