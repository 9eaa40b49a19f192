package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profd/profd/reestimate"
	cfgpkg "github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/cfgjson"
)

// TestRunExample runs the command on the bundled example (real llc-14 code, perf samples) and
// checks what it writes: every sample accounted for, weights pooled over blocks that run
// equally often, and repaired counts conserved at every block.
func TestRunExample(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Inputs: []string{"../../examples/reestimate/score.json"}, Output: filepath.Join(dir, "out.json"),
		DotDir: filepath.Join(dir, "dot"), Solver: "fast", Format: "json"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Output)
	if err != nil {
		t.Fatal(err)
	}
	var out countsFile
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	var in struct {
		Functions []struct {
			Samples map[string]uint64 `json:"samples"`
		} `json:"functions"`
	}
	rawIn, _ := os.ReadFile(cfg.Inputs[0])
	if err := json.Unmarshal(rawIn, &in); err != nil {
		t.Fatal(err)
	}
	if len(out.Functions) != 1 || out.Functions[0].Name != "score" {
		t.Fatalf("functions %+v", out.Functions)
	}
	fn := out.Functions[0]
	var want, got uint64
	for _, n := range in.Functions[0].Samples {
		want += n
	}
	// The weights are pooled (reestimate.ClassAverages): a block in a loop keeps its own
	// samples per instruction; the blocks outside loops share their samples among those that
	// run equally often, which neither adds nor drops any, except half a sample for the code
	// leading to the loops when it drew none.
	funcs, err := cfgjson.Read(bytes.NewReader(rawIn))
	if err != nil {
		t.Fatal(err)
	}
	g, err := reestimate.CodeGraph(funcs[0].Code, funcs[0].Addr, reestimate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loops := cfgpkg.FindLoops(g, cfgpkg.NewDominators(g))
	if len(g.Blocks) != len(fn.Blocks) {
		t.Fatalf("%d blocks in the output, %d in the CFG", len(fn.Blocks), len(g.Blocks))
	}
	var outside uint64
	var outsideWeight float64
	for i, b := range fn.Blocks {
		got += b.Samples
		if loops.Header(i) < 0 {
			outside += b.Samples
			outsideWeight += b.Weight * float64(b.Insts)
			continue
		}
		if w := float64(b.Samples) / float64(b.Insts); math.Abs(w-b.Weight) > 1e-9 {
			t.Errorf("block %s (in a loop): weight %g, want %g", b.Start, b.Weight, w)
		}
	}
	if d := outsideWeight - float64(outside); math.Abs(d) > 1e-9 && math.Abs(d-0.5) > 1e-9 {
		t.Errorf("blocks outside loops: Σ weight × insts %g, want their %d samples (or half a sample more)", outsideWeight, outside)
	}
	if fn.Samples != want || got+fn.PaddingSamples != want {
		t.Errorf("%d samples reported, %d in blocks, %d in padding; the input has %d", fn.Samples, got, fn.PaddingSamples, want)
	}
	in1, out1 := make([]float64, len(fn.Blocks)), make([]float64, len(fn.Blocks))
	for _, e := range fn.Edges {
		out1[e.From] += e.Count
		in1[e.To] += e.Count
	}
	nonzero := false
	for i, b := range fn.Blocks {
		if b.Count > 0 {
			nonzero = true
		}
		if i != 0 && math.Abs(in1[i]-b.Count) > 1e-6 {
			t.Errorf("block %d: count %g, inflow %g", i, b.Count, in1[i])
		}
		if !b.Exit && math.Abs(out1[i]-b.Count) > 1e-6 {
			t.Errorf("block %d: count %g, outflow %g", i, b.Count, out1[i])
		}
	}
	if !nonzero {
		t.Error("every repaired count is zero")
	}
	dot, err := os.ReadFile(filepath.Join(cfg.DotDir, "000-score.dot"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"digraph \"score\"", "cluster_b", "cluster_a", "b6 -> b3", "a6 -> a3"} {
		if !bytes.Contains(dot, []byte(want)) {
			t.Errorf("dot file lacks %q", want)
		}
	}
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte(`{"version":1,"functions":[{"name":"f","addr":"0x10","code":"31c0c3","samples":{"0x99":1}}]}`), 0o644)
	err := Run(context.Background(), &Config{Inputs: []string{in}, Output: filepath.Join(dir, "out"), Solver: "fast", Format: "json"})
	if err == nil || !strings.Contains(err.Error(), "outside the function") || exitCode(err) != exitFailure {
		t.Fatalf("Run = %v (exit %d), want a sample-outside error, exit %d", err, exitCode(err), exitFailure)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Run(ctx, &Config{Inputs: []string{"../../examples/reestimate/score.json"}, Output: filepath.Join(dir, "out"), Solver: "fast", Format: "json"})
	if !errors.Is(err, context.Canceled) || exitCode(err) != exitInterrupted {
		t.Fatalf("Run after cancel = %v (exit %d)", err, exitCode(err))
	}
}

func TestFlags(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"-o file", "-dot dir", "-solver solver", "-format format", "e.g.", "docs/reestimate-json.md", "Exit status",
		"-weights W1,W2,...", "-force-mix", "-pprof file", "reestimate runs/ -o prof.extbinary --format llvm-extbinary", "reestimate a.profd b.profd --weights 1,3"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	tests := []struct {
		args []string
		ok   bool
	}{
		{[]string{"in.json"}, true},
		{[]string{"--dot", "d", "--solver", "reference", "--format", "text", "-"}, true},
		{[]string{"--solver", "simplex", "in.json"}, true},
		{[]string{"--solver", "ssp", "in.json"}, true},
		{[]string{"--solver", "fast", "in.json"}, true}, // the default's older name
		{[]string{}, false},
		{[]string{"a.profd", "b.profd", "--weights", "1,2.5"}, true},
		{[]string{"a.profd", "runs/", "-"}, true},
		{[]string{"-", "a.profd", "-"}, false},
		{[]string{"a.profd", "b.profd", "--weights", "1"}, false},
		{[]string{"a.profd", "--weights", "0"}, false},
		{[]string{"a.profd", "--weights", "-1"}, false},
		{[]string{"a.profd", "--weights", "x"}, false},
		{[]string{"a.profd", "--pprof", "p", "-o", "p"}, false},
		{[]string{"--solver", "magic", "in.json"}, false},
		{[]string{"--format", "xml", "in.json"}, false},
		{[]string{"--dot", "main.go", "in.json"}, false},
	}
	for _, tt := range tests {
		cfg, err := parseFlags(tt.args, &bytes.Buffer{})
		if err == nil {
			err = cfg.Validate()
		}
		if (err == nil) != tt.ok {
			t.Errorf("%q: error %v, want ok=%v", tt.args, err, tt.ok)
		}
	}
}

// TestRunMostBlocks: a function of as many blocks as code may make (cfg.MaxCodeBlocks) gets
// an answer; one of a block more is an error that names the bound.
func TestRunMostBlocks(t *testing.T) {
	dir := t.TempDir()
	run := func(n int) ([]byte, error) {
		var in bytes.Buffer
		in.WriteString(`{"version":1,"functions":[{"name":"big","addr":"0x400000","code":"`)
		in.WriteString(strings.Repeat("7500", n-1)) // jne +0: a block each
		fmt.Fprintf(&in, `c3","samples":{"0x400000":5,"%#x":9}}]}`, 0x400000+2*(n-1))
		path := filepath.Join(dir, "big.json")
		if err := os.WriteFile(path, in.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out.json")
		if err := Run(context.Background(), &Config{Inputs: []string{path}, Output: out, Solver: "fast", Format: "json"}); err != nil {
			return nil, err
		}
		return os.ReadFile(out)
	}
	const n = cfgpkg.MaxCodeBlocks
	raw, err := run(n)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(raw, []byte(`"start":`)); got != n {
		t.Errorf("output has %d blocks, want %d", got, n)
	}
	// One block after another, each the only way to the next: they run equally often and
	// share the 14 samples.
	weight, _ := json.Marshal(14.0 / n)
	ret := fmt.Sprintf(`{"start":"%#x","end":"%#x","insts":1,"samples":9,"weight":%s,`, 0x400000+2*(n-1), 0x400000+2*(n-1)+1, weight)
	if !bytes.Contains(raw, []byte(ret)) {
		t.Errorf("the ret block's samples are missing from the output: no %s", ret)
	}
	if _, err := run(n + 1); !errors.Is(err, cfgpkg.ErrTooManyBlocks) {
		t.Errorf("a block more: %v, want %v", err, cfgpkg.ErrTooManyBlocks)
	}
}
