package fifo

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReply: a target's reply FIFO is made beside its symbols FIFO, owned by the target's
// user, mode 0600; a reply waits in it until the JIT reads it, whole; a JIT that never
// reads fills it and later replies are refused with ErrReplyFull, not blocked on.
func TestReply(t *testing.T) {
	s, _, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(s.ReplyPath(pid), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Mode&0o7777 != 0o600 || st.Uid != uint32(testOwner.UID) {
		t.Fatalf("reply FIFO mode %#o uid %d, want a FIFO 0600 owned by %d", st.Mode, st.Uid, testOwner.UID)
	}
	// Sent before the JIT opens the FIFO: it waits there.
	if err := s.Reply(pid, FlushReply{ID: 7, Paths: []string{"/out/a.prof.txt", "/out/a.profd"}}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("p", 3000)
	if err := s.Reply(pid, FlushReply{ID: 8, Paths: []string{long, long}}); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(s.ReplyPath(pid), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 16384)
	n, err := unix.Read(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	type reply struct {
		id     uint64
		status int32
		paths  []string
	}
	var got []reply
	for b := buf[:n]; len(b) > 0; {
		o := binary.NativeEndian
		total := int(o.Uint32(b[4:]))
		if o.Uint32(b) != replyMagic || total > len(b) || total > maxReplyBytes {
			t.Fatalf("bad reply % x", b[:min(len(b), 24)])
		}
		paths := strings.Split(strings.TrimSuffix(string(b[24:total]), "\x00"), "\x00")
		if int(o.Uint32(b[20:])) != len(paths) {
			t.Fatalf("npaths %d, paths %q", o.Uint32(b[20:]), paths)
		}
		got = append(got, reply{o.Uint64(b[8:]), int32(o.Uint32(b[16:])), paths})
		b = b[total:]
	}
	if len(got) != 2 || got[0].id != 7 || got[0].status != 0 || strings.Join(got[0].paths, " ") != "/out/a.prof.txt /out/a.profd" {
		t.Fatalf("replies %+v", got)
	}
	if got[1].id != 8 || got[1].status != int32(syscall.E2BIG) || len(got[1].paths) != 1 {
		t.Errorf("a reply past 4096 bytes: %+v, want E2BIG with the one path that fits", got[1])
	}

	var full error
	for i := 0; i < 10000 && full == nil; i++ {
		full = s.Reply(pid, FlushReply{ID: uint64(i), Paths: []string{long}})
	}
	if !errors.Is(full, ErrReplyFull) {
		t.Errorf("replies never read: %v, want ErrReplyFull", full)
	}
	s.RemoveTarget(pid)
	if _, err := os.Lstat(s.ReplyPath(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reply FIFO left behind: %v", err)
	}
	if err := s.Reply(pid, FlushReply{ID: 1}); !errors.Is(err, ErrNoTarget) {
		t.Errorf("reply after the target went: %v, want ErrNoTarget", err)
	}
}

// TestReplyFIFORefusesPlantedFile: something planted at a target's reply FIFO's name is not
// followed or reused; the target gets no FIFOs at all.
func TestReplyFIFORefusesPlantedFile(t *testing.T) {
	s, _, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, s.ReplyPath(pid)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTarget(pid, testOwner); !errors.Is(err, ErrNotFIFO) {
		t.Fatalf("AddTarget with a symlink at the reply FIFO: %v, want ErrNotFIFO", err)
	}
	if _, err := os.Lstat(s.FIFOPath(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("symbols FIFO left behind: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target changed: %q", b)
	}
}

// TestReplyAfterStopReading: once the readers stop (a daemon's stop), the FIFOs stay, and a
// reply still reaches the JIT, until Close removes them.
func TestReplyAfterStopReading(t *testing.T) {
	s, _, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, testOwner); err != nil {
		t.Fatal(err)
	}
	s.StopReading(time.Time{})
	if err := s.AddTarget(pid+1, testOwner); !errors.Is(err, ErrClosed) {
		t.Errorf("a target added after the readers stopped: %v, want ErrClosed", err)
	}
	if err := s.Reply(pid, FlushReply{ID: 3, Paths: []string{"/out/a.profd"}}); err != nil {
		t.Fatalf("a reply after the readers stopped: %v", err)
	}
	fd, err := unix.Open(s.ReplyPath(pid), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	if n, err := unix.Read(fd, buf); err != nil || n < 24 || binary.NativeEndian.Uint64(buf[8:]) != 3 {
		t.Fatalf("read %d bytes (%v), want the reply to request 3", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.ReplyPath(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reply FIFO left behind by Close: %v", err)
	}
}
