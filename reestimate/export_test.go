package reestimate

import (
	"slices"
	"testing"

	"github.com/profd/profd/reestimate/cfg"
)

// RepairNetwork returns the network Repair builds for g and weights, for the tests inside
// and outside the package.
func RepairNetwork(tb testing.TB, g *cfg.Graph, weights []float64) *Network {
	tb.Helper()
	var c capturing
	if _, err := Repair(g, weights, Options{Solver: &c}); err != nil {
		tb.Fatal(err)
	}
	return c.net
}

// capturing is a Solver that keeps a copy of the network Repair hands it and solves it.
type capturing struct{ net *Network }

func (c *capturing) Name() string { return "capturing" }

func (c *capturing) Solve(net *Network) ([]int64, error) {
	c.net = &Network{Nodes: net.Nodes, Arcs: slices.Clone(net.Arcs), Source: net.Source, Sink: net.Sink, Return: net.Return}
	return FastSolver().Solve(net)
}
