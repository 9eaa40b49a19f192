package profileio

import (
	"bufio"
	"fmt"
	"io"
	"sort"

	"github.com/profd/profd/sampleprof"
)

// FunctionTotal is a function's samples summed over its code objects and processes.
type FunctionTotal struct {
	Name    string
	Samples uint64
	JIT     bool // a JIT function, not native code nor a mapping
}

// FunctionTotals sums c's samples by function name (JIT code by symbol, native code by its
// file's symbol, other samples outside JIT code by "[outside JIT] mapping", as the pprof
// writer names them), most samples first.
func FunctionTotals(c *Capture) []FunctionTotal {
	type key struct {
		name string
		jit  bool
	}
	sums := map[key]uint64{}
	for _, o := range c.Objects {
		if n := o.TotalSamples(); n > 0 {
			k := key{o.Object.Name, true}
			sums[k] = sampleprof.SatAdd(sums[k], n)
		}
	}
	for _, u := range c.outsideCounts() {
		k := key{name: outsideName(u.Mapping)}
		sums[k] = sampleprof.SatAdd(sums[k], u.Count)
	}
	for _, m := range c.Native {
		for _, s := range m.Samples {
			k := key{name: nativeName(m, s)}
			sums[k] = sampleprof.SatAdd(sums[k], s.Count)
		}
	}
	out := make([]FunctionTotal, 0, len(sums))
	for k, s := range sums {
		out = append(out, FunctionTotal{Name: k.name, Samples: s, JIT: k.jit})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Samples != out[j].Samples {
			return out[i].Samples > out[j].Samples
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// WriteTextReport writes a plain summary of c: how it was taken, the sample totals, and
// the samples per function, most first.
func WriteTextReport(w io.Writer, c *Capture) error {
	bw := bufio.NewWriter(w)
	m := c.Meta
	fmt.Fprintf(bw, "event: %s", m.Event)
	if m.Fallback != "" {
		fmt.Fprintf(bw, " (asked for %s: %s)", m.RequestedEvent, m.Fallback)
	}
	fmt.Fprintf(bw, "\nperiod: %d %s per sample\n", samplePeriod(m), eventUnit(m.Event))
	jit, outside := c.TotalSamples()
	unnamed := c.UnnamedSamples()
	fmt.Fprintf(bw, "samples: %d total, %d in JIT code, %d outside", sampleprof.SatAdd(sampleprof.SatAdd(jit, outside), unnamed), jit, outside)
	if unnamed > 0 {
		fmt.Fprintf(bw, ", %d in JIT memory no symbol named", unnamed)
	}
	fmt.Fprintln(bw)
	if c.End != nil {
		fmt.Fprintf(bw, "lost samples: %d\n", c.End.LostSamples)
	} else {
		fmt.Fprintf(bw, "capture incomplete: the writer did not finish\n")
	}
	for _, t := range FunctionTotals(c) {
		fmt.Fprintf(bw, "%12d  %s\n", t.Samples, t.Name)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("profileio: write report: %w", err)
	}
	return nil
}
