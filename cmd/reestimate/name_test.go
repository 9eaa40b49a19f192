package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
	"github.com/profd/profd/profileio"
)

// TestNameUnnamed: samples profd could not name while the JIT ran are named offline from a
// jitdump (two versions of the code at one address, told apart by time) and a perf map
// (no time: names what nothing else does), and what neither names stays unnamed.
func TestNameUnnamed(t *testing.T) {
	dir := t.TempDir()
	var jd bytes.Buffer
	w, err := jitdumptest.NewWriter(&jd, jitmap.JitdumpHeader{Pid: 7, ElfMach: 62, TimestampNs: 1})
	if err != nil {
		t.Fatal(err)
	}
	code := bytes.Repeat([]byte{0x90}, 0x40)
	w.CodeLoad(&jitmap.CodeLoad{Pid: 7, Object: codeobj.Object{Name: "old", Addr: 0x1000, Size: 0x40, Code: code, LoadNs: 100, CodeIndex: 1}})
	w.CodeUnload(&jitmap.CodeUnload{Pid: 7, Addr: 0x1000, TimeNs: 1000, CodeIndex: 1})
	w.CodeLoad(&jitmap.CodeLoad{Pid: 7, Object: codeobj.Object{Name: "new", Addr: 0x1000, Size: 0x40, Code: code, LoadNs: 1000, CodeIndex: 2}})
	dump := filepath.Join(dir, "jit-7.dump")
	if err := os.WriteFile(dump, jd.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	perfMap := filepath.Join(dir, "perf-7.map")
	if err := os.WriteFile(perfMap, []byte("2000 40 from_the_map\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The process had pid 700 on the host: a capture of one process takes the files' symbols.
	c := &profileio.Capture{Processes: []profileio.Process{{Pid: 700}},
		Objects: []*profileio.CaptureObject{{ID: 0, Pid: 700, Object: codeobj.Object{Name: "known", Addr: 0x9000, Size: 4},
			Samples: []profileio.OffsetCount{{Offset: 0, Count: 3}}}},
		Unnamed: []profileio.UnnamedCount{
			{Pid: 700, IP: 0x1008, FirstNs: 200, LastNs: 900, Count: 5},
			{Pid: 700, IP: 0x1008, FirstNs: 1200, LastNs: 1900, Count: 4},
			{Pid: 700, IP: 0x2010, FirstNs: 50, LastNs: 60, Count: 2},
			{Pid: 700, IP: 0x5000, FirstNs: 50, LastNs: 60, Count: 6},
		}}
	named, left, err := nameUnnamed(c, []string{dump, perfMap}, false)
	if err != nil {
		t.Fatal(err)
	}
	if named != 11 || left != 6 || len(c.Unnamed) != 1 || c.Unnamed[0].IP != 0x5000 {
		t.Fatalf("named %d, left %d (%+v); want 11 named, the 6 at 0x5000 left", named, left, c.Unnamed)
	}
	got := map[string]uint64{}
	for i, o := range c.Objects {
		if o.ID != profileio.ObjectID(i) || o.Pid != 700 {
			t.Errorf("object %d: id %d pid %d", i, o.ID, o.Pid)
		}
		got[o.Object.Name] += o.TotalSamples()
	}
	if got["known"] != 3 || got["old"] != 5 || got["new"] != 4 || got["from_the_map"] != 2 {
		t.Errorf("samples by function %v", got)
	}
	// The capture written with them reads back whole.
	var buf bytes.Buffer
	if err := profileio.WriteCapture(&buf, c); err != nil {
		t.Fatal(err)
	}
	if _, err := profileio.ReadCapture(&buf); err != nil {
		t.Fatal(err)
	}
}

// TestNameUnnamedOwnPids: with captures of several runs merged, a perf map names only the
// samples of the process its name gives, not those of any capture of one process.
func TestNameUnnamedOwnPids(t *testing.T) {
	perfMap := filepath.Join(t.TempDir(), "perf-800.map")
	if err := os.WriteFile(perfMap, []byte("2000 40 from_the_map\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	capture := func() *profileio.Capture {
		return &profileio.Capture{Processes: []profileio.Process{{Pid: 700}},
			Unnamed: []profileio.UnnamedCount{{Pid: 700, IP: 0x2010, FirstNs: 50, LastNs: 60, Count: 2}}}
	}
	if named, _, err := nameUnnamed(capture(), []string{perfMap}, false); err != nil || named != 2 {
		t.Errorf("one capture: named %d (%v), want the 2 samples of its one process", named, err)
	}
	if named, left, err := nameUnnamed(capture(), []string{perfMap}, true); err != nil || named != 0 || left != 2 {
		t.Errorf("own pids: named %d, left %d (%v), want pid 800's map to name nothing of pid 700", named, left, err)
	}
}
