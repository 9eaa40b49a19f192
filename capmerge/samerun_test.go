package capmerge

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/profd/profd/profileio"
)

// intervals are n captures of one process of one profd run, as --reset-on-flush writes
// them: one host, start and pid, interval k ending at 10+k with k+1 samples.
func intervals(n int) []*profileio.Capture {
	cs := make([]*profileio.Capture, n)
	for k := range cs {
		cs[k] = run("h1", 100, 7, 0x7f0000001000, []profileio.OffsetCount{{Offset: 0, Count: uint64(k + 1)}})
		cs[k].End.EndNs = int64(10 + k)
	}
	return cs
}

// TestMergeManyIntervals: many captures of one run are summed and listed as pairs with the
// first; one given again among them is refused, naming the first input of it.
func TestMergeManyIntervals(t *testing.T) {
	const n = 20000
	cs := intervals(n)
	m := New(Options{})
	for k, c := range cs {
		if err := m.Add(c, fmt.Sprintf("i%d", k), 1); err != nil {
			t.Fatal(err)
		}
	}
	err := m.Add(cs[n/2], "again", 1)
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), fmt.Sprintf("i%d and again", n/2)) {
		t.Errorf("interval %d given again: error %v, want %v naming i%d", n/2, err, ErrDuplicate, n/2)
	}
	merged, sum := m.Result()
	if len(sum.SameRun) != n-1 || sum.SameRun[n-2] != [2]string{"i0", fmt.Sprintf("i%d", n-1)} {
		t.Errorf("%d pairs of one run, want %d, each with i0", len(sum.SameRun), n-1)
	}
	var f uint64
	for _, o := range merged.Objects {
		if o.Object.Name == "f" {
			f += o.TotalSamples()
		}
	}
	if want := uint64(n) * (n + 1) / 2; f != want {
		t.Errorf("f has %d samples, want %d", f, want)
	}
}

// BenchmarkMergeIntervals adds 100 000 captures of one process of one run: finding
// whether each was added before must not go through the ones of its run added before.
func BenchmarkMergeIntervals(b *testing.B) {
	const n = 100000
	cs := intervals(n)
	names := make([]string, n)
	for k := range names {
		names[k] = fmt.Sprintf("i%d", k)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := New(Options{})
		for k, c := range cs {
			if err := m.Add(c, names[k], 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/merge")
}
