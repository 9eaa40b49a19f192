package daemon

import (
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/profileio"
)

// TestExitedSummaryBounded: the summary adds up the final totals of the processes that
// exited instead of keeping each: a run of weeks that profiles a hundred thousand processes
// keeps a few thousand function totals for them, the hottest ones, and its screen still
// names the hottest function of all and every sample.
func TestExitedSummaryBounded(t *testing.T) {
	var e exitedSummary
	const procs = 100000
	for i := range procs {
		p := procSummary{jit: 10, outside: 1, totals: []profileio.FunctionTotal{
			{Name: "query_" + strconv.Itoa(i), Samples: 9, JIT: true}, // a function of its own
			{Name: "shared", Samples: 1, JIT: true},                   // one every process runs
			{Name: "[outside JIT] libc.so.6", Samples: 1},
		}}
		e.add(p)
	}
	if len(e.functions) > 2*exitedKeep || !e.trimmed {
		t.Errorf("%d function totals kept for %d processes (trimmed %v), want at most %d", len(e.functions), procs,
			e.trimmed, 2*exitedKeep)
	}
	if e.functions["shared"] != procs || e.jit != 10*procs || e.outside != procs {
		t.Errorf("shared %d, jit %d, outside %d; want %d, %d, %d", e.functions["shared"], e.jit, e.outside, procs, 10*procs, procs)
	}
	var out strings.Builder
	writeSummary(&out, 1, false, []procSummary{e.summary()}, e.trimmed, "counters")
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "profd flush #1: 1100000 samples") || !strings.HasSuffix(lines[2], " shared") ||
		!strings.Contains(out.String(), "or more other functions") {
		t.Errorf("summary:\n%s", out.String())
	}
}
