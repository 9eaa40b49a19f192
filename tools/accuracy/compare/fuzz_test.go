package compare

import (
	"strings"
	"testing"
)

func FuzzParseIR(f *testing.F) {
	f.Add(loopIR)
	f.Add("define i32 @f() {\n}\n!1 = !DILocation(line: 99999999999, scope: !2)\n")
	f.Fuzz(func(t *testing.T, ir string) {
		funcs, err := ParseIR(strings.NewReader(ir))
		if err == nil && len(funcs) > strings.Count(ir, "define ") {
			t.Errorf("%d functions from %d defines", len(funcs), strings.Count(ir, "define "))
		}
	})
}

func FuzzParseBlockFrequencies(f *testing.F) {
	f.Add("block-frequency-info: f\n - : float = 1.0, int = 8, count = 1\n - x: float = 2e3, int = 1\n")
	f.Fuzz(func(t *testing.T, out string) {
		freqs, err := ParseBlockFrequencies(strings.NewReader(out))
		if err != nil {
			return
		}
		var n int
		for _, f := range freqs {
			n += len(f)
		}
		if n > strings.Count(out, "float = ") {
			t.Errorf("%d frequencies from %d lines", n, strings.Count(out, "float = "))
		}
	})
}

func FuzzParseCallsites(f *testing.F) {
	f.Add(inlinedIR)
	f.Add(loopIRDisc)
	// A scope cycle must not hang the walk to the subprogram.
	f.Add("!1 = !DILexicalBlock(scope: !2, file: !3)\n!2 = !DILexicalBlock(scope: !1, file: !3)\n!4 = !DILocation(line: 1, scope: !1, inlinedAt: !5)\n!5 = !DILocation(line: 2, scope: !2)\n")
	f.Fuzz(func(t *testing.T, ir string) {
		calls, err := ParseCallsites(strings.NewReader(ir))
		if err != nil {
			return
		}
		sites := 0
		for _, callees := range calls {
			for _, s := range callees {
				sites += len(s)
			}
		}
		if n := strings.Count(ir, "inlinedAt:"); sites > n {
			t.Errorf("%d callsites from %d inlinedAt references", sites, n)
		}
	})
}
