package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/sampler"
	"github.com/profd/profd/symsource/fifo"
	"github.com/profd/profd/symsource/files"
	"golang.org/x/sys/unix"
)

// emitFunction writes a function of real x86-64 code with a loop, a branch inside it and
// `adds` filler instructions, returning its bytes and the offsets of its instructions.
//
//	xor eax,eax; test rdi,rdi; jz done
//	loop: add rax,1 (×adds); test al,1; jz skip; add rax,3; skip: dec rdi; jnz loop
//	done: ret
func emitFunction(adds int) (code []byte, insns []uint64) {
	emit := func(b ...byte) {
		insns = append(insns, uint64(len(code)))
		code = append(code, b...)
	}
	emit(0x31, 0xC0)
	emit(0x48, 0x85, 0xFF)
	jz := len(code)
	emit(0x74, 0) // patched below
	loop := len(code)
	for i := 0; i < adds; i++ {
		emit(0x48, 0x83, 0xC0, 0x01)
	}
	emit(0xA8, 0x01)             // test al,1
	emit(0x74, 4)                // jz skip (over the 4-byte add)
	emit(0x48, 0x83, 0xC0, 0x03) // add rax,3
	emit(0x48, 0xFF, 0xCF)       // skip: dec rdi
	jnz := len(code)
	emit(0x0F, 0x85, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(code[jnz+2:], uint32(int32(loop-(jnz+6))))
	done := len(code)
	emit(0xC3)
	code[jz+1] = byte(done - (jz + 2))
	return code, insns
}

// newTestRun is a run of this process with its real components but no watcher (a sampler
// with no target, a FIFO server, a file tailer), writing formats (nil: all) into a
// directory of its own; the test's cleanup closes it.
func newTestRun(b testing.TB, logger *slog.Logger, formats []Format) *daemonRun {
	b.Helper()
	cfg := Config{Pids: []uint32{uint32(os.Getpid())}, Event: "cpu-clock", OutDir: b.TempDir(),
		FifoDir: filepath.Join(b.TempDir(), "fifo"), Formats: formats}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	d := newDaemonRun(cfg, logger, io.Discard)
	var err error
	if d.parts.smp, err = sampler.New(sampler.Config{Event: "cpu-clock", Logger: logger}); err != nil {
		b.Fatal(err)
	}
	d.parts.symbols = newSymbolStage(enrich.New(enrich.Options{}), d.applySymbols, logger, 0, 0)
	if d.parts.fifo, err = fifo.Start(context.Background(), fifo.Config{Dir: cfg.FifoDir, Handler: d.parts.symbols.add, Logger: logger}); err != nil {
		b.Fatal(err)
	}
	if d.parts.files, err = files.Start(context.Background(), files.Config{Handler: d.parts.symbols.add, Logger: logger}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.closeAll() })
	return d
}

// newBenchDaemon is a daemon with its real components (a sampler with no targets, a FIFO
// server) and the counts of nFuncs sampled functions with code bytes and line tables in
// one process (this one), ready to flush.
func newBenchDaemon(b testing.TB, nFuncs int, logs io.Writer) *daemonRun {
	b.Helper()
	d := newTestRun(b, slog.New(slog.NewTextHandler(logs, nil)), nil)

	pid := uint32(os.Getpid())
	image := d.locked.counts.AddProcess(pid, monotonicNs())
	d.locked.targets[pid] = &liveTarget{base: outputBase(image, pid, 1)}
	counts := map[sampler.Key]sampler.Count{}
	addr := uint64(0x7f0000000000)
	for i := 0; i < nFuncs; i++ {
		code, insns := emitFunction(4 + i%13)
		lines := []codeobj.LineEntry{
			{Addr: addr, File: "bench.c", Line: 10},
			{Addr: addr + insns[3], File: "bench.c", Line: 11},
			{Addr: addr + insns[len(insns)-4], File: "bench.c", Line: 12},
			{Addr: addr + insns[len(insns)-1], File: "bench.c", Line: 13},
		}
		err := d.parts.jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "fn" + itoa(i), Addr: addr,
			Size: uint64(len(code)), Code: code, Lines: lines, LoadNs: 1, CodeIndex: uint64(i + 1)}})
		if err != nil {
			b.Fatal(err)
		}
		for j, off := range insns {
			now := monotonicNs()
			counts[sampler.Key{PID: pid, IP: addr + off}] = sampler.Count{N: uint64(1 + (i+j)%7), FirstNs: now, LastNs: now}
		}
		addr += uint64(len(code)+15) &^ 15
	}
	d.locked.counts.Add(sampler.Drained{Counts: counts})
	if tot := d.locked.counts.Totals(); tot.Unnamed != 0 || tot.JIT == 0 {
		b.Fatalf("synthetic samples not attributed: %d unnamed", tot.Unnamed)
	}
	return d
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return string(buf[n:])
}

