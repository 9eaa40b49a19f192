package fifo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// FlushReply answers a JIT's flush request (jitmap.FlushRequest) on its reply FIFO,
// <dir>/<pid>.reply. On the wire (the machine's byte order, as jit/profd_jit.h reads it):
//
//	u32 magic 0x31524650 ("PFR1")   u32 total_size (header and paths)
//	u64 request_id
//	i32 status (0, or an errno)     u32 npaths
//	npaths paths, each ending in a NUL byte
//
// A reply is one write(2) of at most 4096 bytes (PIPE_BUF), so a reader never sees part of
// one.
type FlushReply struct {
	ID     uint64
	Status syscall.Errno // 0: the profiles were written; E2BIG: the paths that fit
	Paths  []string
}

const (
	replyMagic       = 0x31524650
	replyHeaderBytes = 24
	maxReplyBytes    = 4096
)

var (
	// ErrReplyFull: the JIT has not read its earlier replies and the reply FIFO is full;
	// the reply was dropped.
	ErrReplyFull = errors.New("reply FIFO full: the JIT does not read its replies")
	// ErrNoTarget: the process has no FIFOs (it is not a target, or it exited).
	ErrNoTarget = errors.New("no such target")
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

// Reply sends r to pid's reply FIFO without waiting: ErrReplyFull when the JIT left the
// FIFO full, ErrNoTarget when pid has no FIFO.
func (s *Server) Reply(pid uint32, r FlushReply) error {
	s.mu.Lock()
	t := s.targets[pid]
	s.mu.Unlock()
	if t == nil {
		return fmt.Errorf("fifo: reply to pid %d: %w", pid, ErrNoTarget)
	}
	t.replyMu.Lock()
	defer t.replyMu.Unlock()
	if t.reply == nil {
		return fmt.Errorf("fifo: reply to pid %d: %w", pid, ErrNoTarget)
	}
	_, err := unix.Write(t.reply.fd, r.encode())
	switch {
	case errors.Is(err, unix.EAGAIN):
		return fmt.Errorf("fifo: %s: %w", t.reply.path, ErrReplyFull)
	case err != nil:
		return fmt.Errorf("fifo: %s: %w", t.reply.path, os.NewSyscallError("write", err))
	}
	return nil
}

// ReplyPath is where the reply FIFO of process pid is (or would be).
func (s *Server) ReplyPath(pid uint32) string { return s.dir.Path() + "/" + replyName(pid) }
