package attribute_test

import (
	"context"
	"fmt"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// oneJIT answers for a process whose JIT memory is anonymous memory at 0x7f0000000000.
type oneJIT struct{}

func (oneJIT) Image(uint32) string      { return "jit" }
func (oneJIT) Executable(uint32) string { return "/usr/bin/jit" }
func (oneJIT) Mappings(uint32) ([]attribute.Mapping, error) {
	return []attribute.Mapping{{Start: 0x7f0000000000, End: 0x7f0000100000, Executable: true}}, nil
}
func (oneJIT) MadeMappings(uint32) []attribute.Mapping            { return nil }
func (oneJIT) OpenSymbols(uint32, attribute.Mapping) *elfsym.File { return nil }
func (oneJIT) ThreadName(uint32, uint32) string                   { return "jit" }
func (oneJIT) KernelSymbol(uint64) (string, bool)                 { return "", false }
func (oneJIT) ProcessInfo(uint32) attribute.ProcessInfo           { return attribute.ProcessInfo{} }

// Samples in code the map knows are named when they are added; samples in JIT memory whose
// record comes later wait, and are named once it has come.
func Example() {
	const pid = 42
	jit := jitmap.NewMap(jitmap.MapOptions{})
	jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "hot", Addr: 0x7f0000001000, Size: 0x100, LoadNs: 1}})

	counts := attribute.New(jit, oneJIT{}, nil)
	counts.AddProcess(pid, 0)
	counts.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{
		{PID: pid, IP: 0x7f0000001010}: {N: 7, FirstNs: 100, LastNs: 200},
		{PID: pid, IP: 0x7f0000002010}: {N: 3, FirstNs: 100, LastNs: 200}, // no record yet
	}})
	fmt.Printf("%+v\n", counts.Totals())

	// The late record and the stream's end at 5 ms, then the samples waiting for it: those
	// taken before the time the records have reached (kept to the millisecond) are named.
	records := []jitmap.Event{
		&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "late", Addr: 0x7f0000002000, Size: 0x100, LoadNs: 50}},
		&jitmap.StreamEnd{TimeNs: 5_000_000},
	}
	for _, ev := range records {
		jit.Apply(ev)
	}
	counts.RecordsApplied(pid, records)
	counts.NameLate(pid, 5_000_000, false)

	snap := counts.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{})
	snap.Name(context.Background())
	for _, o := range snap.Capture.Objects {
		fmt.Printf("%s %+v\n", o.Object.Name, o.Samples)
	}
	// Output:
	// {JIT:7 Outside:0 Unnamed:3}
	// hot [{Offset:16 Count:7}]
	// late [{Offset:16 Count:3}]
}
