package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A storm of targets has targetNotesPerMinute lines a minute at Info level and in the
// summary, and one line more in each saying that the rest are left out: in the log they
// are at Debug level, every one of them.
func TestTargetNotesBounded(t *testing.T) {
	var logs, out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var notes targetNotes
	const storm = 1000
	for pid := range storm {
		notes.logTarget(log, "profd: target added", "pid", pid)
		notes.printTarget(&out, "profd: attached to pid %d\n", pid)
	}
	info := strings.Count(logs.String(), `level=INFO msg="profd: target added"`)
	debug := strings.Count(logs.String(), `level=DEBUG msg="profd: target added"`)
	if info != targetNotesPerMinute || info+debug != storm {
		t.Errorf("%d targets added: %d lines at Info, %d at Debug; want %d at Info and the rest at Debug", storm, info, debug, targetNotesPerMinute)
	}
	if n := strings.Count(logs.String(), "level=INFO msg=\"profd: more than"); n != 1 {
		t.Errorf("%d lines say that the rest are logged at debug level, want 1:\n%s", n, logs.String())
	}
	if n, said := strings.Count(out.String(), "attached to pid"), strings.Count(out.String(), "not listed"); n != targetNotesPerMinute || said != 1 {
		t.Errorf("the summary lists %d targets and says %d times that the rest are not, want %d and once:\n%s", n, said, targetNotesPerMinute, out.String())
	}
}

// A minute's allowance comes back a minute after the minute began.
func TestNoteBudgetMinutes(t *testing.T) {
	var b noteBudget
	start := time.Now()
	for i := range targetNotesPerMinute {
		if ok, ranOut := b.take(start.Add(time.Duration(i) * time.Second)); !ok || ranOut {
			t.Fatalf("line %d of the minute: within %v, ran out %v", i+1, ok, ranOut)
		}
	}
	at := start.Add(59 * time.Second)
	if ok, ranOut := b.take(at); ok || !ranOut {
		t.Errorf("the first line past the allowance: within %v, ran out %v", ok, ranOut)
	}
	if ok, ranOut := b.take(at); ok || ranOut {
		t.Errorf("the second line past the allowance: within %v, ran out %v", ok, ranOut)
	}
	if ok, _ := b.take(start.Add(time.Minute)); !ok {
		t.Errorf("a minute after the minute began: not within the allowance")
	}
}

// A flush of many outputs logs the first outputLinesPerFlush at Info level and the rest at
// Debug; processes' own final profiles are left to targetNotes.
func TestMarkQuiet(t *testing.T) {
	work := make([]pending, outputLinesPerFlush+10)
	for i := range 5 {
		work[i*7].final = true // a process's own final profile
	}
	shown, quiet := markQuiet(work)
	if shown != outputLinesPerFlush || quiet != 5 {
		t.Errorf("%d outputs, 5 of them processes' final profiles: %d shown, %d quiet; want %d and 5", len(work), shown, quiet, outputLinesPerFlush)
	}
	for i, w := range work {
		if w.quiet && (w.ownFinal() || i < outputLinesPerFlush) {
			t.Errorf("output %d (a final profile: %v) marked quiet", i, w.ownFinal())
		}
	}
}

// Under --group-by process, the run warns once when it has admitted manyProcesses
// processes, each with outputs of its own.
func TestManyProcessesWarnedOnce(t *testing.T) {
	var logs bytes.Buffer
	d := &daemonRun{log: slog.New(slog.NewTextHandler(&logs, nil))}
	d.locked.processes = map[string]int{}
	warnings := func() int { return strings.Count(logs.String(), "many processes profiled") }
	for i := range 3 * manyProcesses {
		d.locked.processes[outputBase("postgres", uint32(i+1), 1)]++
		d.noteManyProcessesLocked()
		if want := min(1, (i+1)/manyProcesses); warnings() != want {
			t.Fatalf("after %d processes: %d warnings, want %d", i+1, warnings(), want)
		}
	}
}
