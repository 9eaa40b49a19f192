package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
)

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update to accept):\n%s", path, got)
	}
}

func TestWriteDot(t *testing.T) {
	g, err := cfg.Build([]byte{0x85, 0xff, 0x74, 0x05, 0xe8, 0, 0, 0, 0, 0xff, 0xc0, 0xc3}, 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	res := &reestimate.Result{Blocks: []uint64{8000, 3000, 8000}, Edges: []uint64{5000, 3000, 3000}, Reachable: []bool{true, true, true}, Scale: 1000}
	var buf bytes.Buffer
	if err := writeDot(&buf, "f\"\\\n", g, []float64{8, 2.5, 9}, res); err != nil {
		t.Fatal(err)
	}
	golden(t, "dot/diamond.dot", buf.Bytes())
	if err := writeDot(&buf, "f", g, []float64{1}, nil); err == nil {
		t.Error("writeDot took 1 weight for 3 blocks")
	}
}
