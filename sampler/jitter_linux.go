package sampler

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	perf "github.com/elastic/go-perf"
)

// JitterEvery is how often the sampler draws a new interval for each per-CPU timer event.
//
// A timer event (cpu-clock, task-clock) fires at a fixed interval: 1.001 ms at 999 Hz. A
// program whose phases change on a rhythm near a multiple of that interval keeps step with
// such a sampler, which then sees some phases of it and not others (testdata/rhythm.c;
// docs/sampling.md). So unless Config.FixedInterval is
// set, every JitterEvery each per-CPU timer event gets a new interval, of a rate drawn
// uniformly from [0.75, 1.25] times the one asked for (the mean rate stays the one asked
// for), and the kernel restarts its timer with it. Per-thread ring events keep a fixed
// interval: the threads a target starts later inherit copies of them, which no ioctl on
// the parent's event reaches.
const JitterEvery = 200 * time.Millisecond

// jitterSpread is the half-width of the rate's range, as a fraction of the rate.
const jitterSpread = 0.25

// timerEvent reports whether spec is a software timer event, whose period is in
// nanoseconds and fires at a fixed interval.
func (spec eventSpec) timerEvent() bool {
	return spec.kind == kindSoftware && (spec.config == 0 || spec.config == 1)
}

// jitterHz is the mean rate to vary a timer event around, or 0 when the interval stays
// fixed: not a timer event, or FixedInterval.
func jitterHz(cfg Config, spec eventSpec) float64 {
	switch {
	case cfg.FixedInterval || !spec.timerEvent():
		return 0
	case cfg.Period > 0:
		return 1e9 / float64(cfg.Period)
	default:
		return float64(cfg.FreqHz)
	}
}

// jitter varies the intervals of the events it is given, every JitterEvery, until stopped.
type jitter struct {
	hz     float64
	mu     *sync.Mutex // the back end's: events is called with it held
	events func() []*perf.Event
	log    *slog.Logger
	rng    *rand.Rand
}

// interval draws a period in nanoseconds: the rate uniform in hz × [1−spread, 1+spread].
func (j *jitter) interval() uint64 {
	rate := j.hz * (1 - jitterSpread + 2*jitterSpread*j.rng.Float64())
	return max(uint64(1e9/rate), 10_000) // the kernel's floor for timer events is 10 µs
}

// run redraws the intervals until ctx is done. A kernel that refuses a new period gets one
// Warn line, and the intervals stay as they are.
func (j *jitter) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	t := time.NewTicker(JitterEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j.mu.Lock()
		var err error
		for _, ev := range j.events() {
			if err = ev.UpdatePeriod(j.interval()); err != nil {
				break
			}
		}
		j.mu.Unlock()
		if err != nil {
			j.log.Warn("sampler: cannot vary the sampling interval; it stays fixed, and a program whose phases keep step with it may show some of them too much", "err", err)
			return
		}
	}
}

// startJitter starts varying, until ctx is done, the intervals of the events events returns
// (called with mu held) around hz (jitterHz; 0 starts nothing); wg counts the goroutine.
func startJitter(ctx context.Context, wg *sync.WaitGroup, hz float64, log *slog.Logger, mu *sync.Mutex, events func() []*perf.Event) {
	if hz == 0 {
		return
	}
	j := &jitter{hz: hz, mu: mu, events: events, log: log, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	wg.Add(1)
	go j.run(ctx, wg)
}
