package attribute

import (
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
)

// TestNameUnnamed: a capture's unnamed counts are named by the code at their address at
// their time, a count that spans a change of the code split between the versions; the
// objects are added after the capture's own, and what no object names stays unnamed.
func TestNameUnnamed(t *testing.T) {
	jit := jitmap.NewMap(jitmap.MapOptions{})
	for _, ev := range []jitmap.Event{
		&jitmap.CodeLoad{Pid: 7, Object: codeobj.Object{Name: "old", Addr: 0x1000, Size: 0x40, LoadNs: 100}},
		&jitmap.CodeUnload{Pid: 7, Addr: 0x1000, TimeNs: 1000},
		&jitmap.CodeLoad{Pid: 7, Object: codeobj.Object{Name: "new", Addr: 0x1000, Size: 0x40, LoadNs: 1000}},
	} {
		if err := jit.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	c := &profileio.Capture{
		Objects: []*profileio.CaptureObject{{ID: 0, Pid: 7, Object: codeobj.Object{Name: "known", Addr: 0x9000, Size: 4}}},
		Unnamed: []profileio.UnnamedCount{
			{Pid: 7, IP: 0x1008, FirstNs: 200, LastNs: 900, Count: 5},
			{Pid: 7, IP: 0x1010, FirstNs: 600, LastNs: 1400, Count: 8}, // across the change
			{Pid: 7, IP: 0x5000, FirstNs: 50, LastNs: 60, Count: 6},
		}}
	named, left := NameUnnamed(c, jit)
	if named != 13 || left != 6 || len(c.Unnamed) != 1 || c.Unnamed[0].IP != 0x5000 {
		t.Fatalf("named %d, left %d (%+v); want 13 named, the 6 at 0x5000 left", named, left, c.Unnamed)
	}
	got := map[string][]profileio.OffsetCount{}
	for i, o := range c.Objects {
		if o.ID != profileio.ObjectID(i) || o.Object.Version != 0 {
			t.Errorf("object %d: id %d, version %d", i, o.ID, o.Object.Version)
		}
		got[o.Object.Name] = o.Samples
	}
	if len(c.Objects) != 3 || len(got["old"]) != 2 || len(got["new"]) != 1 || got["new"][0].Offset != 0x10 ||
		got["old"][0].Count+got["old"][1].Count+got["new"][0].Count != 13 {
		t.Errorf("objects %v", got)
	}
}
