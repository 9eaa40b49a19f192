package targets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The process-events connector (linux/connector.h, linux/cn_proc.h) delivers netlink messages:
// nlmsghdr (16 bytes), cn_msg (20 bytes), then proc_event: u32 what, u32 cpu, u64 timestamp,
// and for an exec, u32 process_pid, u32 process_tgid; for a fork, u32 parent_pid,
// parent_tgid, child_pid, child_tgid; for a change of user, u32 process_pid, process_tgid,
// ruid, euid.
const (
	nlmsgHeaderBytes = 16
	cnMsgBytes       = 20
	procEventHead    = 16
	procEventFork    = 0x00000001
	procEventExec    = 0x00000002
	procEventUID     = 0x00000004
	cnIdxProc        = 1
	cnValProc        = 1
	nlmsgDone        = 3
	procCnListen     = 1
)

// errBadProcEvent is wrapped by errors about connector messages that do not parse.
var errBadProcEvent = errors.New("bad process event")

// procChange is a process event that can make a process a target or stop it being one: the
// process's tgid and, for an exec, the time the kernel stamped it with (CLOCK_MONOTONIC,
// ns; 0 for a fork or a change of user); for a fork, the process that forked it (its
// parent's tgid; 0 otherwise).
type procChange struct {
	tgid   uint32
	execNs int64
	parent uint32
}

// changedProcesses returns the tgid of every exec (with its time) and change-of-user event in
// a datagram from the connector, and of every fork that made a process (not a thread: child
// pid == child tgid; with its parent), in order: the events that can make a process a
// target or stop it being one. Other events are skipped; a message that does not fit is
// reported with its byte offset, and the events before it are still returned.
func changedProcesses(buf []byte) ([]procChange, error) {
	ne := binary.NativeEndian
	var tgids []procChange
	for off := 0; off < len(buf); {
		if len(buf)-off < nlmsgHeaderBytes {
			return tgids, fmt.Errorf("targets: process event at byte %d: %w: %d bytes left", off, errBadProcEvent, len(buf)-off)
		}
		size := int(ne.Uint32(buf[off:]))
		if size < nlmsgHeaderBytes || size > len(buf)-off {
			return tgids, fmt.Errorf("targets: process event at byte %d: %w: length %d", off, errBadProcEvent, size)
		}
		msg := buf[off+nlmsgHeaderBytes : off+size]
		if len(msg) >= cnMsgBytes+procEventHead {
			idx, val := ne.Uint32(msg), ne.Uint32(msg[4:])
			ev := msg[cnMsgBytes:]
			if idx == cnIdxProc && val == cnValProc {
				switch what := ne.Uint32(ev); {
				case what == procEventExec && len(ev) >= procEventHead+8:
					ns := int64(min(ne.Uint64(ev[8:]), math.MaxInt64))
					tgids = append(tgids, procChange{tgid: ne.Uint32(ev[procEventHead+4:]), execNs: ns})
				case what == procEventUID && len(ev) >= procEventHead+8:
					tgids = append(tgids, procChange{tgid: ne.Uint32(ev[procEventHead+4:])})
				case what == procEventFork && len(ev) >= procEventHead+16:
					if child := ne.Uint32(ev[procEventHead+8:]); child == ne.Uint32(ev[procEventHead+12:]) {
						tgids = append(tgids, procChange{tgid: child, parent: ne.Uint32(ev[procEventHead+4:])})
					}
				}
			}
		}
		off += (size + 3) &^ 3 // NLMSG_ALIGN
	}
	return tgids, nil
}

// listenMessage is the request that subscribes a connector socket to process events.
func listenMessage() []byte {
	ne := binary.NativeEndian
	const total = nlmsgHeaderBytes + cnMsgBytes + 4
	b := make([]byte, total)
	ne.PutUint32(b, total)
	ne.PutUint16(b[4:], nlmsgDone)
	m := b[nlmsgHeaderBytes:]
	ne.PutUint32(m, cnIdxProc)
	ne.PutUint32(m[4:], cnValProc)
	ne.PutUint16(m[16:], 4) // payload length
	ne.PutUint32(m[cnMsgBytes:], procCnListen)
	return b
}
