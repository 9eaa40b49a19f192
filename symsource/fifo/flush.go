package fifo

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"syscall"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// The flush-request protocol. A JIT asks for its profiles now with a record in its FIFO
// stream (jitmap.FlushRequest, decoded with the stream's other records; jit/profd_jit.h
// writes it, docs/jitdump-extensions.md lays it out), after the records the profiles must
// hold. profd answers on the target's reply FIFO with a FlushReply naming the request's ID:
// the paths of the outputs it asked for, and a status. This file says what a request asks
// and how it is answered; the daemon decides when to flush.

// The outputs a flush request can ask for: bits of jitmap.FlushRequest.Formats. A mask of 0
// asks for every output.
const (
	FlushLLVMText      uint32 = 1 << iota // the LLVM sample profile, text
	FlushLLVMExtBinary                    // the LLVM sample profile, ext-binary
	FlushPprof                            // the pprof profile
	FlushCapture                          // profd's capture
)

// asks reports whether req asks for the output of bit.
func asks(req *jitmap.FlushRequest, bit uint32) bool {
	return req.Formats == 0 || req.Formats&bit != 0
}

// FlushReply answers a JIT's flush request (jitmap.FlushRequest) on its reply FIFO,
// <dir>/<pid>.reply. On the wire (the machine's byte order, as jit/profd_jit.h reads it):
//
//	u32 magic 0x31524650 ("PFR1")   u32 total_size (header and paths)
//	u64 request_id
//	i32 status (0, or an errno)     u32 npaths
//	npaths paths, each ending in a NUL byte
//
// A reply is one write(2) of at most 4096 bytes (PIPE_BUF), so a reader never sees part of
// one. Status is 0 when the outputs were written, else:
//
//	EBUSY    MaxPendingFlushRequests requests of the target already wait
//	ENOENT   none of the outputs asked for is written (--format)
//	ENODATA  it asked for LLVM profiles only, and no function has samples yet
//	E2BIG    the paths that fit (more did not)
//	other    the errno of an output that could not be written, else EIO
type FlushReply struct {
	ID     uint64
	Status syscall.Errno
	Paths  []string
}

const (
	replyMagic       = 0x31524650
	replyHeaderBytes = 24
	maxReplyBytes    = 4096
)

// encode lays r out on the wire; paths that do not fit in maxReplyBytes are left out and
// the status says E2BIG.
func (r FlushReply) encode() []byte {
	b := make([]byte, replyHeaderBytes, maxReplyBytes)
	n := 0
	for _, p := range r.Paths {
		if len(b)+len(p)+1 > maxReplyBytes {
			r.Status = syscall.E2BIG
			break
		}
		b = append(append(b, p...), 0)
		n++
	}
	o := binary.NativeEndian
	o.PutUint32(b[0:], replyMagic)
	o.PutUint32(b[4:], uint32(len(b)))
	o.PutUint64(b[8:], r.ID)
	o.PutUint32(b[16:], uint32(int32(r.Status)))
	o.PutUint32(b[20:], uint32(n))
	return b
}

// MaxPendingFlushRequests bounds the flush requests of one target waiting for a flush;
// past it, a request is answered at once with EBUSY.
const MaxPendingFlushRequests = 64

// FlushQueue holds the flush requests not answered yet, by target. It is not safe for
// concurrent use; the zero value is empty.
type FlushQueue struct {
	byPid FlushRequests
}

// FlushRequests are flush requests taken from a FlushQueue to be answered by one flush, by
// target, each target's in the order they came.
type FlushRequests map[uint32][]*jitmap.FlushRequest

// Add queues req, which came in batch b, and reports whether it did. Only a FIFO is a
// channel to profd: a request in a jitdump file asks nothing and is dropped. A request past
// MaxPendingFlushRequests of its target is not queued either: busy is its answer, to send
// at once.
func (q *FlushQueue) Add(b jitmap.Batch, req *jitmap.FlushRequest) (queued bool, busy *FlushReply) {
	if b.Source != codeobj.SourceFIFO {
		return false, nil
	}
	if len(q.byPid[b.Pid]) >= MaxPendingFlushRequests {
		return false, &FlushReply{ID: req.ID, Status: syscall.EBUSY}
	}
	if q.byPid == nil {
		q.byPid = FlushRequests{}
	}
	q.byPid[b.Pid] = append(q.byPid[b.Pid], req)
	return true, nil
}

// Forget drops pid's requests: it exited, and its reply FIFO with it.
func (q *FlushQueue) Forget(pid uint32) { delete(q.byPid, pid) }

// Take returns every queued request and empties the queue.
func (q *FlushQueue) Take() FlushRequests {
	r := q.byPid
	q.byPid = nil
	return r
}

// Pids lists the targets with requests, ascending.
func (r FlushRequests) Pids() []uint32 { return slices.Sorted(maps.Keys(r)) }

// Asks reports whether any request of the processes pids asks for the output of bit
// (FlushLLVMText, ...).
func (r FlushRequests) Asks(pids []uint32, bit uint32) bool {
	for _, pid := range pids {
		for _, req := range r[pid] {
			if asks(req, bit) {
				return true
			}
		}
	}
	return false
}

// Output is one output a flush wrote: its FlushLLVMText, ... bit and its path.
type Output struct {
	Bit  uint32
	Path string
}

// FlushResult is what a flush did for a target's requests: the outputs it wrote, in the
// order replies list them; the error of those it could not write; and whether it left the
// LLVM profiles out because no function has samples yet (not an error).
type FlushResult struct {
	Written []Output
	Err     error
	NoData  bool
}

// Answers are the replies to pid's requests after a flush that did res: each with the paths
// of the outputs it asked for.
func (r FlushRequests) Answers(pid uint32, res FlushResult) []FlushReply {
	var status syscall.Errno
	if res.Err != nil && !errors.As(res.Err, &status) {
		status = syscall.EIO
	}
	var out []FlushReply
	for _, req := range r[pid] {
		reply := FlushReply{ID: req.ID, Status: status}
		for _, o := range res.Written {
			if asks(req, o.Bit) {
				reply.Paths = append(reply.Paths, o.Path)
			}
		}
		switch {
		case len(reply.Paths) > 0 || status != 0:
		case res.NoData:
			reply.Status = syscall.ENODATA
		default:
			reply.Status = syscall.ENOENT
		}
		out = append(out, reply)
	}
	return out
}