// BenchmarkFlush10kFunctions is one flush (every output format: CFG recovery and
// reestimation of each function for the LLVM profiles, pprof, the capture) of 10 000 sampled
// functions with code bytes and line tables.
func BenchmarkFlush10kFunctions(b *testing.B) {
	testenv.Requires(b, testenv.Root)
	const n = 10000
	var logs testenv.SyncBuffer
	d := newBenchDaemon(b, n, &logs)
	d.flush(false) // every function goes through CFG recovery and repair
	if want := "objects=10000 reestimated=10000 "; !strings.Contains(logs.String(), want) {
		b.Fatalf("flush log lacks %q:\n%s", want, logs.String())
	}
	// repaired: every flush repairs every function again, as when all drew new samples;
	// unchanged: no function drew a sample since the last flush, whose repairs it reuses.
	for _, run := range []struct {
		name  string
		fresh bool
	}{{"repaired", true}, {"unchanged", false}} {
		b.Run(run.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if run.fresh {
					b.StopTimer()
					d.flushing.repairCaches = map[string]*profgen.RepairCache{}
					b.StartTimer()
				}
				d.flush(false)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/flush")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n/1e3, "us/function")
		})
	}
}

// jitEnd is the JIT's side of its two FIFOs in tests: the symbols FIFO it writes (a
// jitdump header first) and the reply FIFO it reads.
type jitEnd struct {
	w     *jitdumptest.Writer
	wf    *os.File
	reply *os.File
	buf   []byte
}

func openJITEnd(t testing.TB, dir string, pid uint32) *jitEnd {
	t.Helper()
	wf, err := os.OpenFile(filepath.Join(dir, itoa(int(pid))+".map"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := os.OpenFile(filepath.Join(dir, itoa(int(pid))+".reply"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jitdumptest.NewWriter(wf, jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: pid, TimestampNs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wf.Close(); reply.Close() })
	return &jitEnd{w: w, wf: wf, reply: reply}
}

// flushReply is a decoded reply.
type flushReply struct {
	id     uint64
	status int32
	paths  []string
}

// next reads the next reply (blocking).
func (j *jitEnd) next(t testing.TB) flushReply {
	t.Helper()
	for {
		if len(j.buf) >= 24 {
			total := int(binary.NativeEndian.Uint32(j.buf[4:]))
			if binary.NativeEndian.Uint32(j.buf) != 0x31524650 || total < 24 {
				t.Fatalf("bad reply % x", j.buf[:24])
			}
			if len(j.buf) >= total {
				r := flushReply{id: binary.NativeEndian.Uint64(j.buf[8:]), status: int32(binary.NativeEndian.Uint32(j.buf[16:]))}
				if paths := strings.TrimSuffix(string(j.buf[24:total]), "\x00"); paths != "" {
					r.paths = strings.Split(paths, "\x00")
				}
				j.buf = j.buf[total:]
				return r
			}
		}
		var b [8192]byte
		n, err := j.reply.Read(b[:])
		if err != nil {
			t.Fatalf("reading replies: %v", err)
		}
		j.buf = append(j.buf, b[:n]...)
	}
}

// askingJIT makes the process itself a target of d with a FIFO, starts d's flushing
// goroutine, and returns the JIT's end of the FIFOs.
func askingJIT(tb testing.TB, d *daemonRun) *jitEnd {
	tb.Helper()
	pid := uint32(os.Getpid())
	d.parts.symbols.addTarget(pid)
	if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: os.Geteuid(), GID: os.Getegid()}); err != nil {
		tb.Fatal(err)
	}
	d.wake.flushWG.Add(1)
	go d.flushLoop()
	tb.Cleanup(func() { close(d.wake.flushReq); d.wake.flushWG.Wait() })
	return openJITEnd(tb, d.parts.fifo.Dir(), pid)
}

// TestFlushRequestsPaced: a JIT that asks for its profiles again as soon as it has them is
// answered after a pause of requestPause times the last flush's time. Each flush's whole
// time is at least its write's (its "took"), so five requests in a row take at least four
// times the first four writes' time and the last's, however loaded the machine.
func TestFlushRequestsPaced(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	var logs testenv.SyncBuffer
	d := newBenchDaemon(t, 300, &logs)
	pid := uint32(os.Getpid())
	j := askingJIT(t, d)
	start := time.Now()
	for i := uint64(1); i <= 5; i++ {
		if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: i, Formats: fifo.FlushLLVMExtBinary}); err != nil {
			t.Fatal(err)
		}
		if r := j.next(t); r.id != i || r.status != 0 {
			t.Fatalf("reply %+v to request %d", r, i)
		}
	}
	total := time.Since(start)
	var took []time.Duration
	for _, m := range regexp.MustCompile(`msg="profd: flushed" .* took=(\S+)`).FindAllStringSubmatch(logs.String(), -1) {
		dur, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, dur)
	}
	if len(took) != 5 {
		t.Fatalf("%d flushes logged for 5 requests:\n%s", len(took), logs.String())
	}
	want := took[4]
	for _, d := range took[:4] {
		want += (1 + requestPause) * d
	}
	if total < want {
		t.Errorf("5 requests in a row answered in %v, want at least %v (writes took %v)", total, want, took)
	}
}

