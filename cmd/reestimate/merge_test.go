package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/profileio"
)

// writeRuns writes the example function's captures of n runs into dir (run0.profd, …),
// each on a host of its own with the code at another address, and returns their paths and
// the samples of one.
func writeRuns(t *testing.T, dir string, n int) ([]string, uint64) {
	t.Helper()
	var paths []string
	var total uint64
	for i := 0; i < n; i++ {
		path := filepath.Join(dir, "run"+string(rune('0'+i))+".profd")
		meta := profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999, Host: "host" + string(rune('a'+i)), StartTime: time.Unix(1700000000, 0)}
		fn, _ := writeExampleCaptureOf(t, path, meta, uint64(i)*0x100000, func(b int) uint32 { return uint32(10 + b) })
		total = 0
		for _, c := range fn.Samples {
			total += c
		}
		paths = append(paths, path)
	}
	return paths, total
}

// jsonSamples runs conf with --format json and returns each function's samples.
func jsonSamples(t *testing.T, conf *Config) map[string][]uint64 {
	t.Helper()
	conf.Format = formatJSON
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), conf); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(conf.Output)
	if err != nil {
		t.Fatal(err)
	}
	var out countsFile
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint64{}
	for _, f := range out.Functions {
		got[f.Name] = append(got[f.Name], f.Samples)
	}
	return got
}

// TestRunMerge: captures given as files, as a directory and joined on standard input are
// merged into one function whose samples are the sum of the inputs' (weighed), repaired
// once; the raw LLVM profile's total is that sum.
func TestRunMerge(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	os.Mkdir(runs, 0o755)
	paths, one := writeRuns(t, runs, 3)
	out := filepath.Join(dir, "out")

	got := jsonSamples(t, &Config{Inputs: paths, Output: out, Solver: "ssp"})
	if len(got) != 1 || len(got["score"]) != 1 || got["score"][0] != 3*one {
		t.Errorf("three captures: functions %v, want score once with %d samples", got, 3*one)
	}
	// The last run linked under another name, as profd links an output's last interval
	// (<base>.latest.profd): the directory's file is read once.
	if err := os.Link(paths[2], filepath.Join(runs, "run.latest.profd")); err != nil {
		t.Fatal(err)
	}
	got = jsonSamples(t, &Config{Inputs: []string{runs}, Weights: []float64{3}, Output: out, Solver: "ssp"})
	if want := 3 * 3 * one; len(got["score"]) != 1 || got["score"][0] != want {
		t.Errorf("a directory weighed 3: %v, want score once with %d samples", got, want)
	}
	prof := runToProfile(t, &Config{Inputs: []string{paths[0], paths[1]}, Weights: []float64{1, 3}, Output: filepath.Join(dir, "raw.txt"), Solver: "ssp", Raw: true})
	if f := prof.Functions["score"]; f == nil || f.TotalSamples != 4*one {
		t.Errorf("raw LLVM profile of two captures weighed 1,3: %+v, want score with %d samples", f, 4*one)
	}

	// Standard input: the three joined with cat.
	var joined []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, b...)
	}
	withStdin(t, joined, func() {
		got = jsonSamples(t, &Config{Inputs: []string{"-"}, Output: out, Solver: "ssp"})
	})
	if len(got["score"]) != 1 || got["score"][0] != 3*one {
		t.Errorf("three captures joined on standard input: %v, want score once with %d samples", got, 3*one)
	}
}

// withStdin runs f with standard input reading b.
func withStdin(t *testing.T, b []byte, f func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	saved := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = saved }()
	f()
}

// TestRunMergeRefuses: the same capture twice, captures of different events and a cut
// capture among good ones are errors naming the inputs, and nothing is written.
func TestRunMergeRefuses(t *testing.T) {
	dir := t.TempDir()
	paths, _ := writeRuns(t, dir, 2)
	cycles := filepath.Join(dir, "cycles.profd")
	writeExampleCaptureOf(t, cycles, profileio.CaptureMeta{Event: "cycles", PeriodEvents: 100000, Host: "hostz", StartTime: time.Unix(1, 0)}, 0, func(b int) uint32 { return 1 })
	b, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.profd")
	os.WriteFile(cut, b[:len(b)-20], 0o644)
	for _, tc := range []struct {
		name   string
		inputs []string
		want   []string
	}{
		{"the same capture twice", []string{paths[0], paths[1], paths[0]}, []string{paths[0] + " and " + paths[0] + ": the same capture twice"}},
		{"different events", []string{paths[0], cycles}, []string{paths[0] + " sampled cpu-clock at 999 Hz, " + cycles + " sampled cycles every 100000 events", "--force-mix"}},
		{"a cut capture", []string{paths[0], cut}, []string{cut + ": the capture ends at byte", "--salvage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".txt")
			err := Run(context.Background(), &Config{Inputs: tc.inputs, Output: out, Solver: "ssp"})
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want one saying %q", err, w)
				}
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("an output was written (%v)", serr)
			}
		})
	}
	if prof := runToProfile(t, &Config{Inputs: []string{paths[0], cycles}, Output: filepath.Join(dir, "mixed.txt"), Solver: "ssp", ForceMix: true}); prof.Functions["score"] == nil {
		t.Error("--force-mix: no profile of score")
	}
	if prof := runToProfile(t, &Config{Inputs: []string{paths[0], cut}, Output: filepath.Join(dir, "salvaged.txt"), Solver: "ssp", Salvage: true}); prof.Functions["score"] == nil {
		t.Error("--salvage: no profile of score")
	}
}

// TestRunMergePprof: --pprof writes every capture's samples, apart by an input label.
func TestRunMergePprof(t *testing.T) {
	dir := t.TempDir()
	paths, one := writeRuns(t, dir, 2)
	pp := filepath.Join(dir, "all.pb.gz")
	runToProfile(t, &Config{Inputs: paths, Output: filepath.Join(dir, "prof.txt"), Solver: "ssp", Pprof: pp})
	raw, err := os.ReadFile(pp)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	byInput := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Label[inputLabel]) != 1 {
			t.Fatalf("sample without one %q label: %v", inputLabel, s.Label)
		}
		byInput[s.Label[inputLabel][0]] += s.Value[0]
	}
	for _, path := range paths {
		if byInput[path] != int64(one) {
			t.Errorf("pprof samples of %s: %d, want %d (all: %v)", path, byInput[path], one, byInput)
		}
	}
}
