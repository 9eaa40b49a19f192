package sampler

import (
	"errors"
	"fmt"
	"os"
)

// New chooses the event (see EventChoice) and opens the back end; sampling begins at Start.
// With BackendAuto it uses BPF where the program loads and says why when it cannot.
func New(cfg Config) (Sampler, error) {
	cfg = cfg.withDefaults()
	if cfg.FreqHz > 0 && cfg.Period > 0 {
		return nil, errors.New("sampler: config: frequency and period are exclusive")
	}
	choice, spec, err := chooseEvent(cfg, cfg.Logger)
	if err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case BackendBPF:
		s, err := newBPFSampler(cfg, choice, spec)
		if notRoot(err) {
			return nil, fmt.Errorf("sampler: the BPF back end needs root's rights (CAP_BPF and CAP_PERFMON), which uid %d does not have; the ring back end (--backend ring) samples a user's own processes", os.Geteuid())
		}
		return orNil(s, err)
	case BackendRing:
		return orNil(newRingSampler(cfg, choice, spec))
	case BackendAuto:
		s, err := newBPFSampler(cfg, choice, spec)
		if err == nil {
			return s, nil
		}
		if notRoot(err) {
			cfg.Logger.Warn("sampler: BPF back end unavailable to a user other than root (it needs CAP_BPF and CAP_PERFMON), reading perf ring buffers instead",
				"uid", os.Geteuid())
			return orNil(newRingSampler(cfg, choice, spec))
		}
		cfg.Logger.Warn("sampler: BPF back end unavailable, reading perf ring buffers instead", "reason", err)
		return orNil(newRingSampler(cfg, choice, spec))
	default:
		return nil, fmt.Errorf("sampler: backend %q: want %q or %q", cfg.Backend, BackendBPF, BackendRing)
	}
}

// notRoot reports whether err is the BPF back end refused to a user other than root. The
// library's own hint for it (a low RLIMIT_MEMLOCK) would mislead: loading the program and
// its maps takes root's rights (CAP_BPF and CAP_PERFMON).
func notRoot(err error) bool {
	return errors.Is(err, os.ErrPermission) && os.Geteuid() != 0
}

// orNil returns s as a Sampler, or a nil Sampler (not one holding a nil pointer) with err.
func orNil[S interface {
	Sampler
	comparable
}](s S, err error) (Sampler, error) {
	var zero S
	if err != nil || s == zero {
		return nil, err
	}
	return s, nil
}

// allBut is the tgid whose samples AllProcesses leaves out (profd's own), 0 without it.
func (c Config) allBut() uint32 {
	if c.AllProcesses {
		return uint32(os.Getpid())
	}
	return 0
}