// BenchmarkFlushRequestReply is a JIT's flush request through its FIFO answered on its reply
// FIFO with the path of its profile, for a target with 1000 sampled functions: the time from
// the request's write to the reply's read, asking for the LLVM ext-binary profile (what a
// re-optimising JIT reads) and for every output. The JIT asks again as soon as it has its
// answer ("at-once": profd pauses between such flushes, requestPause), or after four times
// as long as its last answer took ("paused", as a JIT that runs its code in between):
// cpu-cores is the CPU the process (profd's flushes, mostly) spent meanwhile, per second.
func BenchmarkFlushRequestReply(b *testing.B) {
	for _, c := range []struct {
		name    string
		formats uint32
		paths   int
		pause   bool
	}{
		{"llvm-extbinary/at-once", fifo.FlushLLVMExtBinary, 1, false},
		{"llvm-extbinary/paused", fifo.FlushLLVMExtBinary, 1, true},
		{"all/at-once", 0, len(AllFormats), false},
	} {
		b.Run(c.name, func(b *testing.B) { benchFlushRequestReply(b, c.formats, c.paths, c.pause) })
	}
}

func benchFlushRequestReply(b *testing.B, formats uint32, paths int, pause bool) {
	testenv.Requires(b, testenv.Root)
	d := newBenchDaemon(b, 1000, io.Discard)
	pid := uint32(os.Getpid())
	j := askingJIT(b, d)
	lat := make([]time.Duration, 0, b.N)
	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	began := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pause && i > 0 {
			time.Sleep(4 * lat[i-1])
		}
		start := time.Now()
		if err := j.w.FlushRequest(&jitmap.FlushRequest{Pid: pid, Tid: pid, ID: uint64(i + 1), Formats: formats}); err != nil {
			b.Fatal(err)
		}
		r := j.next(b)
		lat = append(lat, time.Since(start))
		if r.id != uint64(i+1) || r.status != 0 || len(r.paths) != paths {
			b.Fatalf("reply %+v to request %d", r, i+1)
		}
	}
	b.StopTimer()
	wall := time.Since(began)
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-cores")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}

// TestFlushRepairsOnlyWhatChanged: a flush of a cumulative profile whose functions drew no
// sample since the last one takes their repaired counts from that flush's, and writes the
// same LLVM profile.
func TestFlushRepairsOnlyWhatChanged(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	var logs testenv.SyncBuffer
	d := newBenchDaemon(t, 500, &logs)
	d.flush(false)
	base := filepath.Join(d.cfg.OutDir, outputBase(d.locked.counts.Image(uint32(os.Getpid())), uint32(os.Getpid()), 1))
	first, err := os.ReadFile(base + extension[FormatLLVMText])
	if err != nil {
		t.Fatal(err)
	}
	d.flush(false)
	second, err := os.ReadFile(base + extension[FormatLLVMText])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("the second flush's LLVM profile differs from the first's")
	}
	if !strings.Contains(logs.String(), "reestimated=500 cached=0 ") || !strings.Contains(logs.String(), "reestimated=500 cached=500 ") {
		t.Errorf("want a first flush that repairs the 500 functions and a second that takes them from it:\n%s", logs.String())
	}
}
