package otlpexport_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/otlpexport"
)

func Example() {
	cfg, err := otlpexport.ConfigFromEnv(otlpexport.Config{Endpoint: "http://127.0.0.1:1"}, func(string) string { return "" })
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := otlpexport.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}},
		Sample:     []*profile.Sample{{Value: []int64{1}, NumLabel: map[string][]int64{"pid": {42}}}},
	}
	e.Export(otlpexport.Profile{Pprof: p, HostName: "host", Processes: []otlpexport.Process{{Pid: 42, ExecutableName: "lli"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// Nothing listens at port 1: the request is still queued or in flight when ctx ends.
	fmt.Println(e.Close(ctx) != nil, e.Stats().FailedRequests)
	// Output: true 1
}
