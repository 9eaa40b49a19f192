package jitmap_test

import (
	"bytes"
	"fmt"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// A JIT writes a jitdump; the decoder gets it in two arbitrary pieces; the map names a
// sampled address before and after the code was unloaded.
func Example() {
	var stream bytes.Buffer
	w, _ := jitdumptest.NewWriter(&stream, jitmap.JitdumpHeader{Pid: 42})
	_ = w.CodeLoad(&jitmap.CodeLoad{Pid: 42, Tid: 42, Object: codeobj.Object{
		Name: "add", Addr: 0x7f0000001000, Size: 4, Code: []byte{0x8d, 0x04, 0x37, 0xc3},
		LoadNs: 100, CodeIndex: 1,
	}})
	_ = w.CodeUnload(&jitmap.CodeUnload{Pid: 42, Tid: 42, TimeNs: 200, Addr: 0x7f0000001000, CodeIndex: 1})

	d := jitmap.NewDecoder(42, codeobj.SourceFIFO, jitmap.DecoderOptions{})
	m := jitmap.NewMap(jitmap.MapOptions{})
	b := stream.Bytes()
	for _, piece := range [][]byte{b[:50], b[50:]} {
		events, errs := d.Write(piece)
		for _, ev := range events {
			if err := m.Apply(ev); err != nil {
				fmt.Println(err)
			}
		}
		fmt.Println(len(events), "events", len(errs), "errors")
	}
	for _, at := range []int64{150, 250} {
		if obj, ok := m.Lookup(42, 0x7f0000001003, at); ok {
			fmt.Printf("at %d: %s+%d\n", at, obj.Name, 0x7f0000001003-obj.Addr)
		} else {
			fmt.Printf("at %d: not JIT code\n", at)
		}
	}
	// Output:
	// 0 events 0 errors
	// 2 events 0 errors
	// at 150: add+3
	// at 250: not JIT code
}
