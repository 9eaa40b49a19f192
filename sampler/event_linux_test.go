package sampler

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// Where the hardware PMU is absent, cycles falls back to cpu-clock with a reason a user can
// act on, logged once; with StrictEvent the same situation is an error that says what to do.
func TestHardwareEventFallback(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	if testenv.PerfEvent("cycles")() == "" {
		t.Skip("this machine has a hardware PMU: cycles needs no fallback")
	}
	for _, event := range []string{"cycles", "instructions", "r003c"} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		s, err := New(Config{Event: event, Backend: BackendRing, Logger: log})
		if err != nil {
			t.Fatalf("%s: New: %v", event, err)
		}
		c := s.Event()
		s.Close()
		if c.Requested != event || c.Used != FallbackEvent || !c.Fallback() {
			t.Errorf("%s: choice %+v, want a fallback to %s", event, c, FallbackEvent)
		}
		if !strings.Contains(c.Reason, "no hardware PMU") {
			t.Errorf("%s: reason %q does not say the PMU is missing", event, c.Reason)
		}
		if n := strings.Count(logs.String(), "instead"); n != 1 {
			t.Errorf("%s: fallback logged %d times, want once:\n%s", event, n, logs.String())
		}
		if !strings.Contains(c.String(), "asked for "+event) {
			t.Errorf("%s: String() = %q hides the fallback", event, c)
		}

		_, err = New(Config{Event: event, StrictEvent: true})
		var ee *EventError
		if !errors.As(err, &ee) || !errors.Is(err, ErrEventNotSupported) || !errors.Is(err, unix.ENOENT) {
			t.Fatalf("%s strict: error %v, want an *EventError wrapping ErrEventNotSupported and ENOENT", event, err)
		}
		for _, want := range []string{event, "no hardware PMU", "--strict-event", "--event cpu-clock"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s strict: error %q does not mention %q", event, err, want)
			}
		}
	}
}

// Software events are used as asked, without a fallback.
func TestSoftwareEventsAsAsked(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	for _, event := range []string{"cpu-clock", "task-clock"} {
		s, err := New(Config{Event: event, StrictEvent: true, Period: 1000000, Backend: BackendRing})
		if err != nil {
			t.Fatalf("%s: %v", event, err)
		}
		c := s.Event()
		s.Close()
		if c.Used != event || c.Fallback() || c.Reason != "" || c.Period != 1000000 || c.FreqHz != 0 {
			t.Errorf("%s: choice %+v", event, c)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Event: "cycels"},
		{Event: "rxyz"},
		{Event: "r"},
		{FreqHz: 99, Period: 1000},
		{Event: "cpu-clock", Backend: "dtrace"},
		{Event: "cpu-clock", Backend: BackendRing, RingPages: 3},
	} {
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Errorf("New(%+v): no error", cfg)
		}
	}
	if _, err := New(Config{Event: "cycels"}); !errors.Is(err, ErrUnknownEvent) {
		t.Errorf("unknown event: %v, want ErrUnknownEvent", err)
	}
}
