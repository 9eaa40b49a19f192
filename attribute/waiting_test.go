package attribute

import (
	"bytes"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
)

// TestWaitingKeepsEndedCode: samples taken in code that no record named yet wait unnamed;
// the records come (a jitdump written as the JIT exits), but the latest of them is older
// than the last sample (the code ended just after it: its unload is the last record), so
// the samples still wait after NameKept. Reclaim, told what waits (Waiting), keeps the
// code that ended after they were taken, and the final look-up names them. Reclaim cutting
// at the drain alone let the code go first, and the samples stayed unnamed.
func TestWaitingKeepsEndedCode(t *testing.T) {
	for _, keep := range []bool{true, false} {
		a, jit, pid := newTestCounts(t)
		code := bytes.Repeat([]byte{0x90}, 0x40)
		addr := uint64(anonBase)
		a.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{
			{PID: pid, IP: addr + 8}: {N: 30, FirstNs: 2_000_000, LastNs: 31_900_000},
		}})
		o := codeobj.Object{Name: "f", Addr: addr, Size: uint64(len(code)), Code: code, LoadNs: 1_000_000, Source: codeobj.SourceJitdumpFile}
		applyRecords(t, a, jit, pid,
			&jitmap.CodeLoad{Pid: pid, Object: o},
			&jitmap.CodeUnload{Pid: pid, Addr: addr, TimeNs: 31_950_000})
		a.NameKept()
		waiting := a.Waiting()
		if _, ok := waiting[pid]; !ok {
			t.Fatalf("nothing waits after NameKept: %v (the samples' kept span ends past the latest record)", waiting)
		}
		if !keep {
			waiting = nil
		}
		jit.Reclaim(40_000_000, waiting)
		a.NameLate(pid, 40_000_000, true)
		named, unnamed := a.procs[pid].named.named, a.procs[pid].unnamed.samples
		if keep && (named < 29 || unnamed > 1) {
			t.Errorf("with what waits kept: %d named, %d unnamed; want 29 or 30 named", named, unnamed)
		}
		if !keep && named != 0 {
			t.Errorf("reclaimed at the drain: %d named; the test no longer shows what Waiting is for", named)
		}
	}
}

// TestWaitingKeepsHeldCode: the sampler held a sample back at a drain (its chain waits for
// frame information); its code ended meanwhile. Waiting says so, Reclaim keeps the code, and
// the sample, handed over at a later drain, is named by it.
func TestWaitingKeepsHeldCode(t *testing.T) {
	for _, keep := range []bool{true, false} {
		a, jit, pid := newTestCounts(t)
		code := bytes.Repeat([]byte{0x90}, 0x40)
		addr := uint64(anonBase)
		o := codeobj.Object{Name: "f", Addr: addr, Size: uint64(len(code)), Code: code, LoadNs: 1_000_000, Source: codeobj.SourceJitdumpFile}
		applyRecords(t, a, jit, pid,
			&jitmap.CodeLoad{Pid: pid, Object: o},
			&jitmap.CodeUnload{Pid: pid, Addr: addr, TimeNs: 3_000_000})
		a.Add(sampler.Drained{Held: map[uint32]int64{pid: 2_000_000}})
		waiting := a.Waiting()
		if waiting[pid] != 2_000_000 {
			t.Fatalf("waiting %v, want the held sample's time", waiting)
		}
		if !keep {
			waiting = nil
		}
		jit.Reclaim(40_000_000, waiting)
		a.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: addr + 8}: {N: 1, FirstNs: 2_000_000, LastNs: 2_000_000}}})
		a.NameLate(pid, 40_000_000, true)
		named := a.procs[pid].named.named
		if keep && named != 1 {
			t.Errorf("with what is held kept: %d named, want 1", named)
		}
		if !keep && named != 0 {
			t.Errorf("reclaimed at the drain: %d named; the test no longer shows what Held is for", named)
		}
		if got := a.Waiting(); got != nil {
			t.Errorf("handed over: waiting %v", got)
		}
	}
}
