package profgen_test

import (
	"fmt"
	"os"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// A function whose code runs 0x00–0x20 on line 10 and 0x20–0x40 on line 12, with block
// counts from the reestimator, becomes an LLVM text profile.
func ExampleProject() {
	obj := &codeobj.Object{Name: "sum_loop", Addr: 0x1000, Size: 0x40, Lines: []codeobj.LineEntry{
		{Addr: 0x1000, File: "sum.c", Line: 10},
		{Addr: 0x1020, File: "sum.c", Line: 12},
	}}
	pr := profgen.Project(profgen.FunctionCounts{
		Object: obj,
		Blocks: []profgen.BlockCount{{Start: 0, End: 0x20, Count: 3}, {Start: 0x20, End: 0x40, Count: 250}},
		Entry:  0,
	})
	p := sampleprof.NewProfile()
	p.Add(pr.Profile)
	if err := profileio.WriteText(os.Stdout, p); err != nil {
		fmt.Println(err)
	}
	// Output:
	// sum_loop:253:3
	//  0: 3
	//  2: 250
}
