package attribute

import (
	"math"
	"reflect"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// TestSnapshotCodeOfSampledOnly: a capture carries the code bytes and line tables of the
// objects with samples and of those in call chains; the others (live and idle, or ended
// without a sample) keep their name, range and times only, and the map's objects keep their
// code.
func TestSnapshotCodeOfSampledOnly(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	obj := func(name string, addr uint64) codeobj.Object {
		return codeobj.Object{Name: name, Addr: addr, Size: 0x40, LoadNs: 1, Code: make([]byte, 0x40),
			Lines: []codeobj.LineEntry{{Addr: addr, File: "f.jit", Line: 1}}}
	}
	hot, caller, idle, gone := uint64(anonBase), uint64(anonBase+0x1000), uint64(anonBase+0x2000), uint64(anonBase+0x3000)
	for _, ev := range []jitmap.Event{
		&jitmap.CodeLoad{Pid: pid, Object: obj("hot", hot)},
		&jitmap.CodeLoad{Pid: pid, Object: obj("caller", caller)},
		&jitmap.CodeLoad{Pid: pid, Object: obj("idle", idle)},
		&jitmap.CodeLoad{Pid: pid, Object: obj("gone", gone)},
		&jitmap.CodeUnload{Pid: pid, Addr: gone, TimeNs: 500},
	} {
		if err := jit.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	a.Add(sampler.Drained{
		Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: hot + 8}: {N: 5, FirstNs: 1000, LastNs: 2000}},
		Stacks: []sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{hot + 8, caller + 0x11},
			Count: sampler.Count{N: 5, FirstNs: 1000, LastNs: 2000}}},
	})
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	byName := map[string]*profileio.CaptureObject{}
	for _, o := range c.Objects {
		byName[o.Object.Name] = o
	}
	for name, withCode := range map[string]bool{"hot": true, "caller": true, "idle": false, "gone": false} {
		o := byName[name]
		if o == nil {
			t.Errorf("%s: not in the capture", name)
			continue
		}
		if o.Object.Size != 0x40 || o.Object.Addr == 0 {
			t.Errorf("%s: range %#x+%d, want its own", name, o.Object.Addr, o.Object.Size)
		}
		if has := len(o.Object.Code) == 0x40 && len(o.Object.Lines) == 1; has != withCode {
			t.Errorf("%s: %d code bytes, %d lines; want code and lines %v", name, len(o.Object.Code), len(o.Object.Lines), withCode)
		}
	}
	for _, o := range jit.Objects(pid) {
		if len(o.Code) != 0x40 || len(o.Lines) != 1 {
			t.Errorf("the map's %s lost its code or lines", o.Name)
		}
	}
}

// TestNameKept: a call chain's frame in code whose record came after the chain was drained,
// and which has ended since, is named by NameKept, before the map lets that code go.
func TestNameKept(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	leaf, caller := uint64(anonBase+0x100), uint64(anonBase+0x2010)
	if err := jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "leaf", Addr: leaf, Size: 0x10, LoadNs: 1}}); err != nil {
		t.Fatal(err)
	}
	a.Add(sampler.Drained{
		Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: leaf}: {N: 2, FirstNs: 1000, LastNs: 2000}},
		Stacks: []sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{leaf, caller + 1},
			Count: sampler.Count{N: 2, FirstNs: 1000, LastNs: 2000}}},
	})
	applyRecords(t, a, jit, pid,
		&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "late_caller", Addr: caller, Size: 0x10, LoadNs: 500}},
		&jitmap.CodeUnload{Pid: pid, Addr: caller, TimeNs: 3000})
	a.NameKept()
	jit.Reclaim(math.MaxInt64, nil)
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	if len(c.Stacks) != 1 || len(c.Stacks[0].Frames) != 2 {
		t.Fatalf("stacks %+v, want one chain of two frames", c.Stacks)
	}
	if f := c.Stacks[0].Frames[1]; f.Object == profileio.NoObject || c.Objects[f.Object].Object.Name != "late_caller" {
		t.Errorf("caller frame %+v, want it named late_caller", f)
	}
}

// TestSnapshotProcessInfo: a capture's process has what the lookup told of it when it was
// added (its command line, cgroup, container and service), though the lookup forgets it
// since, as it does when the process exits.
func TestSnapshotProcessInfo(t *testing.T) {
	look := newFakeLookup(testPid)
	info := ProcessInfo{CommandLine: []string{"node", "server.js"}, CgroupPath: "/system.slice/docker-abc.scope",
		ContainerID: "abc", ServiceName: "checkout"}
	look.info = map[uint32]ProcessInfo{testPid: info}
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	a.AddProcess(testPid, 0)
	delete(look.info, testPid)
	got := a.Snapshot(testPid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture.Processes
	want := []profileio.Process{{Pid: testPid, Command: "jit", Executable: "/usr/bin/jit", CommandLine: info.CommandLine,
		CgroupPath: info.CgroupPath, ContainerID: info.ContainerID, ServiceName: info.ServiceName}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("processes %+v, want %+v", got, want)
	}
}
