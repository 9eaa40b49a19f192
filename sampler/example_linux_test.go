package sampler_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/profd/profd/sampler"
)

// Sample a process for a second and print its hottest address. (Needs root and perf events;
// not run by go test.)
func ExampleNew() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := sampler.New(sampler.Config{Logger: log}) // cycles, else cpu-clock; BPF, else rings
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println("sampling", s.Event(), "with", s.Backend())
	if err := s.AddTarget(uint32(os.Getpid())); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	time.Sleep(time.Second)
	d, err := s.Drain()
	if err != nil {
		fmt.Println(err)
		return
	}
	var hot sampler.Key
	for k, n := range d.Counts {
		if n.N > d.Counts[hot].N {
			hot = k
		}
	}
	fmt.Printf("hottest: pid %d ip %#x (%d samples); %+v\n", hot.PID, hot.IP, d.Counts[hot].N, s.Stats())
}
