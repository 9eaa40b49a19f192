package profileio_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
)

// A function whose code runs 0x00–0x20 on line 10 and 0x20–0x40 on line 12, with block
// counts from the reestimator, becomes an LLVM text profile.
func ExampleProject() {
	obj := &jitmap.CodeObject{Name: "sum_loop", Addr: 0x1000, Size: 0x40, Lines: []jitmap.LineEntry{
		{Addr: 0x1000, File: "sum.c", Line: 10},
		{Addr: 0x1020, File: "sum.c", Line: 12},
	}}
	pr := profileio.Project(profileio.FunctionCounts{
		Object: obj,
		Blocks: []profileio.BlockCount{{Start: 0, End: 0x20, Count: 3}, {Start: 0x20, End: 0x40, Count: 250}},
		Entry:  0,
	})
	p := profileio.NewProfile()
	p.Add(pr.Profile)
	if err := profileio.WriteText(os.Stdout, p); err != nil {
		fmt.Println(err)
	}
	// Output:
	// sum_loop:253:3
	//  0: 3
	//  2: 250
}

// A capture written as a stream reads back whole.
func ExampleNewCaptureWriter() {
	var file bytes.Buffer
	cw, _ := profileio.NewCaptureWriter(&file, profileio.CaptureMeta{Event: "cpu-clock", PeriodEvents: 1000000})
	_ = cw.AddProcess(profileio.Process{Pid: 42, Command: "lli-14"})
	id, _ := cw.AddCodeObject(42, &jitmap.CodeObject{Name: "main", Addr: 0x7f00, Size: 16})
	_ = cw.AddSamples([]profileio.SampleRecord{{Object: id, Offset: 4, Count: 9}})
	_ = cw.Close(profileio.CaptureEnd{LostSamples: 0})

	c, err := profileio.ReadCapture(&file)
	if err != nil {
		fmt.Println(err)
		return
	}
	jit, outside := c.TotalSamples()
	fmt.Println(c.Objects[0].Object.Name, jit, outside, c.End != nil)
	// Output:
	// main 9 0 true
}
