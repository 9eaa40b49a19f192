package cfg

import (
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// BenchmarkBuildCFG measures CFG recovery throughput on real clang-14 output (kernels.c under
// every flag set of the tests, functions with their padding). The MB/s column is bytes of
// machine code per second.
func BenchmarkBuildCFG(b *testing.B) {
	testenv.Requires(b, testenv.Tool("clang-14"))
	var funcs []compiledFunc
	size := 0
	for _, flags := range clangFlagSets {
		for _, fn := range textFuncs(b, compileKernels(b, flags)) {
			funcs = append(funcs, fn)
			size += len(fn.code)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, fn := range funcs {
			if _, err := Build(fn.code, fn.addr); err != nil {
				b.Fatal(err)
			}
		}
	}
}
