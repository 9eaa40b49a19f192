package daemon

import (
	"errors"

	"github.com/profd/profd/symsource/fifo"
)

// reply answers a flush request; a JIT that leaves its replies unread loses the later
// ones, with one log line per target.
func (d *daemonRun) reply(pid uint32, r fifo.FlushReply) {
	err := d.parts.fifo.Reply(pid, r)
	if err == nil || errors.Is(err, fifo.ErrNoTarget) {
		return // answered, or the target (or profd) is gone: no one is waiting
	}
	if d.replies.first(pid) {
		d.log.Warn("profd: cannot answer a flush request; later failures for this target are not logged",
			"pid", pid, "request", r.ID, "err", err)
	}
}
