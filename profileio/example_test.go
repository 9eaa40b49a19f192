package profileio_test

import (
	"bytes"
	"fmt"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// A capture written as a stream reads back whole.
func ExampleNewCaptureWriter() {
	var file bytes.Buffer
	cw, _ := profileio.NewCaptureWriter(&file, profileio.CaptureMeta{Event: "cpu-clock", PeriodEvents: 1000000})
	_ = cw.AddProcess(profileio.Process{Pid: 42, Command: "lli-14"})
	id, _ := cw.AddCodeObject(42, &codeobj.Object{Name: "main", Addr: 0x7f00, Size: 16})
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
