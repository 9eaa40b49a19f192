package gdbjit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
)

// jitdumpObjects decodes the jitdump lli-14 writes, waiting for its first code load.
func jitdumpObjects(t *testing.T, dir string, pid int) []codeobj.Object {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		dumps, _ := filepath.Glob(filepath.Join(dir, ".debug", "jit", "*", "jit-*.dump"))
		if len(dumps) == 1 {
			b, err := os.ReadFile(dumps[0])
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := jitmap.NewDecoder(uint32(pid), codeobj.SourceJitdumpFile, jitmap.DecoderOptions{}).Write(b)
			var objs []codeobj.Object
			for _, ev := range evs {
				if l, ok := ev.(*jitmap.CodeLoad); ok {
					objs = append(objs, l.Object)
				}
			}
			if len(objs) > 0 {
				return objs
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("lli-14 wrote no code load in 20 s")
	return nil
}

// TestDebugLLI14 reads a running lli-14's registered debug objects and checks them against
// the jitdump of the same run: every jitdump line entry has a row at its address with its
// line, every code object is covered and starts a subprogram with a declared line, and
// merging gives loop code discriminators.
func TestDebugLLI14(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	cmd, dir := testenv.MatmulMCJIT(t, "../..")
	objs := jitdumpObjects(t, dir, cmd.Process.Pid)
	r := NewReader(Options{})
	info, err := r.Debug(uint32(cmd.Process.Pid))
	rows := info.Lines
	if err != nil {
		t.Fatal(err)
	}
	merged := 0
	for i := range objs {
		o := &objs[i]
		if jitmap.FirstLineAt(info.Subprograms, o.Addr) == 0 {
			t.Errorf("%s %#x: no subprogram with a declared line starts there", o.Name, o.Addr)
		}
		if !jitmap.Covers(o, rows) {
			t.Errorf("%s %#x+%d: no debug row inside", o.Name, o.Addr, o.Size)
		}
		for _, l := range o.Lines {
			found := false
			for _, row := range rows {
				if row.Addr == l.Addr && row.Line == l.Line {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: jitdump line %d at %#x has no debug row", o.Name, l.Line, l.Addr)
			}
		}
		merged += jitmap.MergeDiscriminators(o, rows)
	}
	if merged == 0 {
		t.Fatal("no discriminator merged into matmul's jitdump lines")
	}
	// A second read decodes nothing again.
	if _, err := r.Debug(uint32(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Objects == 0 || st.CachedReads != st.Objects || st.BadObjects != 0 {
		t.Fatalf("stats %+v: want every object decoded once, then read from the cache", st)
	}
	t.Logf("%d objects, %d rows, %d discriminators merged", len(objs), len(rows), merged)
}

// TestLinesNoDescriptor: a process without the GDB JIT interface (this test binary) is
// told apart from a failure, and asked again (once for each code load) it costs nothing.
func TestLinesNoDescriptor(t *testing.T) {
	r := NewReader(Options{})
	pid := uint32(os.Getpid())
	if _, err := r.Debug(pid); !errors.Is(err, ErrNoDescriptor) {
		t.Fatalf("error %v, want ErrNoDescriptor", err)
	}
	// Past its first second, when it is looked at again only once a second.
	r.procs[pid].firstLook = r.procs[pid].lookedAt.Add(-noDescriptorRetry)
	if n := testing.AllocsPerRun(100, func() { r.Debug(pid) }); n != 0 {
		t.Errorf("%v allocations to tell again that pid %d has no descriptor, want 0", n, pid)
	}
}
