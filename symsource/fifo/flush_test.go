package fifo

import (
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// TestFlushQueue: only a FIFO's requests are queued, at most MaxPendingFlushRequests a
// target, the next answered at once with EBUSY; Take empties the queue and Forget drops a
// target's.
func TestFlushQueue(t *testing.T) {
	var q FlushQueue
	fromFile := jitmap.Batch{Pid: 7, Source: codeobj.SourceJitdumpFile}
	if queued, busy := q.Add(fromFile, &jitmap.FlushRequest{ID: 1}); queued || busy != nil {
		t.Errorf("a request in a jitdump file: queued %v, busy %v", queued, busy)
	}
	fromFIFO := jitmap.Batch{Pid: 7, Source: codeobj.SourceFIFO}
	for i := range MaxPendingFlushRequests {
		if queued, busy := q.Add(fromFIFO, &jitmap.FlushRequest{ID: uint64(i)}); !queued || busy != nil {
			t.Fatalf("request %d: queued %v, busy %v", i, queued, busy)
		}
	}
	queued, busy := q.Add(fromFIFO, &jitmap.FlushRequest{ID: 99})
	if queued || busy == nil || busy.ID != 99 || busy.Status != syscall.EBUSY {
		t.Errorf("past the bound: queued %v, reply %+v", queued, busy)
	}
	q.Add(jitmap.Batch{Pid: 8, Source: codeobj.SourceFIFO}, &jitmap.FlushRequest{ID: 1})
	q.Forget(8)
	r := q.Take()
	if got := r.Pids(); !reflect.DeepEqual(got, []uint32{7}) || len(r[7]) != MaxPendingFlushRequests {
		t.Errorf("taken %v, %d of 7's", got, len(r[7]))
	}
	if len(q.Take()) != 0 {
		t.Error("the queue is not empty after Take")
	}
}

// TestFlushAnswers: each request is answered with the paths of the outputs it asked for
// (a mask of 0: all); one whose outputs were not written gets ENOENT, or ENODATA when the
// LLVM profiles had no function; a failed write answers with its errno, else EIO.
func TestFlushAnswers(t *testing.T) {
	r := FlushRequests{7: {
		{ID: 1, Formats: FlushCapture},
		{ID: 2},
		{ID: 3, Formats: FlushLLVMText},
	}}
	if !r.Asks([]uint32{7}, FlushPprof) || r.Asks([]uint32{8}, FlushPprof) {
		t.Error("Asks: a mask of 0 asks for the pprof profile; pid 8 asks nothing")
	}
	written := []Output{{FlushPprof, "/out/a.pb.gz"}, {FlushCapture, "/out/a.profd"}}
	got := r.Answers(7, FlushResult{Written: written})
	want := []FlushReply{
		{ID: 1, Paths: []string{"/out/a.profd"}},
		{ID: 2, Paths: []string{"/out/a.pb.gz", "/out/a.profd"}},
		{ID: 3, Status: syscall.ENOENT},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answers %+v, want %+v", got, want)
	}
	if got := r.Answers(7, FlushResult{Written: written, NoData: true}); got[2].Status != syscall.ENODATA {
		t.Errorf("no function: %+v, want ENODATA", got[2])
	}
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{{fmt.Errorf("write: %w", syscall.ENOSPC), syscall.ENOSPC}, {errors.New("encode"), syscall.EIO}} {
		if got := r.Answers(7, FlushResult{Written: written, Err: c.err}); got[0].Status != c.want || len(got[0].Paths) != 1 {
			t.Errorf("%v: %+v, want status %v with its path", c.err, got[0], c.want)
		}
	}
}
