package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/tools/accuracy/oracle"
)

// loop: xor eax,eax; inc eax; cmp eax,10; jne -7; ret.
var loop = []byte{0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3}

func writeFixture(t *testing.T, dir string) {
	t.Helper()
	const a = 0x1000
	exact := &oracle.Result{Version: oracle.Version, Event: "Ir", Functions: []oracle.Function{{
		Name: "loop", Addr: a, Size: uint64(len(loop)), Code: loop, Entries: 1, Instructions: 32,
		Counts: map[oracle.Addr]uint64{a: 1, a + 2: 10, a + 4: 10, a + 7: 10, a + 9: 1},
		Jumps:  []oracle.Jump{{From: a + 7, To: a + 2, Count: 9, Conditional: true, Executed: 10}},
		Fallthroughs: []oracle.Edge{{From: a, To: a + 2, Count: 1}, {From: a + 2, To: a + 4, Count: 10},
			{From: a + 4, To: a + 7, Count: 10}, {From: a + 7, To: a + 9, Count: 1}},
	}}}
	var buf bytes.Buffer
	if err := exact.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.json"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &profileio.Capture{Version: profileio.CaptureVersion, Objects: []*profileio.CaptureObject{{
		Pid:     1,
		Object:  codeobj.Object{Name: "loop", Addr: 0x7000, Size: uint64(len(loop)), Code: loop},
		Samples: []profileio.OffsetCount{{Offset: 2, Count: 30}, {Offset: 4, Count: 3}, {Offset: 9, Count: 1}},
	}}, Processes: []profileio.Process{{Pid: 1, Command: "lli"}}}
	buf.Reset()
	if err := profileio.WriteCapture(&buf, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.profd"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)
	var out bytes.Buffer
	cfg := Config{ExactDir: dir, SampledDir: dir, Workloads: []string{"w"}, PerFunction: true}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| w | 1 | 34 |") || !strings.Contains(out.String(), "| · loop | 32 instrs | 34 |") {
		t.Errorf("table:\n%s", out.String())
	}
	if err := (&Config{ExactDir: dir, SampledDir: dir}).Validate(); err == nil {
		t.Error("no workloads: Validate passed")
	}
	cfg.Workloads = []string{"missing"}
	if err := Run(context.Background(), cfg, &out); err == nil {
		t.Error("missing workload: no error")
	}
}

// TestRunInsts: -blocks -insts prints each instruction of the fixture's loop with its own
// samples, disassembled.
func TestRunInsts(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)
	var out bytes.Buffer
	cfg := Config{ExactDir: dir, SampledDir: dir, Workloads: []string{"w"}, Blocks: true, Insts: true}
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0x2     30  inc eax", "0x4      3  cmp eax, 0xa", "0x9      1  ret"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no line %q in:\n%s", want, out.String())
		}
	}
}
