package fifo

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

var (
	// ErrReplyFull: the JIT has not read its earlier replies and the reply FIFO is full;
	// the reply was dropped.
	ErrReplyFull = errors.New("reply FIFO full: the JIT does not read its replies")
	// ErrNoTarget: the process has no FIFOs (it is not a target, or it exited).
	ErrNoTarget = errors.New("no such target")
)

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
