package daemon

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/profd/profd/profileio"
)

// procSummary is what the summary keeps of a process's last flushed capture.
type procSummary struct {
	totals                []profileio.FunctionTotal
	jit, outside, unnamed uint64
}

// summaryTop is how many functions the summary lists.
const summaryTop = 10

// writeSummary prints one screen: the top JIT functions over the latest capture of every
// process profiled in this run (exited ones included), with their shares of all samples,
// and the counters.
func writeSummary(w io.Writer, n uint64, final bool, procs []procSummary, counters string) {
	type row struct {
		name    string
		samples uint64
	}
	sums := map[string]uint64{}
	var jit, outside, unnamed uint64
	for _, p := range procs {
		jit += p.jit
		outside += p.outside
		unnamed += p.unnamed
		for _, t := range p.totals {
			if t.JIT {
				sums[t.Name] += t.Samples
			}
		}
	}
	rows := make([]row, 0, len(sums))
	for name, s := range sums {
		rows = append(rows, row{name, s})
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.samples, a.samples), strings.Compare(a.name, b.name))
	})
	var b strings.Builder
	kind := "flush"
	if final {
		kind = "final flush"
	}
	total := jit + outside + unnamed
	fmt.Fprintf(&b, "profd %s #%d: %d samples, %s in JIT code", kind, n, total, percent(jit, total))
	if unnamed > 0 {
		fmt.Fprintf(&b, "; %s of the samples in JIT memory named (%d unnamed)", percent(jit, jit+unnamed), unnamed)
	}
	b.WriteString("\n")
	if len(rows) > 0 {
		fmt.Fprintf(&b, "  %8s  %7s  %s\n", "samples", "share", "JIT function")
	}
	for i, r := range rows {
		if i == summaryTop {
			fmt.Fprintf(&b, "  ... and %d more functions\n", len(rows)-summaryTop)
			break
		}
		fmt.Fprintf(&b, "  %8d  %7s  %s\n", r.samples, percent(r.samples, total), r.name)
	}
	fmt.Fprintf(&b, "  %s\n", counters)
	w.Write([]byte(b.String()))
}

func percent(part, whole uint64) string {
	if whole == 0 {
		return "0.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}
