package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/profd/profd/capmerge"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/tools/accuracy/compare"
	"github.com/profd/profd/tools/accuracy/oracle"
)

// PartsScore is one workload's split run scored: each part repaired alone, the parts merged
// (capmerge) and repaired once, and the whole run's capture repaired, all on the functions
// the whole run joins with the exact profile.
type PartsScore struct {
	Parts       []float64 // each part's repaired block overlap, in the parts' order
	PartSamples []uint64  // each part's JIT samples
	// Merged and Whole are the repaired block overlaps of the merge and of the whole run.
	Merged, Whole float64
	// MergedSamples and WholeSamples are the JIT samples of the merged and of the whole
	// capture; UnnamedParts the parts' samples in JIT memory no code object of their part
	// named, NamedLate those of them the merge named by another part's code (the rest it
	// leaves out).
	MergedSamples, WholeSamples, UnnamedParts, NamedLate uint64
}

// Mean is the parts' mean repaired block overlap.
func (s PartsScore) Mean() float64 {
	var sum float64
	for _, v := range s.Parts {
		sum += v
	}
	return sum / float64(len(s.Parts))
}

// runParts prints the table of the split runs: per workload, the parts in
// SAMPLED/NAME.parts/ repaired each alone, merged and repaired once, and the whole run's
// SAMPLED/NAME.profd repaired.
func runParts(ctx context.Context, cfg Config, w io.Writer) error {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| workload | parts | JIT samples: merged / whole | unnamed in parts (named by the merge) | parts repaired block: mean (min–max) | merged repaired block | whole repaired block | merged − parts' mean | merged − whole |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var sums [3]float64
	for _, name := range cfg.Workloads {
		if err := ctx.Err(); err != nil {
			return err
		}
		exact, err := readExact(cfg, name)
		if err != nil {
			return err
		}
		whole, err := readCapture(filepath.Join(cfg.SampledDir, name+".profd"))
		if err != nil {
			return err
		}
		paths, err := partFiles(filepath.Join(cfg.SampledDir, name+".parts"))
		if err != nil {
			return err
		}
		parts := make([]*profileio.Capture, len(paths))
		for i, p := range paths {
			if parts[i], err = readCapture(p); err != nil {
				return err
			}
		}
		s, err := scoreParts(cfg, exact, whole, parts, paths)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		mean := s.Mean()
		fmt.Fprintf(w, "| %s | %d | %d / %d | %d (%d) | %s (%s–%s) | %s | %s | %s | %s |\n", name, len(s.Parts),
			s.MergedSamples, s.WholeSamples, s.UnnamedParts, s.NamedLate, num(mean), num(slices.Min(s.Parts)), num(slices.Max(s.Parts)),
			num(s.Merged), num(s.Whole), signed(s.Merged-mean), signed(s.Merged-s.Whole))
		if cfg.PerFunction {
			for i, v := range s.Parts {
				fmt.Fprintf(w, "| · part %d | | %d | | %s | | | | |\n", i+1, s.PartSamples[i], num(v))
			}
		}
		for i, v := range []float64{mean, s.Merged, s.Whole} {
			sums[i] += v
		}
	}
	n := float64(len(cfg.Workloads))
	m := [3]float64{sums[0] / n, sums[1] / n, sums[2] / n}
	fmt.Fprintf(w, "| **mean** | | | | **%s** | **%s** | **%s** | **%s** | **%s** |\n", num(m[0]), num(m[1]), num(m[2]), signed(m[1]-m[0]), signed(m[1]-m[2]))
	return nil
}

// scoreParts scores parts (read from the files names) each alone, merged and the whole
// capture under the command line's repair. The functions scored are those the whole run
// joins: a part that never sampled one of them scores 0 on it.
func scoreParts(cfg Config, exact *oracle.Result, whole *profileio.Capture, parts []*profileio.Capture, names []string) (PartsScore, error) {
	var s PartsScore
	if len(parts) == 0 {
		return s, fmt.Errorf("no parts to score")
	}
	opt := cfg.repair()
	est := cfg.repaired()
	funcs, _ := compare.Join(exact, whole, opt)
	if len(funcs) == 0 {
		return s, fmt.Errorf("the whole run's capture has none of the exact profile's functions")
	}
	score := func(c *profileio.Capture) float64 {
		got, _ := compare.Join(exact, c, opt)
		return compare.Score(onFunctions(funcs, got), est).Blocks
	}
	// The parts are fed to the merge one at a time, as reestimate does.
	m := capmerge.New(capmerge.Options{})
	for i, c := range parts {
		if err := m.Add(c, names[i], 1); err != nil {
			return s, err
		}
		s.Parts = append(s.Parts, score(c))
		jit, _ := c.TotalSamples()
		s.PartSamples = append(s.PartSamples, jit)
	}
	merged, sum := m.Result()
	s.UnnamedParts, s.NamedLate = sum.UnnamedSamples+sum.NamedLate, sum.NamedLate
	s.Merged = score(merged)
	s.Whole = compare.Score(funcs, est).Blocks
	s.MergedSamples, _ = merged.TotalSamples()
	s.WholeSamples, _ = whole.TotalSamples()
	return s, nil
}

// onFunctions is funcs with the samples of got, the same functions joined from another
// capture: a function got lacks keeps its CFG and exact counts with no samples.
func onFunctions(funcs, got []compare.Function) []compare.Function {
	out := make([]compare.Function, len(funcs))
	for i, f := range funcs {
		k := slices.IndexFunc(got, func(g compare.Function) bool { return g.Name == f.Name })
		if k >= 0 {
			out[i] = got[k]
			continue
		}
		f.Samples = map[uint64]uint64{}
		out[i] = f
	}
	return out
}

// partFiles lists the *.profd captures in dir, in the order of the numbers that name them
// (1.profd, 2.profd, … as scripts/sample.sh leaves them), other names after, sorted.
func partFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (split runs come from PARTS=4 scripts/sample.sh)", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".profd") && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no *.profd captures", dir)
	}
	slices.SortFunc(names, func(a, b string) int {
		na, ea := strconv.Atoi(strings.TrimSuffix(a, ".profd"))
		nb, eb := strconv.Atoi(strings.TrimSuffix(b, ".profd"))
		switch {
		case ea == nil && eb == nil:
			return na - nb
		case ea == nil:
			return -1
		case eb == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
	for i, n := range names {
		names[i] = filepath.Join(dir, n)
	}
	return names, nil
}

// readCapture reads the capture in the file path.
func readCapture(path string) (*profileio.Capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := profileio.ReadCapture(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func signed(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%+.3f", x)
}
