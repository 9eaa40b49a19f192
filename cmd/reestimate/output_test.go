package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func sampleCounts() *countsFile {
	return &countsFile{Version: 1, Functions: []functionCounts{{
		functionHeader: functionHeader{Name: "f \"quoted\"", Addr: "0x1000", Samples: 21, PaddingSamples: 1, IndirectJumps: 1, Cost: 42},
		Blocks: []blockCounts{
			{Start: "0x1000", End: "0x1004", Insts: 2, Samples: 16, Weight: 8, Count: 8, Reachable: true},
			{Start: "0x1004", End: "0x1009", Insts: 1, Samples: 2, Weight: 2, Count: 3, Reachable: true},
			{Start: "0x1009", End: "0x100c", Insts: 2, Samples: 2, Weight: 1, Count: 8, Reachable: true, Exit: true},
			{Start: "0x100d", End: "0x100e", Insts: 1, Exit: true},
		},
		Edges: []edgeCounts{{From: 0, To: 2, Kind: "taken", Count: 5}, {From: 0, To: 1, Kind: "not-taken", Count: 3}, {From: 1, To: 2, Kind: "fallthrough", Count: 3}},
	}, {
		functionHeader: functionHeader{Name: "empty-ish", Addr: "0x2000"},
		Blocks:         []blockCounts{{Start: "0x2000", End: "0x2001", Insts: 1, Reachable: true, Exit: true}},
		Edges:          []edgeCounts{},
	}}}
}

// TestWriters: both output formats against golden files, and JSON write → parse gives back
// what was written.
func TestWriters(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		path := filepath.Join(t.TempDir(), "out")
		if err := writeOutput(path, format, sampleCounts()); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		gold := "testdata/counts." + format
		if *update {
			os.MkdirAll("testdata", 0o755)
			os.WriteFile(gold, got, 0o644)
		}
		want, err := os.ReadFile(gold)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s output differs from %s (go test -update to accept):\n%s", format, gold, got)
		}
		if format == "json" {
			var back countsFile
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			if !reflect.DeepEqual(&back, sampleCounts()) {
				t.Errorf("round trip: got %+v", back)
			}
		}
	}
}

// TestWriteToWholeOrNothing: an output whose writer fails half-way leaves the file as it was,
// and one that succeeds replaces it.
func TestWriteToWholeOrNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prof.txt")
	if err := os.WriteFile(path, []byte("old profile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("repair failed")
	err := writeTo(path, func(w io.Writer) error {
		io.WriteString(w, "half a new profile")
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("writeTo = %v, want the writer's error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old profile\n" {
		t.Errorf("after a failed write the file holds %q", got)
	}
	if err := writeTo(path, func(w io.Writer) error { _, err := io.WriteString(w, "new profile\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new profile\n" {
		t.Errorf("after a write the file holds %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}
