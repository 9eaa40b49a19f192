package oracle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/tools/accuracy/callgrind"
)

// TestRecordLoop1000 runs workloads/loop1000.c under real valgrind and real lli-14 (~15 s:
// most of it is lli-14 compiling under valgrind) and checks the exact counts against what
// the C code implies: a loop of exactly 1000 iterations.
func TestRecordLoop1000(t *testing.T) {
	testenv.Requires(t, testenv.Tool("valgrind"), testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	dir := t.TempDir()
	ir := filepath.Join(dir, "loop1000.ll")
	out, err := exec.Command("clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm",
		"../../../workloads/loop1000.c", "-o", ir).CombinedOutput()
	if err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec, err := Record(ctx, RecordOptions{IR: ir, Dir: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}

	// The parser on a real file: self costs add up to callgrind's own totals, so nothing
	// (such as a call's inclusive cost) is counted twice or lost.
	f, err := os.Open(rec.Callgrind)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := callgrind.Parse(f, callgrind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, in := range prof.Instrs {
		sum += in.Self[0]
	}
	if prof.Pid != rec.Pid || len(prof.Totals) != 1 || sum != prof.Totals[0] || sum != prof.Summary[0] {
		t.Errorf("pid %d (want %d), Σ self %d, totals %v, summary %v", prof.Pid, rec.Pid, sum, prof.Totals, prof.Summary)
	}

	r, err := Load(rec, JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loop, ok := r.Function("loop")
	if !ok {
		t.Fatalf("no function loop in %d functions", len(r.Functions))
	}
	main, ok := r.Function("main")
	if !ok {
		t.Fatal("no function main")
	}
	if loop.Entries != 1 || main.Entries != 1 {
		t.Errorf("entries: loop %d, main %d, want 1 each", loop.Entries, main.Entries)
	}
	for _, fn := range []*Function{loop, main} {
		if len(fn.Imbalances) != 0 || fn.Unaligned != 0 || fn.Undecodable != 0 {
			t.Errorf("%s: imbalances %v, unaligned %d, undecodable %d", fn.Name, fn.Imbalances, fn.Unaligned, fn.Undecodable)
		}
	}
	// The loop body: every instruction of it ran exactly 1000 times, none more.
	var body int
	for a, c := range loop.Counts {
		if c > 1000 {
			t.Errorf("instruction %v ran %d times, more than the loop's 1000 iterations", a, c)
		}
		if c == 1000 {
			body++
		}
	}
	if body < 3 {
		t.Errorf("%d instructions ran 1000 times, want the loop body (≥ 3)", body)
	}
	// The back edge: a conditional jump backwards, evaluated 1000 times, taken 999; its
	// fall-through (the loop exit) runs once.
	var back *Jump
	for i, j := range loop.Jumps {
		if j.Conditional && j.To < j.From {
			back = &loop.Jumps[i]
		}
	}
	if back == nil || back.Count != 999 || back.Executed != 1000 {
		t.Fatalf("back edge %+v, want taken 999 of 1000", back)
	}
	var exit uint64
	for _, e := range loop.Fallthroughs {
		if e.From == back.From {
			exit = e.Count
		}
	}
	if exit != 1 {
		t.Errorf("loop exit fall-through %d, want 1", exit)
	}
	if r.JITInstructions < 1000*uint64(body) {
		t.Errorf("JIT instructions %d below the loop body's %d", r.JITInstructions, 1000*body)
	}
}
