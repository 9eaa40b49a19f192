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

// TestMergeNamesLateSamples: the first interval of a run holds unnamed the samples its JIT's
// records came too late for; the second holds the code at their addresses. The merge names
// them by that code, in proportion to the time each version was live; samples of another
// run's process, or at an address no code of the process held, stay unnamed.
func TestMergeNamesLateSamples(t *testing.T) {
	const addr = 0x7f0000001000
	first := run("h1", 100, 7, addr, nil)
	first.Objects = nil
	first.Unnamed = []profileio.UnnamedCount{
		{Pid: 7, IP: addr + 9, FirstNs: 2000, LastNs: 3000, Count: 6},
		{Pid: 7, IP: addr + 0x900000, FirstNs: 2000, LastNs: 3000, Count: 2}, // no code there
	}
	first.End.EndNs = 5000
	second := run("h1", 100, 7, addr, []profileio.OffsetCount{{Offset: 9, Count: 4}})
	second.Objects[0].Object.LoadNs = 1000
	second.End.EndNs = 9000
	other := run("h2", 100, 7, addr, nil) // the same pid, another run: names nothing
	other.Objects = nil
	other.Unnamed = []profileio.UnnamedCount{{Pid: 7, IP: addr + 9, FirstNs: 2000, LastNs: 3000, Count: 5}}

	m := New(Options{})
	for i, c := range []*profileio.Capture{first, second, other} {
		if err := m.Add(c, fmt.Sprint(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	merged, sum := m.Result()
	var f []profileio.OffsetCount
	for _, o := range merged.Objects {
		if o.Object.Name == "f" {
			f = o.Samples
		}
	}
	if len(f) != 1 || f[0] != (profileio.OffsetCount{Offset: 9, Count: 10}) {
		t.Errorf("f's samples %v, want 10 at offset 9 (4 named, 6 named late)", f)
	}
	if sum.NamedLate != 6 || sum.UnnamedSamples != 7 {
		t.Errorf("%d named late, %d unnamed; want 6 and 7", sum.NamedLate, sum.UnnamedSamples)
	}

	// Code replaced at the address halfway through the count's span: split by time.
	replaced := run("h1", 100, 7, addr, nil)
	replaced.Objects[0].Object.LoadNs, replaced.Objects[0].Object.UnloadNs = 1000, 2500
	later := run("h1", 100, 7, addr, []profileio.OffsetCount{{Offset: 9, Count: 1}})
	later.Objects[0].Object.Name = "f2"
	later.Objects[0].Object.LoadNs = 2500
	later.End.EndNs = 20000
	m = New(Options{})
	for i, c := range []*profileio.Capture{first, replaced, later} {
		if err := m.Add(c, fmt.Sprint(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	merged, _ = m.Result()
	got := map[string]uint64{}
	for _, o := range merged.Objects {
		got[o.Object.Name] += o.TotalSamples()
	}
	if got["f"] != 3 || got["f2"] != 4 {
		t.Errorf("samples %v, want f 3 (half of 6) and f2 4 (1, and half of 6)", got)
	}
}

// FuzzMergeLateNames: whatever the objects' places and times and the unnamed counts, the
// merge names no more samples than were unnamed, each on an object at its address, and
// gives the same result when asked twice.
func FuzzMergeLateNames(f *testing.F) {
	f.Add([]byte{0, 9, 1, 10, 3, 20, 6, 0, 40, 2, 5})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 255, 254})
	f.Fuzz(func(t *testing.T, data []byte) {
		const addr = 0x7f0000001000
		next := func() uint64 {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return uint64(b)
		}
		unnamed := run("h1", 100, 7, addr, nil)
		unnamed.Objects = nil
		var total uint64
		for range next() % 8 {
			u := profileio.UnnamedCount{Pid: 7, IP: addr + next()*4, FirstNs: int64(next() * 10), Count: next() + 1}
			u.LastNs = u.FirstNs + int64(next()*10)
			unnamed.Unnamed = append(unnamed.Unnamed, u)
			total += u.Count
		}
		m := New(Options{})
		if err := m.Add(unnamed, "u", 1); err != nil {
			t.Fatal(err)
		}
		for i := range next() % 4 {
			c := run("h1", 100, 7, addr+next()*8, []profileio.OffsetCount{{Offset: 0, Count: 1}})
			o := &c.Objects[0].Object
			o.Name = fmt.Sprintf("f%d", i)
			o.LoadNs = int64(next() * 10)
			if u := next(); u > 0 {
				o.UnloadNs = o.LoadNs + int64(u*10)
			}
			c.End.EndNs = int64(1000 + i)
			if err := m.Add(c, fmt.Sprint(i), 1); err != nil {
				t.Fatal(err)
			}
		}
		merged, sum := m.Result()
		if sum.NamedLate+sum.UnnamedSamples != total {
			t.Errorf("named %d + left %d, want the %d unnamed", sum.NamedLate, sum.UnnamedSamples, total)
		}
		var all uint64
		for _, o := range merged.Objects {
			for _, s := range o.Samples {
				if s.Offset >= o.Object.Size {
					t.Errorf("%s: samples at offset %#x, past its %#x bytes", o.Object.Name, s.Offset, o.Object.Size)
				}
				all += s.Count
			}
		}
		again, sum2 := m.Result()
		var all2 uint64
		for _, o := range again.Objects {
			all2 += o.TotalSamples()
		}
		if all2 != all || sum2.NamedLate != sum.NamedLate {
			t.Errorf("asked again: %d samples, %d named late; first %d, %d", all2, sum2.NamedLate, all, sum.NamedLate)
		}
	})
}
