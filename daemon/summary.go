package daemon

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/profd/profd/profileio"
)

// procSummary is what the summary keeps of a process's last flushed capture.
type procSummary struct {
	totals                []profileio.FunctionTotal
	jit, outside, unnamed uint64
}

// summaryTop is how many functions the summary lists.
const summaryTop = 10

// exitedKeep is how many JIT functions the summary keeps of the processes that exited, the
// most sampled: a run of weeks profiles processes without end, and their final totals are
// added up instead of kept one by one.
const exitedKeep = 4096

// exitedSummary is what the summary keeps of the processes that exited: their totals added
// up, their JIT functions' by name, at most exitedKeep of them past each trim.
type exitedSummary struct {
	jit, outside, unnamed uint64
	functions             map[string]uint64
	trimmed               bool // functions were let go: the count of the others is a floor
}

// add adds the final totals of a process that exited.
func (e *exitedSummary) add(p procSummary) {
	e.jit += p.jit
	e.outside += p.outside
	e.unnamed += p.unnamed
	if e.functions == nil {
		e.functions = map[string]uint64{}
	}
	for _, t := range p.totals {
		if t.JIT {
			e.functions[t.Name] += t.Samples
		}
	}
	if len(e.functions) <= 2*exitedKeep {
		return
	}
	type fn struct {
		name string
		n    uint64
	}
	fns := make([]fn, 0, len(e.functions))
	for name, n := range e.functions {
		fns = append(fns, fn{name, n})
	}
	slices.SortFunc(fns, func(a, b fn) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.name, b.name)) })
	clear(e.functions)
	for _, f := range fns[:exitedKeep] {
		e.functions[f.name] = f.n
	}
	e.trimmed = true
}

// summary is e as one procSummary.
func (e *exitedSummary) summary() procSummary {
	p := procSummary{jit: e.jit, outside: e.outside, unnamed: e.unnamed}
	for name, n := range e.functions {
		p.totals = append(p.totals, profileio.FunctionTotal{Name: name, Samples: n, JIT: true})
	}
	return p
}

// writeSummary prints one screen: the top JIT functions over the latest capture of every
// process profiled in this run (exited ones included), with their shares of all samples,
// and the counters; trimmed: some functions of exited processes were let go
// (exitedSummary), and the count of the others is a floor.
func writeSummary(w io.Writer, n uint64, final bool, procs []procSummary, trimmed bool, counters string) {
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
			more := "more"
			if trimmed {
				more = "or more other"
			}
			fmt.Fprintf(&b, "  ... and %d %s functions\n", len(rows)-summaryTop, more)
			break
		}
		fmt.Fprintf(&b, "  %8d  %7s  %s\n", r.samples, percent(r.samples, total), shown(r.name))
	}
	fmt.Fprintf(&b, "  %s\n", counters)
	w.Write([]byte(b.String()))
}

// shownBytes is the most of a name a line of the summary shows.
const shownBytes = 200

// shown is a name a target chose (a JIT function's, an executable's) as the summary and
// its lines show it: its control characters and invalid bytes as U+FFFD, so that it cannot
// end the line or move a terminal's cursor, cut to shownBytes with an ellipsis.
func shown(name string) string {
	clean := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(name, string(utf8.RuneError)))
	if len(clean) <= shownBytes {
		return clean
	}
	cut := shownBytes
	for cut > 0 && !utf8.RuneStart(clean[cut]) {
		cut--
	}
	return clean[:cut] + "…"
}

func percent(part, whole uint64) string {
	if whole == 0 {
		return "0.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}
