package daemon

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
	"github.com/profd/profd/symsource/fifo"
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

// newBenchDaemon is a daemon with its real components (a sampler with no targets, a FIFO
// server) and an aggregate of nFuncs sampled functions with code bytes and line tables in
// one process (this one), ready to flush.
func newBenchDaemon(b *testing.B, nFuncs int, logs io.Writer) *daemon {
	b.Helper()
	logger := slog.New(slog.NewTextHandler(logs, nil))
	cfg := Config{Pids: []uint32{uint32(os.Getpid())}, Event: "cpu-clock", OutDir: b.TempDir(), FifoDir: filepath.Join(b.TempDir(), "fifo")}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	d := newDaemon(cfg, logger, io.Discard)
	var err error
	if d.smp, err = sampler.New(sampler.Config{Event: "cpu-clock", Logger: logger}); err != nil {
		b.Fatal(err)
	}
	d.symbols = newSymbolStage(enrich.New(enrich.Config{}), d.applySymbols, logger, 0, 0)
	if d.fifo, err = fifo.Start(context.Background(), fifo.Config{Dir: cfg.FifoDir, Handler: d.symbols.add, Logger: logger}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.closeAll() })

	pid := uint32(os.Getpid())
	d.agg.proc(pid)
	counts := map[sampler.Key]sampler.Count{}
	addr := uint64(0x7f0000000000)
	for i := 0; i < nFuncs; i++ {
		code, insns := emitFunction(4 + i%13)
		lines := []jitmap.LineEntry{
			{Addr: addr, File: "bench.c", Line: 10},
			{Addr: addr + insns[3], File: "bench.c", Line: 11},
			{Addr: addr + insns[len(insns)-4], File: "bench.c", Line: 12},
			{Addr: addr + insns[len(insns)-1], File: "bench.c", Line: 13},
		}
		err := d.jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: jitmap.CodeObject{Name: "fn" + itoa(i), Addr: addr,
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
	d.agg.add(counts)
	if d.agg.procs[pid].unnamed.samples != 0 || d.agg.jitSamples == 0 {
		b.Fatalf("synthetic samples not attributed: %d unnamed", d.agg.procs[pid].unnamed.samples)
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
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.flush(false)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/flush")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n/1e3, "us/function")
}
