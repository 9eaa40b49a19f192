package targets

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// procEventMsg builds one connector message carrying a proc_event of kind what for tgid, at
// time ns.
func procEventMsg(what uint32, tgid uint32, ns uint64) []byte {
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
	ne.PutUint64(ev[8:], ns)
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
	buf = append(buf, procEventMsg(procEventExec, 42, 1000)...)
	buf = append(buf, procEventMsg(0x80000000, 43, 1001)...) // exit: skipped
	buf = append(buf, forkMsg(42, 50, 50)...)                // a new process
	buf = append(buf, forkMsg(42, 51, 42)...)                // a new thread of 42: skipped
	buf = append(buf, procEventMsg(procEventExec, 44, 1002)...)
	buf = append(buf, procEventMsg(procEventUID, 45, 1003)...)
	buf = append(buf, procEventMsg(procEventExec, 46, 1<<63)...) // past int64: the latest time there is
	got, err := changedProcesses(buf)
	want := []procChange{{tgid: 42, execNs: 1000}, {tgid: 50, parent: 42}, {tgid: 44, execNs: 1002}, {tgid: 45}, {tgid: 46, execNs: math.MaxInt64}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("changedProcesses = %v, %v; want %v", got, err, want)
	}

	bad := append(procEventMsg(procEventExec, 7, 5), 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	got, err = changedProcesses(bad)
	if !errors.Is(err, errBadProcEvent) || !strings.Contains(err.Error(), "byte 60") || !slices.Equal(got, []procChange{{tgid: 7, execNs: 5}}) {
		t.Fatalf("changedProcesses(bad) = %v, %v; want [{7 5}] and an error at byte 60", got, err)
	}
}

func TestListenMessage(t *testing.T) {
	m := listenMessage()
	ne := binary.NativeEndian
	if int(ne.Uint32(m)) != len(m) || ne.Uint32(m[nlmsgHeaderBytes:]) != cnIdxProc || ne.Uint32(m[len(m)-4:]) != procCnListen {
		t.Errorf("listen message % x", m)
	}
}

func FuzzChangedProcesses(f *testing.F) {
	f.Add(procEventMsg(procEventExec, 1, 1))
	f.Add(append(procEventMsg(procEventExec, 1, 1), procEventMsg(2, 3, 2)[:20]...))
	f.Add([]byte{16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(forkMsg(1, 2, 2))
	f.Add(procEventMsg(procEventUID, 3, 3))
	f.Fuzz(func(t *testing.T, buf []byte) {
		tgids, err := changedProcesses(buf)
		if len(tgids) > len(buf)/(nlmsgHeaderBytes+cnMsgBytes+procEventHead+8) {
			t.Fatalf("%d tgids from %d bytes", len(tgids), len(buf))
		}
		for _, c := range tgids {
			if c.execNs < 0 || c.execNs != 0 && c.parent != 0 {
				t.Fatalf("exec time %d, parent %d", c.execNs, c.parent)
			}
		}
		if err != nil && !errors.Is(err, errBadProcEvent) {
			t.Fatalf("error %v does not wrap errBadProcEvent", err)
		}
	})
}
