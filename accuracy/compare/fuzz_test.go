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
