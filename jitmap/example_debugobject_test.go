package jitmap_test

import (
	"fmt"
	"os"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// A JIT's GDB debug object (here one lli-14 registered) gives the discriminators its
// jitdump line records lack; MergeDiscriminators copies them onto a code object's lines.
func ExampleDebugObject() {
	obj, err := os.ReadFile("testdata/matmul-mcjit-debug.o")
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := jitmap.DebugObject(obj, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	rows := info.Lines
	code := codeobj.Object{Name: "main", Addr: rows[0].Addr, Size: 1355}
	for _, r := range rows {
		if r.Line == 11 { // the inner loop of workloads/matmul.c
			code.Lines = append(code.Lines, codeobj.LineEntry{Addr: r.Addr, Line: r.Line})
		}
	}
	n := jitmap.MergeDiscriminators(&code, rows)
	fmt.Printf("%d rows; %d of line 11's %d entries took a discriminator\n", len(rows), n, len(code.Lines))
	// Output: 121 rows; 26 of line 11's 27 entries took a discriminator
}
