package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// targetNotesPerMinute is how many lines a minute say that a target came or went, in the
// log and in the summary each, before the rest of the minute's are left out (see
// targetNotes).
const targetNotesPerMinute = 30

// targetNotes bounds the lines that say a target came or went: "target added", "target
// exited", its final profile's "flushed" and its "no JIT function" in the log, "attached
// to pid" in the summary. While targets are few (explicit pids, the JITs of a --jit-image)
// each has its lines; a storm of processes under --all or --jit-image (a shell loop, a
// PostgreSQL backend per connection) would write thousands a minute, which an operator's
// journal keeps for weeks and rate-limits away with the lines that matter. Past
// targetNotesPerMinute in a minute, the rest of the minute's log lines are at Debug level
// only and its summary lines are left out, each after one line that says so; the counters
// line of each flush counts every target added.
type targetNotes struct {
	log, out noteBudget
}

// noteBudget is one minute's allowance of lines.
type noteBudget struct {
	mu     sync.Mutex
	minute time.Time // when the current minute began
	n      int       // lines asked for in it so far
}

// take asks for one line at now. It reports whether the line is within the minute's
// allowance, and, for the first line past it, that the minute's allowance just ran out.
func (b *noteBudget) take(now time.Time) (ok, ranOut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.minute) >= time.Minute {
		b.minute, b.n = now, 0
	}
	b.n++
	return b.n <= targetNotesPerMinute, b.n == targetNotesPerMinute+1
}

// logTarget logs msg about a target to log at Info level, or at Debug past the minute's
// allowance.
func (t *targetNotes) logTarget(log *slog.Logger, msg string, args ...any) {
	level := slog.LevelInfo
	if ok, ranOut := t.log.take(time.Now()); !ok {
		level = slog.LevelDebug
		if ranOut {
			log.Info(fmt.Sprintf("profd: more than %d lines on targets' coming and going in the last minute: the rest of this minute's are at debug level (--log-level debug); each flush's counters line counts the targets", targetNotesPerMinute))
		}
	}
	log.Log(context.Background(), level, msg, args...)
}

// printTarget writes a line about a target to out (the summary), but past the minute's
// allowance. Its string arguments are shown as names a target chose are (shown).
func (t *targetNotes) printTarget(out io.Writer, format string, args ...any) {
	ok, ranOut := t.out.take(time.Now())
	switch {
	case ok:
		for i, a := range args {
			if s, isString := a.(string); isString {
				args[i] = shown(s)
			}
		}
		fmt.Fprintf(out, format, args...)
	case ranOut:
		fmt.Fprintf(out, "profd: more than %d targets set up in the last minute: the rest of this minute's are not listed\n", targetNotesPerMinute)
	}
}
