package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/capmerge"
	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/tools/accuracy/compare"
)

// loopCapture is a capture of the fixture's loop function with samples (offset → count),
// started at startNs (captures of one run's intervals differ by their start).
func loopCapture(startNs int64, samples map[uint64]uint64) *profileio.Capture {
	o := &profileio.CaptureObject{Pid: 1, Object: codeobj.Object{Name: "loop", Addr: 0x7000, Size: uint64(len(loop)), Code: loop}}
	for _, off := range []uint64{0, 2, 4, 7, 9} {
		if n := samples[off]; n > 0 {
			o.Samples = append(o.Samples, profileio.OffsetCount{Offset: off, Count: n})
		}
	}
	c := &profileio.Capture{Version: profileio.CaptureVersion, Processes: []profileio.Process{{Pid: 1, Command: "lli"}},
		Meta: profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999, Host: "h", StartNs: startNs,
			StartTime: time.Unix(1e9, startNs)},
		End: &profileio.CaptureEnd{EndNs: startNs + 1e9, EndTime: time.Unix(1e9, startNs+1e9)}}
	if len(o.Samples) > 0 {
		c.Objects = []*profileio.CaptureObject{o}
	}
	return c
}

func writeCapture(t *testing.T, path string, c *profileio.Capture) {
	t.Helper()
	var buf bytes.Buffer
	if err := profileio.WriteCapture(&buf, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScorePartsMergeIsWhole: two halves of a run's samples, each far from the truth alone
// (one only the loop body's, the other only the entry's and exit's), merged give the whole
// run's counts and so its score; each part is scored on its own samples.
func TestScorePartsMergeIsWhole(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)
	exact, err := readExact(Config{ExactDir: dir}, "w")
	if err != nil {
		t.Fatal(err)
	}
	whole := loopCapture(0, map[uint64]uint64{0: 2, 2: 30, 4: 3, 9: 1})
	a := loopCapture(1, map[uint64]uint64{2: 30, 4: 3})
	b := loopCapture(2, map[uint64]uint64{0: 2, 9: 1})
	empty := loopCapture(3, nil)
	empty.Unnamed = []profileio.UnnamedCount{{Pid: 1, IP: 0x9000, Count: 5}}
	cfg := Config{}
	s, err := scoreParts(cfg, exact, whole, []*profileio.Capture{a, b, empty}, []string{"a", "b", "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Merged != s.Whole || s.MergedSamples != 36 || s.WholeSamples != 36 {
		t.Errorf("merged %v (%d samples), whole %v (%d samples): want the same", s.Merged, s.MergedSamples, s.Whole, s.WholeSamples)
	}
	if s.UnnamedParts != 5 {
		t.Errorf("unnamed in parts %d, want 5", s.UnnamedParts)
	}
	for i, c := range []*profileio.Capture{a, b} {
		funcs, _ := compare.Join(exact, c, cfg.repair())
		if want := compare.Score(funcs, cfg.repaired()).Blocks; s.Parts[i] != want {
			t.Errorf("part %d scored %v, want %v as scored alone", i, s.Parts[i], want)
		}
		if s.Parts[i] == s.Whole {
			t.Errorf("part %d scored as the whole run (%v): the fixture does not tell them apart", i, s.Whole)
		}
	}
	if s.Parts[2] != 0 || len(s.PartSamples) != 3 || s.PartSamples[2] != 0 {
		t.Errorf("a part without the function: scored %v with samples %v, want 0", s.Parts[2], s.PartSamples)
	}
	if _, err := scoreParts(cfg, exact, whole, []*profileio.Capture{a, a}, []string{"a", "a again"}); !errors.Is(err, capmerge.ErrDuplicate) {
		t.Errorf("a part given twice: %v, want capmerge.ErrDuplicate", err)
	}
}

// TestRunParts: -parts prints the split run's row from SAMPLED/NAME.parts/, parts in the
// order of their numbers.
func TestRunParts(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)
	writeCapture(t, filepath.Join(dir, "w.profd"), loopCapture(0, map[uint64]uint64{0: 2, 2: 30, 4: 3, 9: 1}))
	parts := filepath.Join(dir, "w.parts")
	if err := os.Mkdir(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCapture(t, filepath.Join(parts, "10.profd"), loopCapture(1, map[uint64]uint64{2: 30, 4: 3}))
	writeCapture(t, filepath.Join(parts, "2.profd"), loopCapture(2, map[uint64]uint64{0: 2, 9: 1}))
	var out bytes.Buffer
	cfg := Config{ExactDir: dir, SampledDir: dir, Workloads: []string{"w"}, Parts: true, PerFunction: true}
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| w | 2 | 36 / 36 | 0 (0) |", "| +0.000 |\n", "| · part 1 | | 3 |", "| · part 2 | | 33 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	if err := os.Remove(filepath.Join(parts, "2.profd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(parts, "10.profd")); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), cfg, &out); err == nil || !strings.Contains(err.Error(), "no *.profd captures") {
		t.Errorf("no parts: %v", err)
	}
}
