package engine

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Status is the body of /readyz.
type Status struct {
	// Ready is true when the engine processes events.
	Ready bool `json:"ready"`
	// TreeIndex is the index of the tree events are evaluated against (0:
	// none yet).
	TreeIndex uint64 `json:"tree_index"`
	// Joined is true while the engine is a member of the consumer group.
	Joined bool `json:"joined"`
	// Partitions are the partitions assigned to the engine.
	Partitions []int `json:"partitions"`
	// Draining is true while the engine shuts down.
	Draining bool `json:"draining"`
	// Reasons say, in words, why the engine is not ready; empty when it is.
	Reasons []string `json:"reasons"`
	// Warnings say what a ready engine may want an operator to know (no
	// partitions assigned, a failing tree watch).
	Warnings []string `json:"warnings"`
}

// Handler returns the ops endpoints: GET /healthz (the process is up),
// GET /readyz (200 when Ready, else 503; a [Status] body) and GET
// /metrics (Prometheus).
func (s *Service) Handler() http.Handler { return s.mux }

func (s *Service) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		a := s.Assignment()
		st := Status{
			Ready:      s.Ready(),
			TreeIndex:  s.TreeIndex(),
			Joined:     a.Joined,
			Partitions: a.Partitions,
			Draining:   s.draining.Load(),
		}
		if st.Partitions == nil {
			st.Partitions = []int{}
		}
		st.Reasons, st.Warnings = s.readiness()
		if st.Ready {
			st.Reasons = nil // a reason seen between the two reads
		}
		if st.Reasons == nil {
			st.Reasons = []string{}
		}
		if st.Warnings == nil {
			st.Warnings = []string{}
		}
		code := http.StatusOK
		if !st.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, st)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
