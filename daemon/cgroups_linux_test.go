package daemon

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/sampler"
)

// More cgroups than the sampler takes: the first sampler.MaxAllCgroups are set (the BPF
// map takes them), and one warning says so, however often the rest come again.
func TestKernelCgroupsPastTheMost(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	smp, err := sampler.New(sampler.Config{Backend: sampler.BackendBPF, Event: "cpu-clock", AllProcesses: true, AllCgroups: true})
	if err != nil {
		t.Fatal(err)
	}
	defer smp.Close()
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ids := make([]uint64, sampler.MaxAllCgroups+500)
	for i := range ids {
		ids[i] = uint64(1000 + i)
	}
	var k kernelCgroups
	k.set(smp, ids, log)
	k.set(smp, ids, log)
	if len(k.last) != sampler.MaxAllCgroups {
		t.Errorf("%d cgroups set, want %d", len(k.last), sampler.MaxAllCgroups)
	}
	if n := strings.Count(logs.String(), "more cgroups than the sampler tells apart"); n != 1 || strings.Contains(logs.String(), "could not be set") {
		t.Errorf("want one warning of the cgroups past the most, and no error; logged:\n%s", logs.String())
	}
	k.set(smp, ids[:10], log) // fewer again: the map lets the rest go
	if len(k.last) != 10 || strings.Contains(logs.String(), "could not be set") {
		t.Errorf("%d cgroups set after 10 were asked for; logged:\n%s", len(k.last), logs.String())
	}
}
