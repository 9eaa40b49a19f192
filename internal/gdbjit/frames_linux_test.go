package gdbjit

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/procmem"
	"github.com/profd/profd/internal/testenv"
)

// TestFrameSectionsLLI14 finds the .eh_frame sections a running lli-14 loaded for the objects
// it registered. Read from its memory (relocated there), they describe the code of every
// function its jitdump announced; a second walk reads no object again.
func TestFrameSectionsLLI14(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	cmd, dir := testenv.MatmulMCJIT(t, "../..")
	pid := uint32(cmd.Process.Pid)
	objs := jitdumpObjects(t, dir, cmd.Process.Pid)
	r := NewReader(Options{})
	secs, err := r.FrameSections(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) == 0 {
		t.Fatal("no .eh_frame section found")
	}
	var tables []*cfi.Table
	for _, s := range secs {
		b, err := procmem.Read(pid, s.Addr, int(s.Size))
		if err != nil {
			t.Fatal(err)
		}
		tab, err := cfi.Read(b, s.Addr)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		tables = append(tables, tab)
	}
	for _, o := range objs {
		described := false
		for _, tab := range tables {
			if _, ok := tab.Find(o.Addr); ok {
				described = true
			}
		}
		if !described {
			t.Errorf("%s at %#x: no frame description", o.Name, o.Addr)
		}
	}
	before := r.Stats()
	again, err := r.FrameSections(pid)
	if err != nil || len(again) != len(secs) {
		t.Fatalf("second walk: %v sections, %v", again, err)
	}
	if st := r.Stats(); st.CachedReads-before.CachedReads < uint64(len(secs)) {
		t.Errorf("second walk read objects again: stats %+v, then %+v", before, st)
	}
	t.Logf("%d sections describe the %d functions of the jitdump", len(secs), len(objs))
}

// TestFrameSectionsNoDescriptor: a process without the GDB JIT interface has no sections,
// and registers nothing.
func TestFrameSectionsNoDescriptor(t *testing.T) {
	r := NewReader(Options{})
	if _, err := r.FrameSections(uint32(os.Getpid())); !errors.Is(err, ErrNoDescriptor) {
		t.Fatalf("error %v, want ErrNoDescriptor", err)
	}
	if r.Registers(uint32(os.Getpid())) {
		t.Error("Registers is true for a process without the interface")
	}
}

// TestFrameSection reads a debug object lli-14 registered: its .eh_frame, at the address the
// JIT loaded it.
func TestFrameSection(t *testing.T) {
	obj, err := os.ReadFile(mcjitObject)
	if err != nil {
		t.Fatal(err)
	}
	if s := frameSection(bytes.NewReader(obj), int64(len(obj))); s != (Section{Addr: 0x7fc415d65080, Size: 0x70}) {
		t.Fatalf("section %+v, want .eh_frame at 0x7fc415d65080, 0x70 bytes (readelf -S)", s)
	}
}

// FuzzFrameSection reads arbitrary objects' section headers (a registered object is
// untrusted): no panic, and a section found is loaded somewhere and not empty.
func FuzzFrameSection(f *testing.F) {
	obj, err := os.ReadFile(mcjitObject)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(obj)
	f.Add(obj[:64])
	f.Fuzz(func(t *testing.T, b []byte) {
		s := frameSection(bytes.NewReader(b), int64(len(b)))
		if s != (Section{}) && (s.Addr == 0 || s.Size == 0) {
			t.Fatalf("section %+v", s)
		}
	})
}
