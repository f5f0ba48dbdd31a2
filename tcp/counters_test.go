package tcp

import "testing"

// TestCountersAreInfos: Counters is Info's Counters, for an endpoint that
// has sent and been acknowledged (the stack sums it for Stats).
func TestCountersAreInfos(t *testing.T) {
	h := established(t, testConfig())
	if _, err := h.ep.Write(data(50_000)); err != nil {
		t.Fatal(err)
	}
	h.ackUpTo(h.ep.snd.nxt)
	got, want := h.ep.Counters(), h.ep.Info().Counters
	if got != want || got.DataSegsOut == 0 {
		t.Fatalf("Counters %+v, Info's %+v", got, want)
	}
}
