package mcf

import (
	"errors"
	"testing"
)

func TestNetworkValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		net  Network
	}{
		{"endpoint", Network{Nodes: 1, Arcs: []Arc{{From: 0, To: 1}}, Source: -1, Sink: -1, Return: -1}},
		{"capacity", Network{Nodes: 1, Arcs: []Arc{{Cap: -1}}, Source: -1, Sink: -1, Return: -1}},
		{"huge capacity", Network{Nodes: 1, Arcs: []Arc{{Cap: MaxArcCapacity + 1}}, Source: -1, Sink: -1, Return: -1}},
		{"cost", Network{Nodes: 1, Arcs: []Arc{{Cost: MaxArcCost + 1}}, Source: -1, Sink: -1, Return: -1}},
		{"marks", Network{Nodes: 2, Arcs: []Arc{{From: 1, To: 0}}, Source: 0, Sink: 1, Return: -1}},
		{"return arc", Network{Nodes: 2, Arcs: []Arc{{From: 0, To: 1}}, Source: 0, Sink: 1, Return: 0}},
	} {
		for _, s := range []Solver{SSPSolver(), SimplexSolver(), ReferenceSolver()} {
			if _, err := s.Solve(&tc.net); !errors.Is(err, ErrBadNetwork) {
				t.Errorf("%s/%s: err = %v, want ErrBadNetwork", tc.name, s.Name(), err)
			}
		}
	}
}

// TestSolversOnNegativeCycles checks the solvers on a general network (not one Repair
// builds): two negative cycles sharing an arc, bounded by capacities.
func TestSolversOnNegativeCycles(t *testing.T) {
	net := Network{Nodes: 3, Source: -1, Sink: -1, Return: -1, Arcs: []Arc{
		{From: 0, To: 1, Cap: 5, Cost: -3},
		{From: 1, To: 0, Cap: 10, Cost: 1},
		{From: 1, To: 2, Cap: 4, Cost: -1},
		{From: 2, To: 0, Cap: 4, Cost: 0},
		{From: 2, To: 2, Cap: 3, Cost: -2}, // a negative self-loop
	}}
	for _, s := range []Solver{SSPSolver(), SimplexSolver(), ReferenceSolver()} {
		f, err := s.Solve(&net)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		if err := net.CheckCirculation(f); err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		// Best: 4 units around 0→1→2→0 (-4 each), 1 unit around 0→1→0 (-2), self-loop 3 (-6).
		if c := net.Cost(f); c != -24 {
			t.Errorf("%s: cost %d, want -24 (flow %v)", s.Name(), c, f)
		}
	}
}
