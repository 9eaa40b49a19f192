package sampler

import (
	"log/slog"
	"time"

	perf "github.com/elastic/go-perf"

	"github.com/profd/profd/internal/percpu"
)

// followCPUs is a per-CPU back end's look at its events (percpu.Events.Check): an event
// whose CPU went offline is handed to drop, which closes it, and on each CPU online
// without one (back, or online for the first time) open's event is enabled and sampled
// from then on. Called with the back end's mutex held.
func followCPUs(evs *percpu.Events, now time.Time, log *slog.Logger, open func(cpu int) (*perf.Event, error), drop func(*perf.Event)) {
	opened := evs.Check(now, func(cpu int) (*perf.Event, error) {
		ev, err := open(cpu)
		if err == nil {
			if err = ev.Enable(); err != nil {
				ev.Close()
			}
		}
		if err != nil {
			log.Debug("sampler: cpu online but not sampled yet", "cpu", cpu, "err", err)
		}
		return ev, err
	}, drop)
	if len(opened) > 0 {
		log.Info("sampler: cpus online again, or for the first time: sampled from now on", "cpus", opened)
	}
}
