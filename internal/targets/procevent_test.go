package targets

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// procEventMsg builds one connector message carrying a proc_event of kind what for tgid.
func procEventMsg(what uint32, tgid uint32) []byte {
	ne := binary.NativeEndian
	const total = nlmsgHeaderBytes + cnMsgBytes + procEventHead + 8
	b := make([]byte, total)
	ne.PutUint32(b, total)
	m := b[nlmsgHeaderBytes:]
	ne.PutUint32(m, cnIdxProc)
	ne.PutUint32(m[4:], cnValProc)
	ne.PutUint16(m[16:], procEventHead+8)
	ev := m[cnMsgBytes:]
	ne.PutUint32(ev, what)
	ne.PutUint32(ev[procEventHead:], tgid+1) // thread id
	ne.PutUint32(ev[procEventHead+4:], tgid)
	return b
}

// forkMsg builds a fork event: parent's thread ptid of process ptgid made child thread
// cpid of process ctgid.
func forkMsg(ptgid, cpid, ctgid uint32) []byte {
	ne := binary.NativeEndian
	const total = nlmsgHeaderBytes + cnMsgBytes + procEventHead + 16
	b := make([]byte, total)
	ne.PutUint32(b, total)
	m := b[nlmsgHeaderBytes:]
	ne.PutUint32(m, cnIdxProc)
	ne.PutUint32(m[4:], cnValProc)
	ne.PutUint16(m[16:], procEventHead+16)
	ev := m[cnMsgBytes:]
	ne.PutUint32(ev, procEventFork)
	ne.PutUint32(ev[procEventHead:], ptgid)
	ne.PutUint32(ev[procEventHead+4:], ptgid)
	ne.PutUint32(ev[procEventHead+8:], cpid)
	ne.PutUint32(ev[procEventHead+12:], ctgid)
	return b
}

func TestNewProcesses(t *testing.T) {
	var buf []byte
	buf = append(buf, procEventMsg(procEventExec, 42)...)
	buf = append(buf, procEventMsg(0x80000000, 43)...) // exit: skipped
	buf = append(buf, forkMsg(42, 50, 50)...)          // a new process
	buf = append(buf, forkMsg(42, 51, 42)...)          // a new thread of 42: skipped
	buf = append(buf, procEventMsg(procEventExec, 44)...)
	got, err := newProcesses(buf)
	if err != nil || len(got) != 3 || got[0] != 42 || got[1] != 50 || got[2] != 44 {
		t.Fatalf("newProcesses = %v, %v; want [42 50 44]", got, err)
	}

	bad := append(procEventMsg(procEventExec, 7), 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	got, err = newProcesses(bad)
	if !errors.Is(err, errBadProcEvent) || !strings.Contains(err.Error(), "byte 60") || len(got) != 1 || got[0] != 7 {
		t.Fatalf("newProcesses(bad) = %v, %v; want [7] and an error at byte 60", got, err)
	}
}

func TestListenMessage(t *testing.T) {
	m := listenMessage()
	ne := binary.NativeEndian
	if int(ne.Uint32(m)) != len(m) || ne.Uint32(m[nlmsgHeaderBytes:]) != cnIdxProc || ne.Uint32(m[len(m)-4:]) != procCnListen {
		t.Errorf("listen message % x", m)
	}
}

func FuzzNewProcesses(f *testing.F) {
	f.Add(procEventMsg(procEventExec, 1))
	f.Add(append(procEventMsg(procEventExec, 1), procEventMsg(2, 3)[:20]...))
	f.Add([]byte{16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(forkMsg(1, 2, 2))
	f.Fuzz(func(t *testing.T, buf []byte) {
		tgids, err := newProcesses(buf)
		if len(tgids) > len(buf)/(nlmsgHeaderBytes+cnMsgBytes+procEventHead+8) {
			t.Fatalf("%d tgids from %d bytes", len(tgids), len(buf))
		}
		if err != nil && !errors.Is(err, errBadProcEvent) {
			t.Fatalf("error %v does not wrap errBadProcEvent", err)
		}
	})
}
